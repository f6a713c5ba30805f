"""The events of a finished run of a program (protocol.py) as graphs, failures and notes.

One reading for every consumer: ``tcompile run`` (classify.py), the program-level
oracle (program.py) and bisect's probes (probe.py).  A process that died says nothing
more: its memory-mapped marker names the graph it was in (dead.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .cause import Cause, died_where_raised
from .crash import fatal_stack
from .dead import dead_process_failures
from .failure import Failure, dist_of
from .limitations import documented_limitation
from .protocol import Event
from .runner import ProcessResult
from .signature import FailureKind, FailureSignature

_GRAPH_FIELDS = (
    "index",
    "frame",
    "kind",
    "nodes",
    "stage",
    "compile_seconds",
    "file",
    "line",
    "compile_id",
    "break_reason",
    "device",
)


def collect(
    result: ProcessResult,
) -> tuple[list[dict[str, Any]], list[Failure], list[dict[str, Any]]]:
    """Graphs, failures and notes out of a finished process's events and markers."""
    failures: list[Failure] = []
    notes: list[dict[str, Any]] = []
    multi = len({e.get("pid") for e in result.events if e.get("event") == Event.GRAPH}) > 1
    dynamo: dict[tuple[Any, Any], dict[str, Any]] = {}
    children: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in result.events:
        kind, pid = e.get("event"), e.get("pid")
        if kind == Event.GRAPH:
            g = {k: e.get(k) for k in _GRAPH_FIELDS}
            g.update(level="dynamo", gated=bool(e.get("gated")), failed=bool(e.get("failed")))
            g["collectives"] = bool(e.get("collectives"))
            dynamo[(pid, e.get("index"))] = g | ({"pid": pid} if multi else {}) | dist_of(e)
        elif kind == Event.AOT_GRAPH:
            g = {k: e.get(k) for k in ("index", "kind", "nodes", "stage", "compile_seconds")}
            g.update(level="aot", failed=bool(e.get("failed")))
            children.setdefault((pid, e.get("index")), []).append(
                g | ({"pid": pid} if multi else {}) | dist_of(e)
            )
        elif kind == Event.FAILURE:
            failures.append(_failure_from_event(e, multi))
        elif kind == Event.NOTE:
            _add_note(notes, e)
        elif kind == Event.EXCEPTION and e.get("after_graph") is not None:
            f = _late_cuda_failure(e, failures, multi)
            if f is not None:
                failures.append(f)
        elif kind == Event.EXCEPTION and e.get("dynamo"):
            failures.append(_capture_failure(e, multi))
    if result.timed_out or (result.returncode is not None and result.returncode < 0):
        failures.extend(dead_process_failures(result, dynamo))
    return _graph_rows(dynamo, children), failures, notes


def _add_note(notes: list[dict[str, Any]], e: dict[str, Any]) -> None:
    """A note once, however many ranks of a job said it (``ranks``: which did)."""
    rank = e.get("rank")
    for n in notes:
        if n["graph"] == e.get("graph") and n["text"] == e.get("text"):
            if rank is not None and rank not in n.setdefault("ranks", []):
                n["ranks"] = sorted([*n["ranks"], rank])
            return
    notes.append(
        {"graph": e.get("graph"), "text": e.get("text")}
        | ({"tag": e["tag"]} if e.get("tag") else {})
        | ({"ranks": [rank]} if rank is not None else {})
    )


def _graph_rows(
    dynamo: dict[tuple[Any, Any], dict[str, Any]],
    children: dict[tuple[Any, Any], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """Each Dynamo graph followed by its AOT graphs."""
    graphs: list[dict[str, Any]] = []
    for key in sorted(
        set(dynamo) | set(children), key=lambda k: (str(k[0]), k[1] if k[1] is not None else -1)
    ):
        parent = dynamo.get(key)
        if parent is not None:
            graphs.append(parent)
        for child in children.get(key, []):
            child["frame"] = parent["frame"] if parent else ""
            graphs.append(child)
    return graphs


def _failure_from_event(e: dict[str, Any], multi: bool) -> Failure:
    sig = FailureSignature.from_json(e.get("signature") or {})
    return Failure(
        graph=e.get("graph"),
        graph_kind=e.get("graph_kind") or "dynamo",
        signature=sig,
        message=e.get("message", ""),
        frame=sig.frame,
        pid=e.get("pid") if multi else None,
        divergence=e.get("divergence"),
        before_aot_compile=e.get("before_aot_compile"),
        pattern=e.get("pattern"),
        **dist_of(e),
    )


def _late_cuda_failure(e: dict[str, Any], failures: list[Failure], multi: bool) -> Failure | None:
    """An error the program died of that belongs to graph N although no graph was
    running: a sticky CUDA error reported at a later synchronisation (graph N ran
    last), or autograd's error in graph N's compiled backward (child/hooks.py)."""
    graph = e["after_graph"]
    raw = FailureSignature.from_json(e.get("signature") or {})
    if e.get("in_backward"):
        sig = dataclasses.replace(raw, stage=e.get("after_stage") or "unknown", kind="runtime")
        return Failure(
            graph=graph,
            graph_kind="backward",
            signature=sig,
            message=(e.get("message") or "") + f"\n(raised in the backward of graph {graph})",
            frame=sig.frame,
            unconfirmed=True,
            pid=e.get("pid") if multi else None,
            **dist_of(e),
        )
    if any(f.graph == graph and f.kind == FailureKind.CRASH.value for f in failures):
        return None  # the graph itself already reported it
    sig = dataclasses.replace(raw, stage=e.get("after_stage") or "unknown")
    return Failure(
        graph=graph,
        graph_kind=e.get("after_graph_kind") or "dynamo",
        signature=sig,
        message=(e.get("message") or "")
        + f"\n(reported at a later synchronisation; graph {graph} ran last)",
        frame=sig.frame,
        unconfirmed=True,
        pid=e.get("pid") if multi else None,
        **dist_of(e),
    )


def _capture_failure(e: dict[str, Any], multi: bool) -> Failure:
    """TorchDynamo failed to capture the frame the program died in."""
    sig = FailureSignature.from_json(e.get("signature") or {})
    return Failure(
        graph=None,
        graph_kind="dynamo",
        signature=sig,
        message=e.get("message", ""),
        frame=e.get("user_frame") or sig.frame,
        user_stack=e.get("user_stack") or [],
        record=e.get("record"),
        unconfirmed=True,
        pid=e.get("pid") if multi else None,
        limitation=documented_limitation(str(e.get("message") or "") + " " + sig.message),
        **dist_of(e),
    )


def dying_exception(result: ProcessResult) -> dict[str, Any] | None:
    """The exception the program died of: in a launched job (torchrun) the first rank
    that raised -- not the launcher's ChildFailedError, which only says that a worker
    failed -- else the last one raised."""
    exc = [e for e in result.events if e.get("event") == Event.EXCEPTION]
    ranked = [e for e in exc if e.get("rank") is not None]
    if ranked:
        return min(ranked, key=lambda e: float(e.get("time") or 0))
    return exc[-1] if exc else None


def ranks_that_raised(result: ProcessResult) -> list[int]:
    """Every rank whose process died of an exception (sorted)."""
    return sorted(
        {
            int(e["rank"])
            for e in result.events
            if e.get("event") == Event.EXCEPTION and e.get("rank") is not None
        }
    )


def fails_the_same_way(compiled: ProcessResult, plain: ProcessResult) -> bool:
    """Same exit status, and the same cause: the same kind of error raised from the same
    line of the program's own code (cause.py), however torch worded it -- Dynamo's fake
    tensors, a compiled kernel's check and eager say one shape error three ways; or
    compiled code died at the call where eager raised (died_where_it_raised).  In a
    launched job, the rank that raised first under torch.compile, by its own cause --
    never the launcher's ChildFailedError.  A run without torch.compile that failed by
    its own means (raised inside torch's compiler: no compile should have run) is no
    evidence.  Runs that recorded no cause (a record from an older tcompile) fall back to
    the exception's type and message.

    The one rule of "fails without torch.compile too" for every command: run, bisect,
    report and triage (classify.py) and the program level's baseline (issue 59: two
    commands on one torchrun job gave two verdicts)."""
    if compiled.timed_out or plain.timed_out:
        return compiled.timed_out and plain.timed_out
    if control_failed_itself(plain) is not None:
        return False
    if died_where_it_raised(compiled, plain):
        return True
    if plain.returncode in (0, None) or plain.returncode != compiled.returncode:
        return False
    first, second = dying_exception(compiled), dying_exception(plain)
    if first is not None and first.get("rank") is not None:
        rank = first["rank"]  # the same rank, by its own cause
        second = next((e for e in _raised(plain) if e.get("rank") == rank), None)
    if first is None or second is None:
        return first is None and second is None
    ours, theirs = Cause.from_json(first.get("cause")), Cause.from_json(second.get("cause"))
    if ours is not None and theirs is not None and ours.frame and theirs.frame:
        return ours.same(theirs)
    mine = [FailureSignature.from_json(first["signature"])]
    if first.get("cause_signature"):
        mine.append(FailureSignature.from_json(first["cause_signature"]))
    other = FailureSignature.from_json(second["signature"])
    return any(o.matches(other, as_exception=True) for o in mine)


def _raised(result: ProcessResult) -> list[dict[str, Any]]:
    return sorted(
        (e for e in result.events if e.get("event") == Event.EXCEPTION),
        key=lambda e: float(e.get("time") or 0),
    )


def control_failed_itself(plain: ProcessResult) -> str | None:
    """A run without torch.compile that died of an error raised inside torch's compiler
    stack (owners.is_torch_compiler) failed by its own means -- nothing of the program
    ran that way (``torch.compile with fullgraph=True found no compiled frames``, as
    TORCH_COMPILE_DISABLE=1 makes torch 2.13 say): what it said, or None."""
    from .owners import is_torch_compiler

    for e in _raised(plain):
        if is_torch_compiler(str(e.get("raised_in") or "")):
            return str(e.get("signature_text") or e.get("message") or "")[:300]
    return None


def died_where_it_raised(compiled: ProcessResult, plain: ProcessResult) -> bool:
    """The compiled run was killed by a signal (a kernel's C++ ``throw`` aborts the
    process) inside the call at which the run without torch.compile raised
    (cause.died_where_raised): one failure of the program, which compiled code reports
    by dying -- a difference to name, not a compiler bug of its own."""
    if compiled.returncode is None or compiled.returncode >= 0 or compiled.timed_out:
        return False
    raised = dying_exception(plain)
    if raised is None or plain.returncode in (0, None):
        return False
    return died_where_raised(fatal_stack(compiled.run_dir), list(raised.get("stack") or []))


# the pattern matcher's own totals: said only where nothing else says what was done
GENERIC_COUNTERS = frozenset({"pattern_matcher_count", "pattern_matcher_nodes"})
# counters an application bumps that say nothing of what it did: compiling, caching and
# autotuning its kernels (seen on an H200: a lowering's application ``async_compile_
# cache_miss``, ``triton_bundler_save_kernel``, ``select_algorithm_autotune``)
_HOUSEKEEPING = ("async_compile", "triton_bundler", "select_algorithm", "benchmarking",
                 "fxgraph_cache", "autotune", "cudagraph_")  # fmt: skip


def meaningful(did: dict[str, int]) -> dict[str, int]:
    """What an application did (child/subsystems.py's effects), without the pattern
    matcher's own totals and the counters of compiling and caching kernels."""
    return {
        k: v
        for k, v in did.items()
        if k not in GENERIC_COUNTERS and not k.startswith(_HOUSEKEEPING)
    }


def last_effects(events: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """What each enabled application of inductor's subsystems did (child/subsystems.py:
    the change in inductor's counters), by subsystem and index, in a bisection run."""
    found: dict[str, dict[str, dict[str, int]]] = {}
    for e in events:
        if e.get("event") == Event.BISECT_COUNTS and e.get("effects"):
            found = e["effects"]
    return found


def last_graphs(events: list[dict[str, Any]]) -> dict[str, list[int | None]]:
    """The Dynamo graph each counted application belonged to, in a bisection run."""
    found: dict[str, list[int | None]] = {}
    for e in events:
        if e.get("event") == Event.BISECT_COUNTS and e.get("graphs"):
            found = e["graphs"]
    return found


def last_counts(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    counts: dict[str, list[str]] = {}
    for e in events:
        if e.get("event") == Event.BISECT_COUNTS and e.get("counts"):
            counts = e["counts"]
    return counts

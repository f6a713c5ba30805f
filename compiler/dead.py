"""Processes that died or hung, classified from what they left: the markers say
which graph each was in; a distributed worker's stack (dumped before the kill,
procs.py) says where each rank was waiting."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from .crash import crash_message, signal_name
from .failure import Failure, dist_of
from .runner import ProcessResult
from .signature import FailureKind, FailureSignature, normalize_message

if TYPE_CHECKING:
    from .protocol import Marker


class _NoGraph(TypedDict):
    """A marker's fields where no process was in a graph."""

    graph: None
    phase: str
    graph_kind: str


def dead_process_failures(
    result: ProcessResult, dynamo: dict[tuple[Any, Any], dict[str, Any]]
) -> list[Failure]:
    """A process that died (signal) or was killed (timeout) says nothing more: the
    markers say which graph it was in."""
    busy = {pid: m for pid, m in result.markers.items() if m["graph"] >= 0 and m["phase"] != "idle"}
    ranks = _ranks_by_pid(result)
    if result.timed_out and ranks:
        return _hung_ranks(result, ranks, busy, dynamo)
    kind = FailureKind.TIMEOUT if result.timed_out else FailureKind.CRASH
    if result.timed_out:
        exc_type, message = "Timeout", "the command ran past --timeout"
    else:
        exc_type = signal_name(result.returncode or 0)
        message = crash_message(result.stderr_tail) or f"process killed by {exc_type}"
    targets: list[tuple[int | None, Marker | _NoGraph]] = list(busy.items()) or [
        (None, {"graph": None, "phase": "", "graph_kind": "dynamo"})
    ]
    out = []
    for pid, m in targets:
        g = dynamo.get((pid, m["graph"])) or next(
            (d for (p, i), d in dynamo.items() if i == m["graph"]), None
        )
        sig = FailureSignature(
            stage=g["stage"] if g else "unknown",
            kind=kind.value,
            exc_type=exc_type,
            message=normalize_message(message),
        )
        out.append(
            Failure(
                graph=m["graph"],
                graph_kind=m["graph_kind"],
                signature=sig,
                message=message,
                phase=m["phase"],
                frame=f"{m['phase']} of graph {m['graph']}" if m["graph"] is not None else "",
                # a process that died or hung inside a graph may be the program's own
                # failure, which compiled code reports otherwise (a kernel aborts on the
                # index eager raises IndexError for): the run without torch.compile
                # decides (classify.py), as for a failure outside any graph (issue 59)
                unconfirmed=True,
            )
        )
    return out


def _ranks_by_pid(result: ProcessResult) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for e in result.events:
        if e.get("rank") is not None and e.get("pid") is not None:
            out.setdefault(int(e["pid"]), dist_of(e))
    return out


def _hung_ranks(
    result: ProcessResult,
    ranks: dict[int, dict[str, Any]],
    busy: dict[int, Marker],
    dynamo: dict[tuple[Any, Any], dict[str, Any]],
) -> list[Failure]:
    """A distributed job that ran past --timeout: each rank that was still running,
    and where it was waiting (its stack, dumped before the kill: procs.py)."""
    from .procs import stack_of, user_frame

    out = []
    for pid, dist in sorted(ranks.items(), key=lambda kv: kv[1].get("rank", 0)):
        frames = stack_of(result.run_dir, pid)
        if not frames:
            continue  # it had finished (or never got as far as answering)
        m: Marker | _NoGraph = busy.get(pid) or {"graph": None, "phase": "", "graph_kind": "dynamo"}
        g = dynamo.get((pid, m["graph"]))
        at = user_frame(frames)
        inside = f"in graph {m['graph']} ({m['graph_kind']}, {m['phase']}) " if g else ""
        message = (
            f"the command ran past --timeout: rank {dist.get('rank')} was waiting {inside}at {at}"
        )
        out.append(
            Failure(
                graph=m["graph"] if g else None,
                graph_kind=m["graph_kind"],
                signature=FailureSignature(
                    stage=g["stage"] if g else "unknown",
                    kind=FailureKind.TIMEOUT.value,
                    exc_type="Timeout",
                    message="the command ran past --timeout",
                ),
                message=message,
                frame=at,
                phase=m["phase"] or None,
                # a collective that never completes is most often the program's own
                # doing (a rank that diverged): the run without torch.compile decides
                unconfirmed=True,
                **dist,
            )
        )
    return out

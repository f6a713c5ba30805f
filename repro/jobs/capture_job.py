"""``tcompile minify`` of a capture failure: from a frame TorchDynamo could not capture
(a record) to a standalone repro.py of a few lines.

Steps, each judged by one worker (compiler/capture_pool.py) that rebuilt the frame
from the record:

1. check that the recorded frame, re-run from its source, fails the same way;
2. step in: the user functions the frame calls (found by running it eagerly once),
   innermost on the failure's stack first -- the first that fails the same way on its
   own arguments is where the search starts, the rest of the model is gone;
3. shrink its source (minifier/source.py: inline, unroll, attributes and computed
   values to inputs, branches, loops, statements, arguments);
4. shrink its inputs: seeded random values instead of recorded ones, smaller shapes;
5. write repro.py (capture_writer.py) and verify it in a fresh interpreter that
   cannot import tcompile, and that it does not fail with ``--no-compile``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.runner import new_run_dir, write_json
from tcompile.compiler.signature import FailureSignature
from tcompile.minifier.verdict import Verdict

from .minify_search import Interrupts
from .minify_types import CaptureMinifyReport, CaptureSummary, MinifyReport

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from tcompile.compiler.capture_pool import CapturePool
    from tcompile.repro.capture_writer import Described

MAX_CALLS = 300  # oracle calls for the source search
SHRINK_CALLS = 24  # and for the inputs


@dataclasses.dataclass
class _Found:
    entry: int
    name: str
    where: str
    source: str
    lines_before: int  # of the user code the frame ran (its function and its callees)
    calls: int = 0
    history: list[str] = dataclasses.field(default_factory=list)
    source_from: str = "file"  # or decompiled bytecode, when the file is gone or changed


def minify_capture(
    record: str,
    *,
    trust: bool = False,
    out: str | None = None,
    timeout: float | None = None,
    observer: Observer | None = None,
    run_dir: str | None = None,
) -> MinifyReport:
    """Minify the frame in ``record`` (a record this user's tcompile signed, or one
    the user trusts with ``trust``)."""
    from tcompile.compiler.capture_pool import CapturePool, CaptureWorkerError

    from .replay import check_trust, check_versions, load_info

    observer = observer or NullObserver()
    t0 = time.monotonic()
    info = load_info(record)
    check_trust(info, trust)
    for w in check_versions(info):
        observer.status(f"warning: {w}")
    meta = info.meta
    target = FailureSignature.from_json(meta.get("signature") or {})
    rdir = Path(run_dir or new_run_dir(out, "minify"))
    options = dict(meta.get("compile") or {})
    report = CaptureMinifyReport(
        ExitCode.COMPILER_FAILURE,
        "",
        signature=target,
        record=os.path.abspath(record),
        run_dir=str(rdir),
        stage="eager",
        graph_kind="capture",
    )
    pool = CapturePool(
        os.path.abspath(record),
        str(meta.get("payload_sha256")) if info.kind == "tcompile" else None,
        str(rdir / "workers"),
        target,
        startup_timeout=timeout or 600.0,
    )
    observer.status(f"rebuilding the recorded frame {meta.get('function', '?')} ({rdir})")
    with Interrupts() as interrupts:
        try:
            try:
                ready = pool.start()
            except CaptureWorkerError as exc:
                return _done(report, t0, f"could not minify: {exc}")
            found = _start(pool, ready, meta, observer)
            if isinstance(found, str):
                return _done(report, t0, found, calls=pool.calls)
            _search(pool, found, observer, interrupts.event.is_set)
            final = _shrink_inputs(pool, found, observer, interrupts.event.is_set)
            described = cast("Described", pool.describe(found.entry, final))  # the worker's JSON
        finally:
            pool.close()
    report.interrupted = interrupts.event.is_set()
    report.calls, report.worker_restarts = pool.calls, pool.restarts
    return _write(report, rdir, found, final, described, options, t0, observer)


def _done(report: MinifyReport, t0: float, message: str, **kw: object) -> MinifyReport:
    report.message = message
    report.seconds = time.monotonic() - t0
    for k, v in kw.items():
        setattr(report, k, v)
    if report.interrupted:  # what was found so far stands; the exit says it was cut
        report.exit_code = ExitCode.INTERRUPTED
    return report


def _start(
    pool: CapturePool, ready: dict[str, Any], meta: dict[str, Any], observer: Observer
) -> _Found | str:
    """The function the search starts from: the innermost that fails the same way."""
    if not ready.get("source"):
        return f"could not minify: {ready.get('error') or 'the recorded frame has no source'}"
    verdict, got = pool.judge(0, ready["source"])
    if verdict is not Verdict.SAME_FAILURE:
        what = str(FailureSignature.from_json(got)) if got else verdict.value
        return (
            "could not minify: the recorded frame, re-run from its source, does not fail "
            f"the same way (got: {what}); `tcompile replay` re-runs it as recorded"
        )
    lines = ready["source"].strip().count("\n") + 1
    found = _Found(0, ready["name"], ready["where"], ready["source"], lines)
    found.source_from = ready.get("source_from") or "file"
    if found.source_from != "file":
        observer.status(f"the source of {found.name}: {found.source_from}")
    observer.status("stepping into the functions the frame calls")
    entries = pool.entries(list(meta.get("user_stack") or []))
    found.lines_before = sum(e["lines"] for e in entries[1:]) + lines
    for e in entries[1:]:
        verdict, _ = pool.judge(e["entry"], e["source"])
        if verdict is Verdict.SAME_FAILURE:
            observer.status(f"the failure shows in {e['name']} ({e['where']}) on its own")
            found = dataclasses.replace(
                found, entry=e["entry"], name=e["name"], where=e["where"], source=e["source"]
            )
            found.history.append(f"step into {e['name']}")
            break
    return found


def _search(pool: CapturePool, found: _Found, observer: Observer, stop: Callable[[], bool]) -> None:
    from tcompile.minifier.source import Hints, minify_source

    info = pool.info(found.entry)
    hints = Hints(
        callees=info.get("callees") or {},
        attrs=info.get("attrs") or {},
        lengths=info.get("lengths") or {},
        values=lambda src: pool.values(found.entry, src),
    )
    observer.status(f"shrinking the source of {found.name}")
    result = minify_source(
        found.source,
        found.name,
        lambda src: pool.judge(found.entry, src)[0],
        hints=hints,
        max_calls=MAX_CALLS,
        stop=stop,
    )
    found.source = result.source
    found.history += result.history


def _shrink_inputs(
    pool: CapturePool, found: _Found, observer: Observer, stop: Callable[[], bool]
) -> str:
    """Seeded random values for every tensor the function takes, then smaller shapes;
    each step kept only when the failure stays."""
    from tcompile.minifier.source import literals, with_inputs

    described = pool.describe(found.entry, found.source)
    _, inputs = literals(found.source)
    best = found.source
    tensors = {
        k: dict(v["tensor"], requires_grad=v["tensor"].get("requires_grad", False))
        for k, v in (described.get("params") or {}).items()
        if "tensor" in v and k not in inputs
    }
    budget = [SHRINK_CALLS]

    def fails(cand: str) -> bool:
        if budget[0] <= 0 or stop():
            return False
        budget[0] -= 1
        return pool.judge(found.entry, cand)[0] is Verdict.SAME_FAILURE

    observer.status("shrinking the inputs")
    for spec in tensors.values():
        spec.pop("values", None)
    if tensors:
        cand = with_inputs(best, {**inputs, **tensors})
        if fails(cand):
            best, inputs = cand, {**inputs, **tensors}
        else:
            for k, spec in tensors.items():
                cand = with_inputs(best, {**inputs, k: spec})
                if fails(cand):
                    best, inputs = cand, {**inputs, k: spec}
    for k in list(inputs):
        spec = inputs[k]
        if "shape" not in spec:
            continue
        for shape in _smaller_shapes(spec["shape"]):
            cand = with_inputs(best, {**inputs, k: {**spec, "shape": shape}})
            if fails(cand):
                best, inputs = cand, {**inputs, k: {**spec, "shape": shape}}
                break
    found.calls = pool.calls
    return best


def _smaller_shapes(shape: list[int]) -> list[list[int]]:
    """Candidates, smallest first: every dimension 1, every dimension 2, then halved."""
    out = []
    for size in (1, 2):
        cand = [min(d, size) for d in shape]
        if cand != shape and cand not in out:
            out.append(cand)
    half = [max(1, d // 2) for d in shape]
    if half != shape and half not in out:
        out.append(half)
    return out


def _write(
    report: CaptureMinifyReport,
    rdir: Path,
    found: _Found,
    final: str,
    described: Described,
    options: Mapping[str, object],
    t0: float,
    observer: Observer,
) -> MinifyReport:
    from tcompile.minifier.source import function_lines
    from tcompile.repro.capture_writer import capture_repro
    from tcompile.repro.environment import environment
    from tcompile.repro.verify import check_repro, repro_output, why_not_verified
    from tcompile.repro.writer import write_text

    fn_lines = function_lines(final, found.name)
    found_json = CaptureSummary(
        **{
            "entry": found.name,
            "where": found.where,
            "lines_before": found.lines_before,
            "function_lines": fn_lines,
            "oracle_calls": report.calls,
            "history": found.history,
            "source_from": found.source_from,
        }
    )
    text = capture_repro(
        source=final,
        name=found.name,
        described=described,
        signature=report.failure_signature() or FailureSignature("eager", "capture", "?", ""),
        options=options,
        env=environment(),
    )
    report.history = [{"pass_name": h} for h in found.history]
    report.capture = found_json
    if text is None:
        write_text(rdir / layout.MINIMAL_FUNCTION, final)
        return _done(
            report,
            t0,
            "NOT verified: the minimal function still needs an object a standalone repro "
            f"cannot build; it is in {rdir / layout.MINIMAL_FUNCTION}",
        )
    repro = write_text(rdir / layout.REPRO, text)
    report.repro, report.repro_form = str(repro), "capture"
    report.repro_lines, report.repro_bytes = text.count("\n"), len(text.encode())
    observer.status(f"verifying {repro}")
    try:
        verified, output = check_repro(
            repro,
            report.failure_signature() or FailureSignature("eager", "capture", "?", ""),
            timeout=300,
        )
        eager = repro_output(repro, extra=["--no-compile"], timeout=300)
    except KeyboardInterrupt:
        report.interrupted = True
        return _done(report, t0, f"interrupted while verifying: {repro} is NOT verified")
    report.repro_output = output.strip() or None
    report.eager_passes = eager.returncode == 0
    report.verified = verified and report.eager_passes
    write_json(rdir / layout.MINIFY, {**report.to_json(), "seconds": time.monotonic() - t0})
    if report.verified:
        message = "verified"
    elif not verified:
        message = "NOT verified: the repro did not reproduce the failure in a fresh process"
        report.not_verified = why_not_verified(output)
    else:
        message = "NOT verified: the repro fails without torch.compile too"
        report.not_verified = why_not_verified("with torch.compile off too")
    if report.interrupted:
        message = f"interrupted: {repro} holds the smallest function found so far ({message})"
    return _done(report, t0, message)

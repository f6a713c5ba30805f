"""``tcompile minify``: from a failing program to a verified standalone repro.py.

Steps: (1) run the program once under the hooks and pick the failure to minify;
(2) start workers -- the program again, paused at the first call of the failing graph
(compiler/pool.py) -- the first of which saves the graph, its real inputs and the
configuration in force; (3) write minifier_launcher.py; (4) shrink the graph with the
minifier engine, each candidate judged by a worker; (5) write repro.py and verify it
(verify.py).  Everything goes under one run directory.

Minify is one pipeline over start cases; each ends in the search and the writers of
its case type, and in the report type of its kind (minify_types.py):

  start case                        where            searched by            report
  the first failing worker          _first_worker    minify_graph (graph)   Graph...
  a run, then a worker per graph    _graph_job       minify_graph (graph)   Graph...
  one rank's capture (torchrun)     dist_minify      via the launcher case  Graph...
  a minifier_launcher.py            launcher_job     minify_graph (graph)   Graph...
  a frame's record (Dynamo capture) capture_job      source (frame)         Capture...
  the program itself                program_job      source (program)       Program...
  --level source: a graph's case,   source_level     then the program case  Graph...
  then the program around its lines

This module and its parts (minify_target.py: which failure; minify_search.py: the
graph and input searches; minify_types.py: the job and its report) join compiler/
(running, workers, judging), minifier/ (search) and repro/ (artifacts); they print
nothing and report to an observer.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.compiler import layout
from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.protocol import HookConfig, ServeSpec
from tcompile.compiler.runner import is_distributed_launch, new_run_dir, write_json
from tcompile.compiler.signature import FailureKind, FailureSignature

from .classify import RunOptions, run_and_classify
from .minify_graph import minify_captured
from .minify_target import choose_target, graphless_report
from .minify_types import After, GraphMinifyReport, Job, Level, MinifyOptions, MinifyReport

if TYPE_CHECKING:
    from tcompile.compiler.failure import Failure

    from .bisect_report import MinifyNext
    from .classify import RunReport
    from .minify_types import GraphJobArgs, ProgramArgs, Streams

__all__ = ["Job", "MinifyReport", "minify_captured", "minify_next", "run_minify"]


def minify_next(command: list[str], then: MinifyNext, **kw: Any) -> MinifyReport:
    """``bisect --minify`` and ``replay --minify``: go on to minify what the job found --
    a graph of the program (``then``: graph, backend), or a frame Dynamo could not
    capture (``then``: record, trust)."""
    if "record" in then:
        from .capture_job import minify_capture

        return minify_capture(
            then["record"],
            trust=bool(then.get("trust")),
            out=kw.get("out"),
            timeout=kw.get("timeout"),
            observer=kw.get("observer"),
        )
    return run_minify(command, **then, **kw)


def run_minify(command: list[str], **kw: Any) -> MinifyReport:
    """``tcompile minify``: the failing graph, or the program itself when no single graph
    holds the failure (a graph that fails in the program but passes alone included);
    ``level="source"``: the graph, then a user-level repro from the program too.  The
    keywords are :class:`MinifyOptions`' fields (an unknown one is a TypeError)."""
    return minify_with(command, MinifyOptions(**kw))


def minify_with(command: list[str], opts: MinifyOptions) -> MinifyReport:
    """``run_minify`` with its options as the record."""
    asked = Level(opts.level)
    if asked == Level.SOURCE:
        from .source_level import with_source_level

        graph_only = dataclasses.replace(opts, level=Level.GRAPH)
        return with_source_level(command, _run_minify(command, graph_only), opts)
    report = _run_minify(command, opts)
    alone = isinstance(report, GraphMinifyReport) and report.alone_passes
    if alone and asked == Level.AUTO and report.run_dir:
        from tcompile.repro.program_harness import prelude_for

        from .program_job import ProgramOptions, minify_program

        try:
            program = minify_program(
                command,
                Path(report.run_dir),
                ProgramOptions(
                    backend=opts.backend,
                    jobs=opts.for_program(),
                    max_time=opts.max_time,
                    timeout=opts.timeout,
                    observer=opts.observer or NullObserver(),
                    t0=time.monotonic() - report.seconds,
                    include=opts.include,
                    reason=f"graph {report.graph} passes on its own",
                    prelude=prelude_for(report.failure_signature()),
                ),
            )
        except UsageError:
            return report
        program.graph, program.launcher = report.graph, report.launcher
        program.message = report.message.split(" -- ")[0] + "; " + program.message
        return program
    return report


def _run_minify(command: list[str], o: MinifyOptions) -> MinifyReport:
    observer = o.observer or NullObserver()
    t0 = time.monotonic()
    _check_match(o.match)
    run_dir = Path(new_run_dir(o.out, "minify"))
    try:
        return _minify_in(command, run_dir, observer, t0, o)
    except KeyboardInterrupt:  # before any search began (a search keeps its best itself)
        report = MinifyReport(
            ExitCode.INTERRUPTED,
            "interrupted before the search began: nothing was minified",
            run_dir=str(run_dir),
            seconds=time.monotonic() - t0,
            interrupted=True,
        )
        write_json(run_dir / layout.MINIFY, report.to_json())
        return report


def _minify_in(
    command: list[str], run_dir: Path, observer: Observer, t0: float, o: MinifyOptions
) -> MinifyReport:
    after, accuracy, backend, graph, match = o.after, o.accuracy, o.backend, o.graph, o.match
    jobs, timeout, level, capture = o.jobs, o.timeout, Level(o.level), o.capture
    program: ProgramArgs = dict(
        max_time=o.max_time,
        backend=backend,
        jobs=o.for_program(),
        timeout=timeout,
        observer=observer,
        t0=t0,
        include=o.include,
    )
    if level == Level.PROGRAM:  # the user's source itself, whatever graphs it has
        from .program_job import ProgramOptions, minify_program

        return minify_program(
            command, run_dir, ProgramOptions(**program, accuracy=accuracy, first=True)
        )
    common: GraphJobArgs = dict(
        jobs=jobs, timeout=timeout, real_inputs=o.real_inputs, accuracy=accuracy
    )
    streams: Streams = {"stdout": o.stdout, "stderr": o.stderr}
    distributed = is_distributed_launch(command)
    if capture and after != After.AOT and backend is None and not distributed:
        return _from_capture(command, Path(capture), run_dir, observer, t0, common)
    report: Any = None
    if after != After.AOT and not distributed:
        # the first run is the first worker: it serves the first failure it meets in a
        # graph (one run of the program fewer); when it meets none it could serve, its
        # run is classified as `tcompile run` would
        report = _first_worker(command, run_dir, o, observer, t0, common)
        if isinstance(report, MinifyReport):
            return report
        if isinstance(report, _AotInstead):
            after, graph, report = "aot", report.graph, None
    if report is None:
        observer.status(f"running the program once to find the failing graph ({run_dir})")
        report = run_and_classify(
            command,
            RunOptions(
                out=str(run_dir), stage=backend, accuracy=accuracy, timeout=timeout,
                observer=observer, **streams,
            ),
        )  # fmt: skip
    target = _target_or_report(report, graph, match, after, run_dir, t0)
    if isinstance(target, MinifyReport):
        return target
    if target.graph is None or target.kind == FailureKind.HOOK:  # no graph alone shows it
        return _without_graph(target, run_dir, t0, timeout, observer, command, program, level)
    sig = target.signature
    if sig.kind == FailureKind.ACCURACY and accuracy == AccuracyMode.OFF:
        # wrong values found without --accuracy (a failure outside any graph that a
        # checked run tied to this graph): judge candidates and the repro as it did
        accuracy = "strict" if sig.exc_type == "StrictAccuracyError" else "loose"
        common["accuracy"] = accuracy
    # auto: the Dynamo graph, where every failure shows (a decomposition bug is
    # already inside the AOT graph, DESIGN.md mechanism 5)
    form = "aot" if after == After.AOT else "dynamo"  # which form of the graph is served
    if distributed:  # one rank's graph, minified in single processes
        from .dist_minify import minify_rank

        asked = dataclasses.replace(o, accuracy=accuracy)
        return minify_rank(command, target, run_dir=run_dir, level=form, o=asked,
                           observer=observer, t0=t0)  # fmt: skip
    return _graph_job(command, target, run_dir, backend, form, observer, t0, common)


def _graph_job(
    command: list[str],
    target: Failure,
    run_dir: Path,
    backend: str | None,
    form: str,
    observer: Observer,
    t0: float,
    common: GraphJobArgs,
) -> MinifyReport:
    """Minify the target's graph (its ``form``: dynamo or aot) with workers that pause
    the program at its first call."""
    sig = target.signature
    observer.status(f"minifying graph {target.graph} ({target.graph_kind}): {sig}")
    config = HookConfig(
        dir=str(run_dir / "workers" / "events"),
        stage=backend,
        accuracy=common["accuracy"],
        serve=ServeSpec(
            graph=target.graph,
            capture_dir=str(run_dir / "capture"),
            signature=sig.to_json(),
            level=form,
            graph_kind=target.graph_kind,
        ),
    )
    job = Job(
        command=command,
        config=config,
        signature=sig,
        graph=int(target.graph),
        graph_kind=target.graph_kind,
        message=target.message,
        run_dir=run_dir,
        observer=observer,
        t0=t0,
        **common,
    )
    return minify_captured(job)


def _from_capture(
    command: list[str],
    capture: Path,
    run_dir: Path,
    observer: Observer,
    t0: float,
    common: GraphJobArgs,
) -> MinifyReport:
    """The graph a bisect's baseline saved (HookConfig.capture), served by a launcher
    worker: the program is not run again (issue 51)."""
    import json

    from .launcher_job import capture_data, launcher_job

    meta = json.loads((capture / layout.CAPTURE_META).read_text())
    sig = FailureSignature.from_json(meta["signature"])
    accuracy = common["accuracy"]
    if sig.kind == FailureKind.ACCURACY and accuracy == AccuracyMode.OFF:
        accuracy = "strict" if sig.exc_type == "StrictAccuracyError" else "loose"
    data = capture_data(meta, meta["signature"], accuracy, command)
    observer.status(f"minifying graph {meta['graph']} from the baseline's capture: {sig}")
    job = launcher_job(
        capture, data, run_dir, jobs=common["jobs"], real_inputs=common["real_inputs"],
        observer=observer, t0=t0,
    )  # fmt: skip
    job.graph, job.graph_kind = int(meta["graph"]), meta.get("graph_kind") or job.graph_kind
    job.timeout, job.write_launcher, job.message = common["timeout"], True, meta.get("message", "")
    job.from_capture = True
    if (accuracy == AccuracyMode.STRICT) == (sig.exc_type == "StrictAccuracyError"):
        job.known_full = baseline_divergence(capture, int(meta["graph"]))  # judged alike
    from tcompile.compiler.pool import take

    from .capture_bisect import served_key

    parked = take(served_key(data))  # the bisect's worker, serving this very capture
    if parked is not None:
        observer.status("the bisect's worker serves the minify (no worker to start)")
        job.pool, job.config, job.worker_from_bisect = parked, parked.config, True
    return minify_captured(job)


def baseline_divergence(capture: Path, graph: int) -> dict[str, Any] | None:
    """Where the baseline found graph ``graph``'s values first going wrong, on the call
    it captured (compiler/child/localize.py), where that is what a worker's analysis of
    the full graph gives: the same bisection over the graph's prefixes on the same
    inputs (numerics.first_divergence, its input gradients' for a wrong gradient) --
    not a node of the backward graph itself, which the worker does not look at; None:
    not found, or not that."""
    import json

    try:
        doc = json.loads((capture.parent.parent / layout.RESULT).read_text())
    except (OSError, ValueError):
        return None
    for f in doc.get("failures") or []:
        d = f.get("divergence") or {}
        ours = f.get("graph") == graph and f.get("kind") == FailureKind.ACCURACY.value
        if ours and d.get("node") and d.get("graph") != "backward":
            return dict(d)
    return None


def _check_match(match: str | None) -> None:
    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            raise UsageError(f"--match is not a valid regular expression: {exc}") from None


def _target_or_report(
    report: RunReport, graph: int | None, match: str | None, after: str, run_dir: Path, t0: float
) -> Failure | MinifyReport:
    """The failure to minify, or the report that says there is none (and leaves no
    files behind)."""
    try:
        target = choose_target(report, graph, match, after)
    except UsageError:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing to report: leave no files
        raise
    if target is None or isinstance(target, MinifyReport):
        shutil.rmtree(run_dir, ignore_errors=True)
        if target is None:
            return MinifyReport(
                ExitCode.OK, "no compiler failure: nothing to minify", seconds=time.monotonic() - t0
            )
        target.seconds = time.monotonic() - t0
    return target


def _without_graph(
    target: Failure,
    run_dir: Path,
    t0: float,
    timeout: float | None,
    observer: Observer,
    command: list[str],
    program: ProgramArgs,
    asked: Level,
) -> MinifyReport:
    """A failure with no graph: a frame Dynamo could not capture is minified from its
    record (its code); anything else -- a failure outside any graph, wrong results of
    Dynamo's own -- at the program level (program_job.py)."""
    if target.kind == FailureKind.CAPTURE and target.record:
        from .capture_job import minify_capture

        report = minify_capture(
            target.record, timeout=timeout, observer=observer, run_dir=str(run_dir)
        )
        report.seconds = time.monotonic() - t0
        return report
    if target.kind == FailureKind.CAPTURE or asked == Level.GRAPH:
        return graphless_report(target, run_dir, t0)
    from .program_job import ProgramOptions, minify_program

    reason = (
        f"graph {target.graph}'s compiled backward bypasses a hook of the program"
        if target.kind == FailureKind.HOOK
        else "no compiled graph holds the failure"
    )
    try:
        return minify_program(command, run_dir, ProgramOptions(**program, reason=reason))
    except UsageError:  # not a Python script (a command of another kind): said as before
        return graphless_report(target, run_dir, t0)


@dataclasses.dataclass
class _AotInstead:
    """The graph the first worker served runs a functorch transform, and the failure is
    inductor's: minify its AOT graph, where AOTAutograd has traced the transform away
    (the Dynamo graph's body works on batched and dual tensors no cut can keep)."""

    graph: int


def _first_worker(
    command: list[str],
    run_dir: Path,
    o: MinifyOptions,
    observer: Observer,
    t0: float,
    common: GraphJobArgs,
) -> MinifyReport | _AotInstead | RunReport:
    """The minify job on the graph the first worker served, or, when it served none,
    the classified run (a RunReport)."""
    from tcompile.compiler.pool import NotServed, WorkerPool

    backend, graph, match, after = o.backend, o.graph, o.match, o.after
    streams: Streams = {"stdout": o.stdout, "stderr": o.stderr}
    from .classify import classify_result

    config = HookConfig(
        dir=str(run_dir / "workers" / "events"),
        stage=backend,
        accuracy=common["accuracy"],
        serve=ServeSpec(
            first_failure=True,
            graph=graph,
            match=match,
            capture_dir=str(run_dir / "capture"),
            level="dynamo",
        ),
    )
    pool = WorkerPool(
        command,
        config,
        jobs=common["jobs"],
        work_dir=str(run_dir / "workers"),
        target=None,
        startup_timeout=common["timeout"] or 900.0,
    )
    observer.status(
        f"running the program; a worker stops at the first failure in a graph ({run_dir})"
    )
    try:
        ready = pool.start()
    except NotServed as exc:
        pool.close()
        return classify_result(
            exc.result,
            command,
            str(run_dir),
            RunOptions(
                stage=backend, accuracy=common["accuracy"], timeout=common["timeout"],
                observer=observer, **streams,
            ),
        )  # fmt: skip
    except BaseException:
        pool.close()
        raise
    sig = FailureSignature.from_json(ready["signature"])
    if (
        after == After.AUTO
        and ready.get("transform")
        and sig.stage == "inductor"
        and sig.kind in (FailureKind.COMPILE, FailureKind.RUNTIME, FailureKind.CRASH)
    ):
        pool.close()
        shutil.rmtree(run_dir / "capture", ignore_errors=True)  # the Dynamo graph's
        observer.status(
            f"graph {ready['graph']} runs a functorch transform (vmap, jacfwd, grad): "
            "minifying its AOT graph instead, where the transform is traced away"
        )
        return _AotInstead(int(ready["graph"]))
    observer.status(f"minifying graph {ready['graph']} ({ready.get('graph_kind')}): {sig}")
    job = Job(
        command=command,
        config=pool.config,
        signature=sig,
        graph=int(ready["graph"]),
        graph_kind=ready.get("graph_kind"),
        run_dir=run_dir,
        observer=observer,
        t0=t0,
        pool=pool,
        **common,
    )
    return minify_captured(job)

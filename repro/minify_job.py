"""``tcompile minify``: from a failing program to a verified standalone repro.py.

Steps: (1) run the program once under the hooks and pick the failure to minify;
(2) start workers -- the program again, paused at the first call of the failing graph
(compiler/pool.py) -- the first of which saves the graph, its real inputs and the
configuration in force; (3) write minifier_launcher.py; (4) shrink the graph with the
minifier engine, each candidate judged by a worker; (5) write repro.py and verify it
(verify.py).  Everything goes under one run directory.

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
from typing import Any

from tcompile.compiler.classify import run_and_classify
from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.protocol import (
    HookConfig,
)
from tcompile.compiler.runner import is_distributed_launch, new_run_dir, write_json
from tcompile.compiler.signature import FailureSignature

from .minify_search import Interrupts, inputs_json, read_capture, search_graph, shrink_minimal
from .minify_target import choose_target, graphless_report
from .minify_types import Job, MinifyReport

__all__ = ["Job", "MinifyReport", "minify_captured", "minify_next", "run_minify"]


def minify_next(command: list[str], then: dict[str, Any], **kw: Any) -> MinifyReport:
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


def run_minify(
    command: list[str],
    *,
    after: str = "auto",
    accuracy: str = "off",
    backend: str | None = None,
    graph: int | None = None,
    match: str | None = None,
    jobs: int = 1,
    timeout: float | None = None,
    real_inputs: bool = False,
    out: str | None = None,
    observer: Observer | None = None,
    stdout: Any = None,
    stderr: Any = None,
) -> MinifyReport:
    observer = observer or NullObserver()
    t0 = time.monotonic()
    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            raise UsageError(f"--match is not a valid regular expression: {exc}") from None
    run_dir = Path(new_run_dir(out, "minify"))
    common = dict(jobs=jobs, timeout=timeout, real_inputs=real_inputs, accuracy=accuracy)
    streams = {"stdout": stdout, "stderr": stderr}
    distributed = is_distributed_launch(command)
    if after != "aot" and not distributed:
        # the first run is the first worker: it serves the first failure it meets in a
        # graph (one run of the program fewer); when it meets none it could serve, its
        # run is classified as `tcompile run` would
        first = _first_worker(
            command, run_dir, backend, graph, match, observer, t0, common, streams
        )
        if isinstance(first, MinifyReport):
            return first
        report = first
    else:
        observer.status(f"running the program once to find the failing graph ({run_dir})")
        report = run_and_classify(
            command,
            out=str(run_dir),
            stage=backend,
            accuracy=accuracy,
            timeout=timeout,
            observer=observer,
            stdout=stdout,
            stderr=stderr,
        )
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
    if target.graph is None:
        return _without_graph(target, run_dir, t0, timeout, observer)
    sig = target.signature
    # auto: the Dynamo graph, where every failure shows (a decomposition bug is
    # already inside the AOT graph, DESIGN.md mechanism 5)
    level = "aot" if after == "aot" else "dynamo"
    if distributed:  # one rank's graph, minified in single processes
        from .dist_minify import minify_rank

        return minify_rank(
            command,
            target,
            run_dir=run_dir,
            level=level,
            backend=backend,
            observer=observer,
            t0=t0,
            **common,
            **streams,
        )
    observer.status(f"minifying graph {target.graph} ({target.graph_kind}): {sig}")
    config = HookConfig(
        dir=str(run_dir / "workers" / "events"),
        stage=backend,
        accuracy=accuracy,
        serve={
            "graph": target.graph,
            "capture_dir": str(run_dir / "capture"),
            "signature": sig.to_json(),
            "level": level,
            "graph_kind": target.graph_kind,
        },
    )
    job = Job(
        command=command,
        config=config,
        signature=sig,
        graph=int(target.graph),
        graph_kind=target.graph_kind,
        run_dir=run_dir,
        observer=observer,
        t0=t0,
        **common,
    )
    return minify_captured(job)


def _without_graph(
    target: Any, run_dir: Path, t0: float, timeout: float | None, observer: Observer
) -> MinifyReport:
    """A failure with no graph: a frame Dynamo could not capture is minified from its
    record (its code); anything else is said as it is (minify_target.py)."""
    if target.kind == "capture" and target.record:
        from .capture_job import minify_capture

        report = minify_capture(
            target.record, timeout=timeout, observer=observer, run_dir=str(run_dir)
        )
        report.seconds = time.monotonic() - t0
        return report
    return graphless_report(target, run_dir, t0)


def _first_worker(
    command: list[str],
    run_dir: Path,
    backend: str | None,
    graph: int | None,
    match: str | None,
    observer: Observer,
    t0: float,
    common: dict[str, Any],
    streams: dict[str, Any],
) -> MinifyReport | Any:
    """The minify job on the graph the first worker served, or, when it served none,
    the classified run (a RunReport)."""
    from tcompile.compiler.classify import classify_result
    from tcompile.compiler.pool import NotServed, WorkerPool

    config = HookConfig(
        dir=str(run_dir / "workers" / "events"),
        stage=backend,
        accuracy=common["accuracy"],
        serve={
            "first_failure": True,
            "graph": graph,
            "match": match,
            "capture_dir": str(run_dir / "capture"),
            "level": "dynamo",
        },
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
            stage=backend,
            accuracy=common["accuracy"],
            timeout=common["timeout"],
            observer=observer,
            **streams,
        )
    except BaseException:
        pool.close()
        raise
    sig = FailureSignature.from_json(ready["signature"])
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


def minify_captured(job: Job) -> MinifyReport:
    from tcompile.compiler.pool import WorkerPool
    from tcompile.minifier import MinifyError

    pool = job.pool or WorkerPool(
        job.command,
        job.config,
        jobs=job.jobs,
        work_dir=str(job.run_dir / "workers"),
        target=job.signature,
        startup_timeout=job.timeout or 900.0,
    )
    launcher = None
    try:
        if job.pool is None:
            job.observer.status(
                "starting a worker (the program again, paused at the failing graph)"
            )
            pool.start()  # interrupted here: nothing found yet (exit 130)
        gm, inputs, meta = read_capture(Path(job.config.serve["capture_dir"]))  # type: ignore[index]
        if job.write_launcher:
            launcher = _write_launcher(job, gm, inputs, meta)
        with Interrupts() as interrupts:
            try:
                result = search_graph(job, pool, gm, inputs, meta, interrupts.event)
            except MinifyError as exc:
                return job.report(
                    ExitCode.COMPILER_FAILURE,
                    f"could not minify: {exc}",
                    stage=meta["stage"],
                    launcher=launcher,
                )
            shrunk = None
            if not result.stopped and not job.real_inputs:
                shrunk = shrink_minimal(job, pool, result, meta, interrupts.event)
    finally:
        pool.close()
    job.observer.status(
        f"minified {result.nodes_before} -> {result.nodes_after} nodes in {result.calls} "
        "calls; writing and verifying repro.py"
    )
    from .artifacts import write_verified
    from .kernel import graph_ops

    art = write_verified(
        job.run_dir,
        gm=result.gm,
        inputs=result.inputs,
        shrunk=shrunk,
        signature=str(job.signature),
        accuracy=job.accuracy,
        meta={**meta, "graph_kind": job.graph_kind},
        real_only=job.real_inputs,
    )
    repro, verified, cut = art.repro, art.verified, art.interrupted
    report = job.report(
        ExitCode.COMPILER_FAILURE,
        _message(verified, result.stopped, cut, repro),
        repro=str(repro),
        launcher=launcher,
        nodes_before=result.nodes_before,
        nodes_after=result.nodes_after,
        calls=result.calls,
        verified=verified,
        eager_passes=art.eager_passes,
        real_inputs=art.real_inputs,
        repro_form=art.form,
        repro_lines=art.lines,
        repro_bytes=art.bytes,
        sidecar=art.sidecar,
        kernel=art.kernel,
        inputs=inputs_json(shrunk),
        repro_before=art.before,
        ops=graph_ops(result.gm),
        device=art.device,
        repro_output=art.output.strip() or None,
        graph_kind=job.graph_kind,
        stage=meta["stage"],
        interrupted=result.stopped or cut,
        worker_restarts=pool.restarts,
        history=[dataclasses.asdict(h) for h in result.history],
    )
    doc = report.to_json()
    write_json(job.run_dir / "minify.json", {k: doc[k] for k in MINIFY_JSON_FIELDS})
    return report


# what minify.json (beside repro.py) keeps of the report
MINIFY_JSON_FIELDS = (
    "signature",
    "nodes_before",
    "nodes_after",
    "calls",
    "verified",
    "interrupted",
    "repro",
    "repro_form",
    "repro_lines",
    "repro_bytes",
    "sidecar",
    "kernel",
    "inputs",
    "repro_before",
)


def _message(verified: bool, stopped: bool, cut: bool, repro: Path) -> str:
    if cut:
        return f"interrupted while verifying: {repro} is NOT verified (the search had finished)"
    if stopped:
        state = "verified" if verified else "NOT verified"
        return f"interrupted: {repro} holds the smallest graph found so far ({state})"
    if verified:
        return "verified"
    return "NOT verified: the repro did not reproduce the failure in a fresh process"


def _write_launcher(job: Job, gm: Any, inputs: list[Any], meta: dict[str, Any]) -> str:
    from .launcher import write_launcher

    path = write_launcher(
        job.run_dir / "minifier_launcher.py",
        gm=gm,
        inputs=inputs,
        meta=meta,
        signature=job.signature,
        accuracy=job.accuracy,
        command=job.command,
    )
    return str(path)

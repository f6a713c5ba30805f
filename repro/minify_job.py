"""``tcompile minify``: from a failing program to a verified standalone repro.py.

Steps: (1) run the program once under the hooks and pick the failure to minify;
(2) start workers -- the program again, paused at the first call of the failing graph
(compiler/pool.py) -- the first of which saves the graph, its real inputs and the
configuration in force; (3) write minifier_launcher.py; (4) shrink the graph with the
minifier engine, each candidate judged by a worker; (5) write repro.py and verify it
(verify.py).  Everything goes under one run directory.

This is the one module that joins compiler/ (running, workers, judging), minifier/
(search) and repro/ (artifacts); it prints nothing and reports to an observer.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

from tcompile.compiler.classify import run_and_classify
from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.failure import Failure
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.protocol import (
    CAPTURE_GRAPH,
    CAPTURE_INPUTS,
    CAPTURE_META,
    Event,
    HookConfig,
)
from tcompile.compiler.runner import new_run_dir, write_json
from tcompile.compiler.signature import FailureSignature


@dataclasses.dataclass
class MinifyReport:
    exit_code: int
    message: str
    repro: str | None = None
    launcher: str | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    calls: int | None = None
    seconds: float = 0.0
    signature: str | None = None
    verified: bool = False
    eager_passes: bool | None = None
    real_inputs: bool = False
    graph: int | None = None
    graph_kind: str | None = None
    stage: str | None = None
    after: str = "dynamo"
    run_dir: str | None = None
    interrupted: bool = False
    worker_restarts: int = 0
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    record: str | None = None  # a capture failure's frame, for `tcompile replay`
    repro_form: str | None = None  # short | long (the long form carries tcompile's helpers)
    repro_lines: int | None = None
    repro_bytes: int | None = None
    sidecar: bool = False  # real input values too large to embed, beside the repro
    kernel: str | None = None  # inductor's generated code for the minimal graph
    inputs: dict[str, Any] | None = None  # input shrinking: numel before/after, calls, seconds
    ops: list[str] | None = None  # the ops of the minimal graph (its culprit, for one node)
    device: str | None = None  # where the repro's tensors live
    repro_output: str | None = None  # what the verified repro printed
    report: str | None = None  # --report: report.md
    repro_before: dict[str, Any] | None = None  # the long form with real inputs, for comparison

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class _Job:
    """One minification: what to run, where to write, how to report."""

    command: list[str]  # the program the workers run (or a launcher's worker)
    config: HookConfig  # the workers' hook config (with the serve spec)
    signature: FailureSignature
    graph: int
    graph_kind: str | None
    run_dir: Path
    jobs: int
    timeout: float | None
    real_inputs: bool
    accuracy: str
    observer: Observer
    t0: float
    write_launcher: bool = True
    command_for_repro: list[str] | None = None
    pool: Any = None  # a pool whose first worker already serves the graph

    def report(self, code: int, message: str, **kw: Any) -> MinifyReport:
        return MinifyReport(
            int(code),
            message,
            signature=str(self.signature),
            run_dir=str(self.run_dir),
            graph=self.graph,
            seconds=time.monotonic() - self.t0,
            **kw,
        )


def _pick_failure(failures: list[Failure], graph: int | None, match: str | None) -> Failure | None:
    for f in failures:
        if graph is not None and f.graph != graph:
            continue
        if match is not None and not re.search(match, f.text):
            continue
        return f
    return None


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
    if after != "aot":
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
        target = _choose(report, graph, match, after)
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
        return _no_graph(target, run_dir, t0)
    sig = target.signature
    # auto: the Dynamo graph, where every failure shows (a decomposition bug is
    # already inside the AOT graph, DESIGN.md mechanism 5)
    level = "aot" if after == "aot" else "dynamo"
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
    job = _Job(
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
    job = _Job(
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


def _no_graph(target: Failure, run_dir: Path, t0: float) -> MinifyReport:
    """A failure with no graph to minify: outside any graph, or in Dynamo's capture."""
    if target.kind != "capture":
        return MinifyReport(
            ExitCode.COMPILER_FAILURE,
            "the failure shows outside any compiled graph (the program fails with "
            f"torch.compile and not without it): no graph to minify ({target.text})"
            + "".join(
                f"; {line.strip('()')}"
                for line in target.message.splitlines()
                if "graph " in line and "precise" in line
            ),
            signature=target.text,
            run_dir=str(run_dir),
            seconds=time.monotonic() - t0,
        )
    record = target.record
    return MinifyReport(
        ExitCode.COMPILER_FAILURE,
        "the failure is in TorchDynamo's capture, before any graph exists: nothing to minify "
        f"({target.text})"
        + (f"; the failing frame is recorded: tcompile replay {record}" if record else ""),
        signature=target.text,
        record=record,
        run_dir=str(run_dir),
        seconds=time.monotonic() - t0,
    )


def _choose(
    report: Any, graph: int | None, match: str | None, after: str
) -> Failure | MinifyReport | None:
    """The failure to minify; a report when there is nothing to do (not a compiler
    bug), None when there is no failure at all.  Bad choices are UsageErrors."""
    if report.exit_code == ExitCode.NOT_COMPILER:
        return MinifyReport(ExitCode.NOT_COMPILER, report.explanation)
    dynamo_graphs = [g for g in report.graphs if g.get("level") == "dynamo"]
    if graph is not None and graph >= len(dynamo_graphs):
        raise UsageError(
            f"--graph {graph}: the program compiled {len(dynamo_graphs)} graph(s) "
            f"(0..{len(dynamo_graphs) - 1})"
        )
    if not report.failures:
        return None
    target = _pick_failure(report.failures, graph, match)
    if target is None:
        what = []
        if graph is not None:
            what.append(f"in graph {graph}")
        if match is not None:
            what.append(f"matching {match!r}")
        found = "; ".join(f.text for f in report.failures)
        raise UsageError(f"no failure {' and '.join(what)} (found: {found})")
    if (
        after == "aot"
        and target.graph is not None
        and (
            target.stage != "inductor"
            or target.graph_kind not in ("forward", "backward", "inference")
        )
    ):
        raise UsageError(
            f"--after aot needs a failure in an AOT graph compiled by inductor; this one is "
            f"in the {target.graph_kind} graph of stage {target.stage} "
            "(use --after dynamo)"
        )
    return target


class _Interrupts:
    """Ctrl-C or SIGTERM during the search stops it: the best graph so far is kept,
    written and reported (``interrupted``)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, lambda *a: self.event.set())
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def minify_captured(job: _Job) -> MinifyReport:
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
        gm, inputs, meta = _read_capture(Path(job.config.serve["capture_dir"]))  # type: ignore[index]
        if job.write_launcher:
            launcher = _write_launcher(job, gm, inputs, meta)
        with _Interrupts() as interrupts:
            try:
                result = _search(job, pool, gm, inputs, meta, interrupts.event)
            except MinifyError as exc:
                return job.report(
                    ExitCode.COMPILER_FAILURE,
                    f"could not minify: {exc}",
                    stage=meta["stage"],
                    launcher=launcher,
                )
            shrunk = None
            if not result.stopped and not job.real_inputs:
                shrunk = _shrink(job, pool, result, meta, interrupts.event)
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
    interrupted = result.stopped or cut
    write_json(
        job.run_dir / "minify.json",
        {
            "signature": str(job.signature),
            "nodes_before": result.nodes_before,
            "nodes_after": result.nodes_after,
            "calls": result.calls,
            "verified": verified,
            "interrupted": interrupted,
            "repro": str(repro),
            "repro_form": art.form,
            "repro_lines": art.lines,
            "repro_bytes": art.bytes,
            "sidecar": art.sidecar,
            "kernel": art.kernel,
            "inputs": _inputs_json(shrunk),
            "repro_before": art.before,
        },
    )
    return job.report(
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
        inputs=_inputs_json(shrunk),
        repro_before=art.before,
        ops=graph_ops(result.gm),
        device=art.device,
        repro_output=art.output.strip() or None,
        graph_kind=job.graph_kind,
        stage=meta["stage"],
        interrupted=interrupted,
        worker_restarts=pool.restarts,
        history=[dataclasses.asdict(h) for h in result.history],
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


def _read_capture(capture_dir: Path) -> tuple[Any, list[Any], dict[str, Any]]:
    import torch

    from tcompile.compiler.graph_io import load_graph

    gm = load_graph(capture_dir / CAPTURE_GRAPH)  # written by our worker
    inputs = torch.load(capture_dir / CAPTURE_INPUTS, weights_only=False)
    meta = json.loads((capture_dir / CAPTURE_META).read_text())
    return gm, inputs, meta


def _write_launcher(job: _Job, gm: Any, inputs: list[Any], meta: dict[str, Any]) -> str:
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


def _search(
    job: _Job, pool: Any, gm: Any, inputs: list[Any], meta: dict[str, Any], stop: threading.Event
) -> Any:
    import torch

    from tcompile.compiler.graph_io import from_data, to_data
    from tcompile.minifier import minify

    def progress(p: Any) -> None:
        job.observer.event(
            {
                "event": Event.MINIFY_PROGRESS,
                "nodes": p.nodes,
                "calls": p.calls,
                "pass": p.pass_name,
            }
        )

    # intermediate values lifted to inputs are computed in the program's grad mode
    with torch.set_grad_enabled(meta.get("grad_enabled", True)):
        return minify(
            gm,
            inputs,
            lambda g, i: pool.evaluate(g, i)[0],
            jobs=job.jobs,
            stop=stop.is_set,
            checkpoint=job.run_dir / "checkpoint",
            on_progress=progress,
            codec=(to_data, from_data),
            sanity="last",  # the run just saw it fail; the search shows the start fails
        )


def _shrink(job: _Job, pool: Any, result: Any, meta: dict[str, Any], stop: threading.Event) -> Any:
    """The minimal graph's inputs, shrunk with the same workers (shrink.py)."""
    import torch

    from tcompile.minifier.verdict import Verdict

    from .shrink import shrink_inputs

    job.observer.status("shrinking the inputs of the minimal graph")
    t0 = time.monotonic()
    with torch.set_grad_enabled(meta.get("grad_enabled", True)):
        shrunk = shrink_inputs(
            result.gm,
            result.inputs,
            lambda g, i: pool.evaluate(g, i)[0] is Verdict.SAME_FAILURE,
            stop=stop.is_set,
            # a bounded share of the whole job: at most half the graph search (or 20 s)
            seconds=max(20.0, 0.5 * result.seconds),
        )
    shrunk.seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    return shrunk


def _inputs_json(shrunk: Any) -> dict[str, Any] | None:
    if shrunk is None:
        return None
    return {
        "numel_before": shrunk.numel_before,
        "numel_after": shrunk.numel_after,
        "values": shrunk.values,
        "calls": shrunk.calls,
        "seconds": round(getattr(shrunk, "seconds", 0.0), 2),
        "steps": shrunk.steps,
    }

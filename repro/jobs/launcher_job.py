"""Minifying again from a minifier_launcher.py (``tcompile minify minifier_launcher.py``,
``python minifier_launcher.py [run]``): the launcher's graph, inputs and config are
served by a worker (compiler/child/serve.py), and the minify job goes on from there."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.protocol import LAUNCHER_WORKER, HookConfig, ServeSpec
from tcompile.compiler.runner import new_run_dir
from tcompile.compiler.signature import FailureSignature

from .minify_graph import minify_captured
from .minify_types import Job, MinifyReport

if TYPE_CHECKING:
    from tcompile.repro.writer import CaptureMeta


def launch(
    path: str,
    argv: list[str] | None = None,
    *,
    jobs: int = 1,
    out: str | None = None,
    real_inputs: bool = False,
    observer: Observer | None = None,
    trust: bool = False,
) -> MinifyReport:
    """Minify again from a launcher (``run``: only check that the failure reproduces)."""
    from tcompile.repro.launcher import check_files, read_launcher

    argv = argv or []
    try:
        data = read_launcher(path)
        here = check_files(path, data, trusted=trust)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    t0 = time.monotonic()
    run_dir = Path(new_run_dir(out or str(here), "launcher"))
    job = launcher_job(
        here, data, run_dir, jobs=jobs, real_inputs=real_inputs, observer=observer, t0=t0
    )
    if argv and argv[0] == "run":
        return _launcher_check(job.command, job.config, job.signature, here, data, run_dir, t0)
    return minify_captured(job)


def capture_data(
    meta: CaptureMeta, signature: dict[str, object], accuracy: str, command: list[str]
) -> dict[str, Any]:
    """A worker capture (``graph.pt``, ``inputs.pt``, ``capture.json``: a baseline's saved
    graph) as a launcher's data, for :func:`launcher_job` with the capture's folder."""
    from tcompile.compiler import layout

    return {
        "graph_file": layout.CAPTURE_GRAPH,
        "inputs_file": layout.CAPTURE_INPUTS,
        "meta": meta,
        "signature": signature,
        "accuracy": accuracy,
        "command": command,
    }


def launcher_job(
    here: Path,
    data: dict[str, Any],
    run_dir: Path,
    *,
    jobs: int,
    real_inputs: bool,
    observer: Observer | None,
    t0: float,
) -> Job:
    """The launcher start case: a minify job whose workers serve the launcher's graph
    (``data``: a launcher read and checked, or one this tcompile has just written, as
    the distributed minify does: dist_minify.py)."""
    sig = FailureSignature.from_json(data["signature"])
    # the worker: a launcher's graph served under the hooks (child/serve.py)
    config = HookConfig(
        dir=str(run_dir / "events"),
        accuracy=data["accuracy"],
        serve=ServeSpec(
            graph=0,
            capture_dir=str(run_dir / "capture"),
            signature=sig.to_json(),
            launcher={"dir": str(here), "data": data},
        ),
    )
    return Job(
        command=[sys.executable, "-c", LAUNCHER_WORKER],
        config=config,
        signature=sig,
        graph=0,
        graph_kind=data["meta"].get("forward_kind"),
        run_dir=run_dir,
        jobs=jobs,
        timeout=None,
        real_inputs=real_inputs,
        accuracy=data["accuracy"],
        observer=observer or NullObserver(),
        t0=t0,
        write_launcher=False,
        command_for_repro=data.get("command"),
    )


def _launcher_check(
    command: list[str],
    config: HookConfig,
    sig: FailureSignature,
    here: Path,
    data: dict[str, Any],
    run_dir: Path,
    t0: float,
) -> MinifyReport:
    """``python minifier_launcher.py run``: does the full graph still fail the same way?"""
    import torch

    from tcompile.compiler.graph_io import load_graph
    from tcompile.compiler.pool import WorkerPool
    from tcompile.minifier.verdict import Verdict

    pool = WorkerPool(command, config, jobs=1, work_dir=str(run_dir / "workers"), target=sig)
    try:
        pool.start()
        gm = load_graph(here / data["graph_file"])  # our own file
        inputs = torch.load(here / data["inputs_file"], weights_only=False)
        verdict, got = pool.evaluate(gm, inputs)
    finally:
        pool.close()
    same = verdict is Verdict.SAME_FAILURE
    got_text = str(FailureSignature.from_json(got)) if got and "stage" in got else "no failure"
    return MinifyReport(
        ExitCode.COMPILER_FAILURE if same else ExitCode.OK,
        f"REPRODUCED: {sig}" if same else f"NOT REPRODUCED (got: {got_text})",
        signature=sig,
        verified=same,
        run_dir=str(run_dir),
        seconds=time.monotonic() - t0,
    )

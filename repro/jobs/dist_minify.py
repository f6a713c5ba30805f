"""``tcompile minify -- torchrun ...``: a failing graph of one rank of a distributed job,
shrunk into a single-process repro.py that needs no process group.

A minifier worker cannot pause a torchrun job and answer on pipes (torchrun's
workers do not inherit them), and a paused rank would leave the others waiting in a
collective.  So the job runs once more with the failing rank told to capture the
graph at its first call (its reference, its real inputs, the configuration in force:
child/serve.py, ``capture_only``); the capture stops every process of the run.  The
graph is then written as a minifier_launcher.py, and minified from it by workers that
are plain single processes (launcher_job.py), like any launcher.  A graph that holds
collectives is minified against a fake process group, with what its collectives
returned in the job added back (compiler/collectives.py).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.failure import Failure
from tcompile.compiler.observer import Observer
from tcompile.compiler.protocol import CAPTURE_COLLECTIVES, CAPTURE_META, HookConfig, ServeSpec
from tcompile.compiler.runner import new_run_dir, run_process

from .minify_types import GraphMinifyReport, MinifyOptions

if TYPE_CHECKING:
    import torch

    from tcompile.repro.writer import CaptureMeta


def minify_rank(
    command: list[str],
    target: Failure,
    *,
    run_dir: Path,
    level: str,
    o: MinifyOptions,
    observer: Observer,
    t0: float,
) -> GraphMinifyReport:
    """One rank's failing graph of a launched job: the job run again until that rank
    captures it, then minified in single processes (``o``: minify's options, its
    accuracy the one the failure needs)."""
    backend, accuracy, jobs, timeout = o.backend, o.accuracy, o.jobs, o.timeout
    real_inputs, stdout, stderr = o.real_inputs, o.stdout, o.stderr
    from tcompile.repro.launcher import write_launcher

    from .launcher_job import launcher_job
    from .minify_graph import minify_captured
    from .minify_search import read_capture

    where = f"graph {target.graph} on rank {target.rank}"
    observer.status(f"running the job again; rank {target.rank} captures graph {target.graph}")
    capture_dir = run_dir / "capture"
    config = HookConfig(
        dir=str(run_dir / "capture-run"),
        stage=backend,
        accuracy=accuracy,
        serve=ServeSpec(
            graph=target.graph,
            rank=target.rank,
            capture_only=True,
            capture_dir=str(capture_dir),
            signature=target.signature.to_json(),
            level=level,
            graph_kind=target.graph_kind,
        ),
    )
    run_process(command, config, timeout=timeout, stdout=stdout, stderr=stderr)
    if not (capture_dir / CAPTURE_META).exists():
        return GraphMinifyReport(
            ExitCode.COMPILER_FAILURE,
            f"could not minify: the job did not reach {where} again",
            signature=target.signature,
            graph=target.graph,
            rank=target.rank,
            run_dir=str(run_dir),
            seconds=time.monotonic() - t0,
        )
    gm, inputs, meta = read_capture(capture_dir)
    gm, inputs, meta = _replay_collectives(capture_dir, gm, inputs, meta, observer)
    launcher, data = write_launcher(
        run_dir / layout.LAUNCHER,
        gm=gm,
        inputs=inputs,
        meta={**meta, "rank": target.rank},
        signature=target.signature,
        accuracy=accuracy,
        command=command,
    )
    alone = "a fake process group answering its collectives" if meta.get("collectives") else ""
    observer.status(f"minifying {where} in single processes ({alone or 'no process group'})")
    # the launcher start case, from the data just written (not read back from disk)
    job = launcher_job(
        launcher.parent,
        data,
        Path(new_run_dir(str(run_dir), "launcher")),
        jobs=jobs,
        real_inputs=real_inputs,
        observer=observer,
        t0=time.monotonic(),
    )
    report = minify_captured(job)
    report.launcher = str(launcher)
    report.graph = target.graph
    report.graph_kind = target.graph_kind
    report.rank = target.rank
    report.replayed_collectives = meta.get("replayed_collectives")
    report.seconds = time.monotonic() - t0
    return report


def _replay_collectives(
    capture_dir: Path,
    gm: torch.fx.GraphModule,
    inputs: list[object],
    meta: CaptureMeta,
    observer: Observer,
) -> tuple[torch.fx.GraphModule, list[object], CaptureMeta]:
    """The captured graph with what its collectives returned in the job added back
    (compiler/collectives.py): the single process then computes the job's values."""
    import torch

    from tcompile.compiler.collectives import replay
    from tcompile.compiler.configs import fake_process_group

    path = capture_dir / CAPTURE_COLLECTIVES
    if not meta.get("collectives"):
        return gm, inputs, meta
    if not path.exists():
        if meta.get("recorded_collectives") is None:  # [] : no collective result to keep
            observer.status(
                "the collective results of the captured graph could not be recorded (its "
                "eager run on the capturing rank raised, or the other ranks did not make "
                "the same collectives within 120 s): the fake process group answers them "
                "from this rank's values alone"
            )
        return gm, inputs, meta
    recorded = torch.load(path, weights_only=True)  # tensors only
    try:
        with fake_process_group(meta.get("rank", 0), meta.get("world_size", 2)):
            gm, inputs, added = replay(gm, inputs, recorded)
    except Exception as exc:  # noqa: BLE001 - tcompile's own shortfall, said; the search goes on
        from .minify_search import read_capture

        observer.status(
            f"warning: replaying the recorded collective results failed ({type(exc).__name__}:"
            f" {exc}): the fake process group answers them from this rank's values alone"
        )
        return read_capture(capture_dir)  # the capture as it was
    if added:
        observer.status(
            f"{len(added)} collective result(s) replayed as the job computed them "
            f"({', '.join(added)}: what the other ranks contributed)"
        )
    return gm, inputs, {**meta, "replayed_collectives": added}

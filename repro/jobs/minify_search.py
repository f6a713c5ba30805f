"""The two searches of the minify job, run by the workers' oracle: the graph
(minifier engine) and then the minimal graph's inputs (shrink.py); with the
interrupt handling that keeps the best result of either."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler.protocol import CAPTURE_GRAPH, CAPTURE_INPUTS, CAPTURE_META, Event

from .minify_types import InputsSummary

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    import torch

    from tcompile.compiler.pool import WorkerPool
    from tcompile.minifier.engine import MinifyResult, Progress
    from tcompile.repro.shrink import Shrunk
    from tcompile.repro.writer import CaptureMeta

    from .minify_types import Job


class Interrupts:
    """Ctrl-C or SIGTERM during the search stops it: the best graph so far is kept,
    written and reported (``interrupted``)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: dict[
            int, Callable[[int, FrameType | None], object] | int | signal.Handlers | None
        ] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, lambda *a: self.event.set())
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def read_capture(capture_dir: Path) -> tuple[torch.fx.GraphModule, list[object], CaptureMeta]:
    import torch

    from tcompile.compiler.graph_io import load_graph

    gm = load_graph(capture_dir / CAPTURE_GRAPH)  # written by our worker
    inputs = torch.load(capture_dir / CAPTURE_INPUTS, weights_only=False)
    meta = json.loads((capture_dir / CAPTURE_META).read_text())
    return gm, inputs, meta


def search_graph(
    job: Job,
    pool: WorkerPool,
    gm: torch.fx.GraphModule,
    inputs: list[object],
    meta: CaptureMeta,
    stop: threading.Event,
) -> MinifyResult:
    import torch

    from tcompile.compiler.graph_io import from_data, to_data
    from tcompile.minifier import minify

    def progress(p: Progress) -> None:
        job.observer.event(
            {
                "event": Event.MINIFY_PROGRESS,
                "nodes": p.nodes,
                "calls": p.calls,
                "pass": p.pass_name,
            }
        )

    from tcompile.compiler.configs import fake_process_group

    group: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if meta.get("collectives"):  # its intermediate values need the job's collectives
        group = fake_process_group(meta.get("rank", 0), meta.get("world_size", 2))
    # intermediate values lifted to inputs are computed in the program's grad mode
    with group, torch.set_grad_enabled(meta.get("grad_enabled", True)):
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


def shrink_minimal(
    job: Job, pool: WorkerPool, result: MinifyResult, meta: CaptureMeta, stop: threading.Event
) -> Shrunk | None:
    """The minimal graph's inputs, shrunk with the same workers (shrink.py)."""
    import torch

    from tcompile.repro.shrink import shrink_inputs

    plain = (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat, type(None))
    if not all(isinstance(x, plain) for x in result.inputs):
        # a subgraph of a higher-order op (while_loop, cond) or another object among the
        # inputs: nothing to shrink it to; the inputs stay as they are
        job.observer.status("the minimal graph takes an object as an input: inputs kept")
        return None
    job.observer.status("shrinking the inputs of the minimal graph")
    t0 = time.monotonic()
    with torch.set_grad_enabled(meta.get("grad_enabled", True)):
        shrunk = shrink_inputs(
            result.gm,
            result.inputs,
            lambda g, i: pool.evaluate(g, i)[0],
            stop=stop.is_set,
            # a bounded share of the whole job: at most half the graph search (or 20 s)
            seconds=max(20.0, 0.5 * result.seconds),
        )
    shrunk.seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    return shrunk


def inputs_json(shrunk: Shrunk | None) -> InputsSummary | None:
    if shrunk is None:
        return None
    return InputsSummary(
        **{
            "numel_before": shrunk.numel_before,
            "numel_after": shrunk.numel_after,
            "values": shrunk.values,
            "calls": shrunk.calls,
            "seconds": round(getattr(shrunk, "seconds", 0.0), 2),
            "steps": shrunk.steps,
        }
    )

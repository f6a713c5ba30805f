"""``minify()``: the engine's entry point: a start case, the schedule, checkpoints."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import checkpoint as ckpt
from .engine import MinifyResult, Oracle, Problem, Progress, Step, Stop
from .fixpoint import reduce as reduce_to_fixpoint
from .graph import Case, make_case
from .passes import DEFAULT_SCHEDULE
from .verdict import Verdict


def minify(
    gm: Any,
    inputs: Sequence[Any],
    oracle: Oracle,
    *,
    jobs: int = 1,
    stop: Stop | Callable[[], bool] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    schedule: Sequence[Callable[[Problem, Case], Case | None]] | None = None,
    max_rounds: int = 20,
    codec: ckpt.Codec | None = None,
    final_check: bool = False,
    sanity: str = "first",
) -> MinifyResult:
    """Shrink ``gm`` to the smallest graph on which ``oracle`` still fails the same way.

    ``oracle(gm, inputs)`` returns a :class:`Verdict` or a bool (True: it fails).
    The input graph is never mutated.  ``checkpoint`` is a directory: the best case is
    written there after each accepted step, and a later call resumes from it.
    ``final_check`` tests the result once more past the cache (for an oracle that may
    be flaky; off by default: every accepted case was seen to fail, and tcompile
    verifies the repro it writes in a fresh process anyway).
    ``sanity``: when to ask whether the start fails: ``"first"`` (before anything
    else), or ``"last"`` -- only when no smaller case failed, to explain why (for a
    caller that has just seen the failure, and whose oracle calls cost a compile of
    the whole graph: the search itself shows the start fails).
    """
    t0 = time.monotonic()
    original = make_case(gm, list(inputs))
    nodes_before = original.size
    start = original
    history: list[Step] = []
    calls_before = 0
    if checkpoint is not None:
        saved = ckpt.load(checkpoint, codec)
        if saved is not None:
            start, history, calls_before = saved
    save = (
        (lambda c, h, n: ckpt.save(checkpoint, c, h, n + calls_before, codec))
        if checkpoint
        else None
    )
    problem = Problem(start, oracle, jobs=jobs, stop=stop, on_progress=on_progress, checkpoint=save)
    problem.history = list(history)
    try:
        # Sanity: the start must fail (asked directly: the gate only admits smaller).
        problem.pass_name = "sanity"
        if sanity == "first":
            problem.sanity_check(start, overlap=jobs > 1)
        stopped = reduce_to_fixpoint(problem, [schedule or DEFAULT_SCHEDULE], max_rounds)
        if not stopped:
            if sanity != "first" and not problem.history:
                problem.sanity_check(start, overlap=False)  # nothing smaller failed: why?
            problem.finish_sanity()
        best = problem.best
        final = Verdict.SAME_FAILURE
        if final_check and not stopped and best is not start:
            final = problem.final_check(best)
        return MinifyResult(
            gm=best.gm,
            inputs=list(best.inputs),
            calls=problem.calls + calls_before,
            history=problem.history,
            nodes_before=nodes_before,
            nodes_after=best.size,
            cache_hits=problem.cache_hits,
            seconds=time.monotonic() - t0,
            stopped=stopped,
            verified=final is Verdict.SAME_FAILURE and not stopped,
            final_verdict=final,
            passes=problem.gate.stats_json(),
        )
    finally:
        problem.close()

"""Shrinking a Python function's source behind an oracle (capture failures: a frame
TorchDynamo cannot capture has no graph, only code).

The same discipline as the graph engine: one gate (a candidate that is not smaller,
or was tried, is never tested), passes that only propose, the schedule as data, a
fixed point, limits passed in.  A candidate is the source of a module: the function
(named ``name``), helpers the passes introduce, and two literals the oracle reads --
``__bindings__`` (a parameter bound to an expression over the original arguments,
``{"w": "self.proj.weight"}``) and ``__inputs__`` (a parameter made fresh from a spec,
``{"s": {"shape": [], "dtype": "float32"}}``).  Size is measured on the functions
alone: turning ``self.proj.weight`` into a parameter makes a candidate smaller.

Passes (each small, on the Python AST):

* ``inline_calls`` -- a call whose callee's source is known (a module's forward, a
  method, a function of the program) replaced by the callee's body, its parameters
  bound (a call inside an expression is lifted into a statement first);
* ``unroll_loops`` -- ``for b in self.blocks:`` over a module list of known length,
  written out with ``self.blocks[i]``;
* ``attrs_to_inputs`` -- module attributes that are tensors become parameters bound to
  them; numbers and tuples become literals;
* ``values_to_inputs`` -- a local assigned once becomes a parameter made fresh from its
  value's spec (its computation is gone: "replace a statement's value with a fresh
  input of the same type and shape");
* ``branches`` -- an ``if`` replaced by its body or its ``else``;
* ``loops`` -- a loop run once (its target bound to the first item) or dropped;
* ``delete_statements`` -- ddmin over the statements of every block (chunks, then
  single statements); a block's last statement can become ``pass``;
* ``drop_arguments`` -- parameters the body no longer reads (and their literals).

Enabling passes (inlining, unrolling) may grow a candidate; they are accepted only
when it still fails the same way, and the others then shrink it.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Callable, Iterator

from .checkpoint import load_source, save_source
from .fixpoint import Growth, reduce
from .source_case import (
    Hints,
    Proposal,
    Proposals,
    Search,
    SourceOracle,
    function_lines,
    literals,
    size,
    with_inputs,
)
from .source_passes import SCHEDULE

__all__ = [
    "Hints",
    "SourceResult",
    "function_lines",
    "literals",
    "minify_source",
    "size",
    "with_inputs",
]


@dataclasses.dataclass
class SourceResult:
    source: str
    calls: int
    lines_before: int
    lines_after: int
    history: list[str]
    stopped: bool = False
    # per pass: oracle runs (its candidates) and seconds (instrumented runs included)
    passes: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)


def resumed(proposals: Iterator[Proposal], start: int) -> Iterator[Proposal]:
    """The pass's proposals from the ``start``-th on, then the ones before it; each
    keeps its index in the pass's own order."""
    before: list[Proposal] = []
    for i, p in enumerate(proposals):
        p.index = i
        if i < start:
            before.append(p)
        else:
            yield p
    yield from before


def minify_source(
    source: str,
    name: str | None,
    oracle: SourceOracle,
    *,
    hints: Hints | None = None,
    max_calls: int = 300,
    max_rounds: int = 40,
    stop: Callable[[], bool] = lambda: False,
    jobs: int = 1,
    progress_cb: Callable[[str, int], None] | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
) -> SourceResult:
    """The smallest source found on which ``oracle`` still fails the same way (the
    caller checked that ``source`` itself does).  ``name``: the function a capture
    candidate is about; None: the whole program (program_passes.py).  ``jobs``:
    candidates judged at once.  ``progress_cb(best, calls)`` after each step.
    ``checkpoint``: a directory; the smallest source so far is written there (as the
    graph engine's checkpoint is, on the gate's best-so-far hook), and a later call on
    the same source resumes from it, with its history and calls."""
    from .program_passes import PROGRAM_PHASES, RESUMABLE

    hints = hints or Hints()
    best = ast.unparse(ast.parse(source)) + "\n"
    saved = load_source(checkpoint, best) if checkpoint is not None else None
    start, history, calls_before = saved or (best, [], 0)

    def on_best(src: str) -> None:
        if checkpoint is not None:
            save_source(checkpoint, best, src, search.history, calls_before + search.calls)
        if progress_cb is not None:
            progress_cb(src, calls_before + search.calls)

    search = Search(
        oracle,
        name,
        max_calls - calls_before,
        stop,
        jobs=jobs,
        keep=hints.keep,
        on_best=on_best,
        start=start,
    )
    search.history = list(history)
    lines_before = source.strip().count("\n") + 1
    # The one problem's fixed point (problem.py), with what a program adds:
    # - enabling steps (inlining) may grow it, and the passes after them may not win it
    #   back: the result is the smallest candidate that failed the same way, never one
    #   larger than the program it started from (``Growth``).  A capture candidate's
    #   inlined form is the point -- its bindings make it stand alone -- and stays.
    # - its passes resume where they last succeeded (C-Reduce's way): ddmin over a
    #   200-line program would otherwise re-judge, each round, the big chunks that
    #   failed the round before.  Passes wrap around, so a round without progress has
    #   still judged every proposal once.
    # - a bug of one pass on an unusual program costs that pass, not the search: its
    #   candidates are never judged, the others go on, and the history says so.
    program = name is None
    phases = PROGRAM_PHASES if program else (SCHEDULE,)
    try:
        reduce(
            search,
            [[_as_pass(p, hints) for p in schedule] for schedule in phases],
            max_rounds,
            growth=Growth(max_calls) if program else None,
            isolate=True,
            resumable=RESUMABLE if program else (),
        )
    finally:
        search.close()
    best = search.best
    return SourceResult(
        best,
        calls_before + search.calls,
        lines_before,
        function_lines(best, name) if name is not None else best.strip().count("\n") + 1,
        search.history,
        stopped=stop(),
        passes=search.wall,
    )


def _as_pass(
    pass_fn: Callable[..., Proposals], hints: Hints
) -> Callable[[Search, str], str | None]:
    """A source pass (it proposes; source_passes.py) as a pass of the one problem: its
    proposals, from where it resumes, judged in order."""

    def run(search: Search, best: str) -> str | None:
        proposals = pass_fn(search, best, hints)
        if search.resume_from is not None:
            proposals = resumed(proposals, search.resume_from)
        return search.first_failing(proposals)

    run.__name__ = pass_fn.__name__
    return run

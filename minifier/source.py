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
import re
import time
from collections.abc import Callable, Iterator

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
) -> SourceResult:
    """The smallest source found on which ``oracle`` still fails the same way (the
    caller checked that ``source`` itself does).  ``name``: the function a capture
    candidate is about; None: the whole program (program_passes.py).  ``jobs``:
    candidates judged at once.  ``progress_cb(best, calls)`` after each step."""
    from .program_passes import PROGRAM_PHASES, RESUMABLE

    hints = hints or Hints()
    search = Search(
        oracle,
        name,
        max_calls,
        stop,
        jobs=jobs,
        keep=hints.keep,
        on_best=None if progress_cb is None else (lambda src: progress_cb(src, search.calls)),
    )
    best = ast.unparse(ast.parse(source)) + "\n"
    lines_before = source.strip().count("\n") + 1
    # a program: enabling steps (inlining) may grow it, and the passes after them may
    # not win it back: the result is the smallest candidate that failed the same way,
    # never one larger than the program it started from.  (A capture candidate's
    # inlined form is the point -- its bindings make it stand alone -- and stays.)
    smallest = best
    # a program's passes resume where they last succeeded (C-Reduce's way): ddmin over
    # a 200-line program would otherwise re-judge, each round, the big chunks that
    # failed the round before.  Passes wrap around, so a round without progress has
    # still judged every proposal once.
    resume: dict[str, int] = {}
    broken: set[str] = set()
    growth = _Growth(max_calls)
    spent: dict[str, dict[str, float]] = {}  # per pass (--json: program.passes)
    phases = (SCHEDULE,) if name is not None else PROGRAM_PHASES
    for schedule in phases:
        for _ in range(max_rounds):
            progress = False
            for pass_fn in schedule:
                if search.exhausted():
                    break
                key = pass_fn.__name__
                if key in broken:
                    continue
                # a grown program's passes stop where its window ends, not a pass later
                search.pause_at = growth.pause_at()
                proposals = growth.allowed(key, pass_fn(search, best, hints))
                if name is None and key in RESUMABLE:
                    proposals = resumed(proposals, resume.get(key, 0))
                before, t0 = search.calls, time.monotonic()
                try:
                    found = search.run(proposals, best)
                except Exception as e:  # noqa: BLE001 -- a pass's own bug
                    # a bug of one pass on an unusual program costs that pass, not the
                    # search: its candidates are never judged, the others go on, and
                    # the history says so (the result is still one the oracle judged)
                    broken.add(key)
                    search.history.append(
                        f"pass {key} failed (tcompile's bug): {type(e).__name__}: {e}"
                    )
                    continue
                finally:
                    used = spent.setdefault(key, {"runs": 0, "seconds": 0.0})
                    used["runs"] += search.calls - before
                    used["seconds"] = round(used["seconds"] + time.monotonic() - t0, 1)
                if found is not None:
                    resume[key] = search.taken
                    best, progress = found, True
                    smaller = name is not None or search.size(best) <= search.size(smallest)
                    growth.step(search.calls, key, search.history[-1], smaller)
                    if smaller:
                        smallest = best
                        search.gate.best(best)  # the checkpoint: the smallest so far
                gave_up = growth.given_up(search.calls)
                if gave_up:
                    search.history.append(gave_up)
                    best = smallest
            if not progress or search.exhausted():
                break
    if search.size(smallest) < search.size(best):
        best = smallest
        search.history.append("back to the smallest candidate (later steps had grown it)")
    return SourceResult(
        best,
        search.calls,
        lines_before,
        function_lines(best, name) if name is not None else best.strip().count("\n") + 1,
        search.history,
        stopped=stop(),
        passes=spent,
    )


class _Growth:
    """A step that grew a program (a loop written out, a function inlined) must pay off:
    when ``window`` runs after it the program is still larger than the smallest, the
    search goes back to the smallest (a loop written out three times, then each copy
    inlined into, spent a whole budget and ended where it began); a step of the same
    kind (the same pass and description: "loop written out (3 time(s), ...)", "inline
    fn") is not taken again.  And it must keep paying: ``stall`` runs with no step
    taken while still larger also end it (a grown 30-line program otherwise spent the
    whole window judging candidates that all failed, twice: 80 of its 205 runs).  The
    window was max(30, budget/10) runs: on a GPU, where a candidate costs 10-20 s, a
    written-out loop that could not pay off held a CUDA-graph program for 40 runs."""

    def __init__(self, max_calls: int) -> None:
        self.window = max(20, max_calls // 16)
        self.stall = max(10, self.window // 3)
        self.last_step = 0  # calls when a step was last taken
        self.grew: tuple[int, str, str] | None = None  # (calls then, the pass, the step)
        self.banned: set[tuple[str, str]] = set()  # (pass, what): not taken again

    def pause_at(self) -> int | None:
        """Where a pass on a grown program must stop (None: not grown)."""
        if self.grew is None:
            return None
        return min(self.grew[0] + self.window, self.last_step + self.stall) + 1

    def allowed(self, key: str, proposals: Proposals) -> Proposals:
        if not any(k == key for k, _ in self.banned):
            return proposals
        return (p for p in proposals if not (p.grow and (key, _kind(p.what)) in self.banned))

    def step(self, calls: int, key: str, what: str, smaller: bool) -> None:
        self.last_step = calls
        if smaller:
            self.grew = None
        elif self.grew is None:
            self.grew = (calls, key, what)

    def given_up(self, calls: int) -> str | None:
        """Why the search goes back to the smallest program now (None: it does not)."""
        g = self.grew
        if g is None or (calls - g[0] <= self.window and calls - self.last_step <= self.stall):
            return None
        self.banned.add((g[1], _kind(g[2])))
        self.grew = None
        return (
            f"back to the smallest candidate: a step of {g[1]} ({g[2]}) had grown it and "
            f"{calls - g[0]} runs did not win it back"
        )


def _kind(what: str) -> str:
    """A step's kind: its description without its counts ("loop written out (2 time(s),
    ...)" and "(4 time(s), ...)" are one kind: the loop's count changed, not the step)."""
    return re.sub(r"\d+", "N", what)

"""The fixed point of the one search problem (problem.py): rounds of a schedule of
passes until a round makes no progress, and growth steps that can be taken back.

Both drivers are this one: the graph engine (reduce.py: one phase, every step
smaller) and the source engine (source.py: a program's two phases, passes that
resume where they last took a candidate, a pass's own bug isolated, enabling steps
that may grow the program and are taken back when they do not pay off).

Pure: nothing of tcompile but the problem.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .problem import Candidate, Pass, Problem, Stopped

__all__ = ["Growth", "reduce"]


def reduce(
    problem: Problem[Any],
    phases: Sequence[Sequence[Pass]],
    max_rounds: int,
    *,
    growth: Growth | None = None,
    isolate: bool = False,
    resumable: Iterable[str] = (),
) -> bool:
    """Rounds of each phase's schedule until a round makes no progress (or
    ``max_rounds``).  A pass is ``pass_fn(problem, best)``: it searches through the
    primitives of problem.py and answers a case to take, or None.  ``isolate``: a pass that
    raises (tcompile's own bug on an unusual case) is not run again, and the history
    says so.  ``resumable``: passes whose next run starts where they last took a
    candidate (``resume_from``).  ``growth``: steps that grew the case are taken
    back when they do not pay off.  True: stopped by the limits."""
    problem.resumable = set(resumable)
    try:
        for schedule in phases:
            for _ in range(max_rounds):
                if not _round(problem, schedule, growth, isolate):
                    break
                if problem.exhausted():
                    raise Stopped
    except Stopped:
        if problem.smaller(problem.smallest_seen, problem.best) and problem.smaller(
            problem.smallest_seen, problem.smallest
        ):
            problem.pass_name += " (interrupted)"
            problem.accept(problem.smallest_seen, "the smallest candidate seen failing")
        return True
    finally:
        if growth is not None and problem.smaller(problem.smallest, problem.best):
            problem.best = problem.smallest  # never larger than the smallest taken
            problem.history.append("back to the smallest candidate (later steps had grown it)")
    return False


def _round(
    problem: Problem[Any], schedule: Sequence[Pass], growth: Growth | None, isolate: bool
) -> bool:
    progress = False
    for pass_fn in schedule:
        if problem.exhausted():
            raise Stopped
        key = getattr(pass_fn, "__name__", str(pass_fn))
        if key in problem.broken:
            continue
        problem.pass_name = key
        problem.pause_at = growth.pause_at() if growth is not None else None
        problem.allowed = growth.allowed(key) if growth is not None else (lambda c: True)
        problem.resume_from = problem.resume.get(key, 0) if key in problem.resumable else None
        before, t0, problem.last = problem.calls, time.monotonic(), None
        try:
            found = pass_fn(problem, problem.best)
        except Stopped:
            raise
        except Exception as e:
            if not isolate:
                raise
            problem.broken.add(key)
            problem.history.append(f"pass {key} failed (tcompile's bug): {type(e).__name__}: {e}")
            continue
        finally:
            used = problem.wall.setdefault(key, {"runs": 0, "seconds": 0.0})
            used["runs"] += problem.calls - before
            used["seconds"] = round(used["seconds"] + time.monotonic() - t0, 1)
        grew = problem.last is not None and problem.last.grow
        if (
            found is not None
            and found is not problem.best
            and (grew or problem.smaller(found, problem.best))
        ):
            if problem.last is not None and key in problem.resumable:
                problem.resume[key] = problem.last.index
            problem.accept(found)
            progress = True  # a step the fixed point took (a pass's own steps are not)
            if growth is not None:
                growth.step(
                    problem.calls, key, str(problem.history[-1]), problem.best is problem.smallest
                )
        if growth is not None and (gave_up := growth.given_up(problem.calls)):
            problem.history.append(gave_up)
            problem.best = problem.smallest
    return progress


class Growth:
    """Steps that grow a case (a loop written out, a function inlined) must pay off,
    else they are taken back: when ``window`` calls after one the case is still larger
    than the smallest taken, the search goes back to the smallest and a step of the
    same kind (the same pass and description, counts aside) is not taken again; and
    it must keep paying: ``stall`` calls with no step taken while still larger end it
    too.  (A loop written out three times, then each copy inlined into, once spent a
    whole budget and ended where it began; on a GPU, where a candidate costs 10-20 s, a
    written-out loop that could not pay off held a program for 40 runs.)"""

    def __init__(self, max_calls: int) -> None:
        self.window = max(20, max_calls // 16)
        self.stall = max(10, self.window // 3)
        self.last_step = 0  # calls when a step was last taken
        self.grew: tuple[int, str, str] | None = None  # (calls then, the pass, the step)
        self.banned: set[tuple[str, str]] = set()  # (pass, kind of step): not taken again

    def pause_at(self) -> int | None:
        """Where a pass on a grown case must stop (None: not grown)."""
        if self.grew is None:
            return None
        return min(self.grew[0] + self.window, self.last_step + self.stall) + 1

    def allowed(self, key: str) -> Callable[[Candidate], bool]:
        """Whether a candidate of pass ``key`` may be proposed (a banned growth step not)."""
        if not any(k == key for k, _ in self.banned):
            return lambda c: True
        return lambda c: not (c.grow and (key, _kind(c.what)) in self.banned)

    def step(self, calls: int, key: str, what: str, smallest: bool) -> None:
        self.last_step = calls
        if smallest:
            self.grew = None
        elif self.grew is None:
            self.grew = (calls, key, what)

    def given_up(self, calls: int) -> str | None:
        """Why the search goes back to the smallest case now (None: it does not)."""
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
    ...)" and "(4 time(s), ...)" are one kind)."""
    return re.sub(r"\d+", "N", what)

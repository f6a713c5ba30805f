"""The one gate in front of an oracle, whatever the case is: a graph (engine.Problem),
a frame's or a program's source (source_case.Search), a graph's inputs
(repro/shrink.py).

What every search shares lives here once: the limits (calls, a deadline, a stop
callable), the verdict cache by the case's key (a candidate tried before never reaches
the oracle again), the call count, judging ``jobs`` candidates at a time,
statistics per pass (calls, candidates taken, seconds), and the best-so-far hook every
checkpoint hangs on (``on_best``: the graph engine's checkpoint file, the program
level's best.py).  What differs stays with the
format: the case's key and size, what makes a candidate admissible (smaller than the
best; for source, that it parses and keeps its anchors), and the search's order
(speculative binary search and ddmin for graphs, a pass's proposals for source).  As
in shrinkray's ReductionProblem, the format is the problem's parameter, not a copy of
the machinery; as in Hypothesis's shrinker, the cache is consulted before every call.

Pure: no torch, nothing of tcompile.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .verdict import Verdict, as_verdict


@dataclasses.dataclass(frozen=True)
class Stop:
    """Limits: stop after ``max_calls`` oracle calls or at ``deadline`` (time.monotonic())."""

    max_calls: int | None = None
    deadline: float | None = None

    @classmethod
    def after(cls, seconds: float | None = None, calls: int | None = None) -> Stop:
        return cls(
            max_calls=calls, deadline=None if seconds is None else time.monotonic() + seconds
        )


@dataclasses.dataclass
class PassStats:
    """One pass's share of a search."""

    calls: int = 0  # oracle calls made while the pass ran
    taken: int = 0  # candidates it proposed that were kept
    seconds: float = 0.0  # wall time of those calls

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "taken": self.taken, "seconds": round(self.seconds, 2)}


class Gate:
    """Limits, the verdict cache, the call count and the statistics of one search.

    ``oracle(case)`` answers a Verdict or a bool; an oracle that raises says the
    candidate is broken (``on_error``), except the exceptions in ``reraise`` (a
    TypeError: the caller's bug, for the graph engine).
    """

    def __init__(
        self,
        oracle: Callable[[Any], Any],
        *,
        limits: Stop | Callable[[], bool] | None = None,
        jobs: int = 1,
        on_error: Verdict = Verdict.INVALID,
        reraise: tuple[type[BaseException], ...] = (TypeError,),
        on_best: Callable[[Any], None] | None = None,
    ) -> None:
        self.oracle = oracle
        self.on_best = on_best
        self.reraise = reraise
        self.limits = limits
        self.jobs = max(1, int(jobs))
        self.on_error = on_error
        self.cache: dict[str, Verdict] = {}
        self.calls = 0
        self.cache_hits = 0
        self.pass_name = "start"
        self.stats: dict[str, PassStats] = {}
        self._lock = threading.Lock()  # calls from the threads of judge_all

    # ---- limits ----------------------------------------------------------------
    def exhausted(self) -> bool:
        s = self.limits
        if s is None:
            return False
        if isinstance(s, Stop):
            if s.max_calls is not None and self.calls >= s.max_calls:
                return True
            return s.deadline is not None and time.monotonic() >= s.deadline
        return bool(s())

    # ---- the cache -------------------------------------------------------------
    def known(self, key: str) -> Verdict | None:
        """The verdict of a case tried before (counted as a cache hit), else None."""
        verdict = self.cache.get(key)
        if verdict is not None:
            self.cache_hits += 1
        return verdict

    # ---- calls -----------------------------------------------------------------
    def count(self, n: int = 1) -> None:
        """``n`` oracle calls about to be made, charged to the current pass."""
        self.calls += n
        self._stats().calls += n

    def call(self, case: Any) -> Verdict:
        """One oracle call (not counted: ``count`` says when one is made)."""
        t0 = time.monotonic()
        try:
            return as_verdict(self.oracle(case))
        except self.reraise:
            raise
        except Exception:  # an oracle that raises: the candidate is broken, not interesting
            return self.on_error
        finally:
            with self._lock:
                self._stats().seconds += time.monotonic() - t0

    def judge(self, key: str, case: Any) -> Verdict:
        """One candidate: from the cache, or one counted call whose answer is kept."""
        known = self.known(key)
        if known is not None:
            return known
        self.count()
        verdict = self.cache[key] = self.call(case)
        return verdict

    def judge_all(self, batch: Sequence[tuple[str, Any]]) -> list[Verdict]:
        """Candidates not tried before, in order: all at once in threads with ``jobs``
        above 1, else one at a time up to the first that fails the same way (those
        after it get no verdict: the list is shorter)."""
        if len(batch) > 1 and self.jobs > 1:
            self.count(len(batch))
            with ThreadPoolExecutor(len(batch)) as pool:
                verdicts = list(pool.map(self.call, [case for _, case in batch]))
        else:
            verdicts = []
            for _, case in batch:
                self.count()
                verdicts.append(self.call(case))
                if verdicts[-1] is Verdict.SAME_FAILURE:
                    break
        for (key, _), verdict in zip(batch, verdicts):
            self.cache[key] = verdict
        return verdicts

    # ---- statistics ------------------------------------------------------------
    def taken(self) -> None:
        """The current pass's candidate was kept."""
        self._stats().taken += 1

    # ---- the best so far (checkpoints) -------------------------------------------
    def best(self, case: Any) -> None:
        """The search's best case so far changed (the format says when: a graph on every
        step, a program only when smaller than every earlier one): checkpoint it."""
        if self.on_best is not None:
            self.on_best(case)

    def _stats(self) -> PassStats:
        return self.stats.setdefault(self.pass_name, PassStats())

    def stats_json(self) -> dict[str, dict[str, Any]]:
        return {name: s.to_json() for name, s in self.stats.items()}

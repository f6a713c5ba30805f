"""The one search problem: a case type's format, the gate, the best so far, the search
primitives and the fixed point -- whatever a case is.

Every reduction tcompile makes is this problem over a format: a graph
(engine.GraphFormat), a frame's or a whole program's source (source_case.SourceFormat),
a graph's inputs (repro/shrink.py).  The format says only what differs: a case's key
(the cache's; None: not cached), its size (smaller is better), what a candidate must
be to be judged at all (``admit``: smaller than the best, unless a step that may grow
it; for source, that it parses and keeps its anchors), what the oracle is handed, and
how a step is written into the history.  The rest is here once:

* the gate (gate.py): limits, the verdict cache, calls, per-pass statistics and the
  best-so-far hook every checkpoint hangs on;
* judging candidates ``jobs`` at a time, deciding exactly as a sequential scan would
  (the first in order that fails the same way), with the speculation that makes that
  cheap: a batch evaluated at once, the first midpoints of every possible next round
  of a binary search built while a round runs, an idle worker re-testing a batch's
  smallest candidate (its second run is the final check if it wins);
* the primitives passes search with: ``first_failing`` (an ordered, possibly lazy,
  list of candidates), ``bisect_first_failing`` / ``bisect_last_failing`` (the one
  interval search, interval.py); delta debugging over it is ddmin.py, its fixed point
  fixpoint.py.

Learnt from shrinkray's ReductionProblem (the format is the problem's parameter, not a
copy of the machinery) and Hypothesis's shrinker (the cache is consulted before every
call; ``find_integer`` is interval.py's).

Pure: no torch, nothing of tcompile; no format is imported here (tests/unit/test_layers.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

from .gate import Gate, Stop
from .interval import first_failing_tree, gallop, narrow, next_round_points
from .verdict import Verdict

__all__ = ["Candidate", "Format", "Problem", "Stopped"]

C = TypeVar("C")


class Stopped(Exception):
    """The limits were reached (calls, deadline, the job's stop) mid-search."""


class Format(Protocol[C]):
    """What a case type tells the problem."""

    def key(self, case: C) -> str | None:
        """The verdict cache's key (None: never cached)."""

    def size(self, case: C) -> Any:
        """Comparable; smaller is better."""

    def admit(self, raw: Any, best: C, grow: bool) -> C | None:
        """The candidate a pass proposed (``raw``), as a case worth judging against the
        best so far, or None: not smaller (unless ``grow``: an enabling step), or not a
        well-formed case."""
        ...

    def prepare(self, case: C) -> None:
        """Build what judging it needs, here (a worker thread would fight for the GIL)."""
        ...

    def oracle_input(self, case: C) -> Any:
        """What the oracle is handed (a graph's: its own copies of the inputs)."""
        ...

    def step(self, pass_name: str, what: str, before: C, after: C, calls: int) -> Any:
        """One history entry for a step taken."""
        ...


@dataclasses.dataclass
class Candidate:
    """A candidate with what the pass says of it: ``make`` is the case, or a
    zero-argument builder of it (None or an exception: it cannot be built -- a
    proposal, never a reason for the search to fail); ``grow``: an enabling step
    (inlining, unrolling) that may make the case larger; ``index``: its place in the
    pass's own order (where the pass resumes)."""

    make: Any
    what: str = ""
    grow: bool = False
    index: int = 0


Item = Any  # a case, None, a builder, or a Candidate
Pass = Callable[["Problem[Any]", Any], Any]  # (problem, best) -> a smaller case or None


class Problem(Generic[C]):
    """One search: the best case so far and the single gate every candidate passes
    through (a candidate that is not admitted, or was judged before, never reaches the
    oracle)."""

    def __init__(
        self,
        fmt: Format[C],
        start: C,
        oracle: Callable[[Any], Any],
        *,
        jobs: int = 1,
        limits: Stop | Callable[[], bool] | None = None,
        max_calls: int | None = None,
        on_error: Verdict = Verdict.INVALID,
        reraise: tuple[type[BaseException], ...] = (TypeError,),
        on_best: Callable[[C], None] | None = None,
        recheck: bool = False,
    ) -> None:
        self.fmt = fmt
        self.best = start
        self.smallest = start  # the smallest case taken (growth steps are taken back to it)
        self.smallest_seen = start  # the smallest judged failing (survives an interruption)
        self.jobs = max(1, int(jobs))
        self.max_calls = max_calls
        self.recheck = recheck
        self.gate = Gate(
            lambda case: oracle(fmt.oracle_input(case)),
            limits=limits,
            jobs=self.jobs,
            on_error=on_error,
            reraise=reraise,
            on_best=on_best,
        )
        self.history: list[Any] = []
        self.last: Candidate | None = None  # the candidate taken last (its what, its index)
        self.pause_at: int | None = None  # a pass stops proposing at this many calls
        self.allowed: Callable[[Candidate], bool] = lambda c: True  # growth's bans
        self.resume_from: int | None = None  # where a resumable pass starts this time
        self.take_back = True  # False: every step taken is the smallest (no growth kept back)
        self.broken: set[str] = set()  # passes that raised (isolated)
        self.resume: dict[str, int] = {}
        self.resumable: set[str] = set()
        self.wall: dict[str, dict[str, float]] = {}  # per pass: calls ("runs") and seconds
        self._rechecks: dict[str, Any] = {}  # key -> future of a second, independent run
        self._sanity_case: C | None = None
        self._sanity_done: set[Any] = set()
        self._pool = ThreadPoolExecutor(self.jobs) if self.jobs > 1 else None

    # ---- the gate --------------------------------------------------------------
    @property
    def calls(self) -> int:
        return self.gate.calls

    @property
    def cache(self) -> dict[str, Verdict]:
        return self.gate.cache

    @property
    def cache_hits(self) -> int:
        return self.gate.cache_hits

    @property
    def pass_name(self) -> str:
        return self.gate.pass_name

    @pass_name.setter
    def pass_name(self, name: str) -> None:
        self.gate.pass_name = name

    def exhausted(self) -> bool:
        if self.max_calls is not None and self.calls >= self.max_calls:
            return True
        return self.gate.exhausted()

    def smaller(self, a: C, b: C) -> bool:
        return self.fmt.size(a) < self.fmt.size(b)

    def _admit(self, item: Item) -> tuple[C | None, Candidate]:
        cand = item if isinstance(item, Candidate) else Candidate(item)
        raw = _build(cand.make)
        if raw is None:
            return None, cand
        try:
            return self.fmt.admit(raw, self.best, cand.grow), cand
        except Exception:  # a proposal the format cannot read: not judged
            return None, cand

    def _call(self, case: C) -> Verdict:
        return self.gate.call(case)

    # ---- judging ---------------------------------------------------------------
    def evaluate(self, cases: Sequence[Item], admitted: bool = False) -> list[bool]:
        """Judge candidates (concurrently when jobs > 1); True where the same failure
        shows.  ``admitted``: cases the format admitted already (not asked again)."""
        return [get() for get in self.submit(cases, admitted=admitted)]

    def submit(
        self,
        cases: Sequence[Item],
        while_waiting: Callable[[], None] | None = None,
        admitted: bool = False,
    ) -> list[Callable[[], bool]]:
        """Start judging candidates; one result getter per candidate (blocking on that
        one alone).  With a pool each is handed to a worker as soon as it is built, so
        building the next overlaps with judging this one; ``while_waiting`` runs once
        everything is submitted, while the workers are busy."""
        getters: list[Callable[[], bool]] = []
        pending: dict[Any, tuple[Any, C]] = {}
        sanity = self._take_sanity()
        for item in cases:
            c = item if admitted else self._admit(item)[0]
            if c is None:
                getters.append(_const(False))
                continue
            key = self.fmt.key(c)
            if key is not None and (known := self.gate.known(key)) is not None:
                getters.append(_const(known is Verdict.SAME_FAILURE))
                continue
            slot = key if key is not None else id(c)
            if slot not in pending:
                if self.exhausted():
                    raise Stopped
                if self._pool is not None:
                    self.fmt.prepare(c)
                    job: Any = self._pool.submit(self._call, c)
                else:
                    job = _Done(self._call(c))
                pending[slot] = (job, c)
                self.gate.count()
            getters.append(self._getter(key, pending[slot][0], sanity, c))
        busy = len(pending) + (1 if sanity is not None else 0)
        if self.recheck and self._pool is not None and pending and busy < self.jobs:
            smallest = min((entry[1] for entry in pending.values()), key=self.fmt.size)
            key = self.fmt.key(smallest)
            if key is not None and key not in self._rechecks:
                self._rechecks[key] = self._pool.submit(self._call, smallest)
                self.gate.count()
        if pending:
            if while_waiting is not None and self._pool is not None:
                while_waiting()
            self.progress()
        elif sanity is not None:
            self._check_sanity(sanity.result())
        return getters

    def _getter(self, key: str | None, job: Any, sanity: Any, case: C) -> Callable[[], bool]:
        def get() -> bool:
            if sanity is not None and key not in self._sanity_done:
                self._sanity_done.add(key)
                self._check_sanity(sanity.result())
            v = job.result()
            if key is not None:
                self.cache[key] = v
            if v is Verdict.SAME_FAILURE and self.smaller(case, self.smallest_seen):
                self.smallest_seen = case  # survives an interruption mid-pass
            return v is Verdict.SAME_FAILURE

        return get

    def first_failing(self, candidates: Iterable[Item]) -> C | None:
        """The first candidate, in order, that is admitted and fails the same way, as a
        sequential scan would find it, judging up to ``jobs`` admitted, new candidates
        at a time.  ``candidates`` may be lazy (a pass's proposals); it stops being
        read at ``pause_at`` calls.  ``last`` is then the candidate taken."""
        it = iter(candidates)
        while True:
            batch: list[tuple[C, Candidate]] = []
            keys: set[Any] = set()
            room = self.jobs
            if self.max_calls is not None:
                room = max(1, min(room, self.max_calls - self.calls))
            for item in it:
                if self.exhausted():
                    raise Stopped  # the limits: the search ends here (the caller keeps its best)
                if self.pause_at is not None and self.calls >= self.pause_at:
                    break
                cand = item if isinstance(item, Candidate) else Candidate(item)
                if not self.allowed(cand):
                    continue
                c, cand = self._admit(cand)
                if c is None:
                    continue
                key = self.fmt.key(c)
                if key is not None and key in keys:
                    continue
                if key is not None and (known := self.gate.known(key)) is not None:
                    if known is Verdict.SAME_FAILURE and not batch:
                        return self._taken(c, cand)
                    continue
                batch.append((c, cand))
                if key is not None:
                    keys.add(key)
                if len(batch) >= room:
                    break
            if not batch:
                return None
            for (c, cand), ok in zip(batch, self.evaluate([c for c, _ in batch], admitted=True)):
                if ok:
                    return self._taken(c, cand)

    def _taken(self, case: C, cand: Candidate) -> C:
        self.last = cand
        return case

    def try_one(self, case: Item, name: str) -> C | None:
        self.pass_name = name
        return self.first_failing([case])

    # ---- the one interval search, speculative (interval.py) -----------------------
    def _bisect(self, lo: int, hi: int, make: Callable[[int], C | None]) -> int:
        """The first failing k in (lo, hi], ``lo`` known passing and ``hi`` known
        failing.  With jobs > 1 the midpoints of the next levels are judged together,
        and while they run the first midpoint of every possible next round is built.
        The path taken is always the sequential one."""
        built: dict[int, C | None] = {}

        def get(k: int) -> C | None:
            if k not in built:
                built[k] = _build(lambda: make(k))
            return built[k]

        def prebuild(a: int, b: int) -> Callable[[], None]:
            def run() -> None:
                for m in next_round_points(a, b, self._depth()):
                    c, _ = self._admit(get(m))
                    if c is not None and self.fmt.key(c) not in self.cache:
                        self.fmt.prepare(c)

            return run

        def submit(pts: list[int], bounds: tuple[int, int]) -> list[Callable[[], bool]]:
            return self.submit([(lambda p=p: get(p)) for p in pts], while_waiting=prebuild(*bounds))

        return first_failing_tree(lo, hi, submit, depth=self._depth())

    def _depth(self) -> int:
        return max(1, (self.jobs + 1).bit_length() - 1)  # 2**depth - 1 <= jobs

    def bisect_first_failing(
        self,
        lo: int,
        hi: int,
        make: Callable[[int], C | None],
        name: str,
        guesses: Iterable[int] = (),
    ) -> int | None:
        """Smallest k in [lo, hi) whose candidate fails, assuming failure is monotone
        (fails at k => fails at k+1) and that k = hi (the current case) fails.
        ``guesses`` are asked first, one at a time (interval.narrow), then the rest is
        bisected."""
        self.pass_name = name
        a, b = narrow(lo - 1, hi, lambda k: self.evaluate([lambda: make(k)])[0], guesses)
        first = self._bisect(a, b, make)
        return first if first < hi else None

    def bisect_last_failing(
        self, lo: int, hi: int, make: Callable[[int], C | None], name: str
    ) -> int | None:
        """Largest k in [lo, hi] whose candidate fails, assuming fails at k => fails
        below k, and that k = lo - 1 (the current case) fails: galloping from the top
        (k = hi, hi-1, hi-3, ...) then bisecting the last gap, O(log distance)."""
        self.pass_name = name
        top = hi - lo + 1
        below, first = gallop(
            top,
            lambda js: self.evaluate([(lambda j=j: make(hi - j)) for j in js]),
            width=min(self.jobs, 2),
        )
        first = self._bisect(below, first, lambda jj: make(hi - jj))
        return hi - first if first < top else None

    # ---- taking a step -----------------------------------------------------------
    def accept(self, case: C, what: str | None = None) -> None:
        """``case`` is the best now; the checkpoint hook runs when it is the smallest
        taken so far (a growth step is not checkpointed until it pays off)."""
        before = self.best
        self.best = case
        self.gate.taken()
        if what is None:
            what = self.last.what if self.last is not None else ""
        self.history.append(self.fmt.step(self.pass_name, what, before, case, self.calls))
        if not self.take_back or not self.smaller(self.smallest, case):
            self.smallest = case
            self.gate.best(case)
        self.progress()

    def progress(self) -> None:
        """A hook: the search moved (a subclass reports it)."""

    # ---- the start fails? (sanity) -------------------------------------------------
    def sanity_check(self, start: C, overlap: bool) -> None:
        """Does the start fail?  Alone with jobs=1; alongside the first batch of
        candidates with jobs > 1 (``overlap``), saving a round trip."""
        self._sanity_case = start
        if not overlap or self._pool is None:
            sanity = self._take_sanity()
            self._check_sanity(sanity.result())

    def finish_sanity(self) -> None:
        sanity = self._take_sanity()
        if sanity is not None:
            self._check_sanity(sanity.result())

    def _take_sanity(self) -> Any:
        case, self._sanity_case = self._sanity_case, None
        if case is None:
            return None
        self.gate.count()
        if self._pool is not None:
            return self._pool.submit(self._call, case)
        return _Done(self._call(case))

    def _check_sanity(self, verdict: Verdict) -> None:
        key = self.fmt.key(self.best)
        if key is not None:
            self.cache[key] = verdict
        if verdict is not Verdict.SAME_FAILURE:
            self.start_does_not_fail(verdict)

    def start_does_not_fail(self, verdict: Verdict) -> None:
        raise ValueError(f"the start does not fail (oracle said {verdict.value})")

    def final_check(self, case: C) -> Verdict:
        """Judge ``case`` once more, past the cache (or use a re-test already made)."""
        self.pass_name = "final check"
        early = self._rechecks.get(self.fmt.key(case))
        if early is not None:
            return early.result()
        self.gate.count()
        return self._call(case)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _const(value: bool) -> Callable[[], bool]:
    return lambda: value


def _build(item: Any) -> Any:
    """A candidate, or None when it cannot be built (its eager values cannot be
    computed, say): a pass's proposal, never a reason for the search to fail."""
    if not callable(item):
        return item
    try:
        return item()
    except Exception:
        return None


class _Done:
    def __init__(self, value: Verdict) -> None:
        self.value = value

    def result(self) -> Verdict:
        return self.value

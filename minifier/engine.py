"""The search engine: one problem object, one gate, a schedule of passes.

:class:`Problem` holds the best failing case so far and is the single gate every
candidate passes through: a candidate that is not smaller than the best, or whose
canonical key was tested before, never reaches the oracle.  Passes ask it to test
candidates one at a time, in a binary search, or in ddmin order; with ``jobs > 1``
it evaluates candidates concurrently but *decides* exactly as the sequential search
would (speculative evaluation of the same decision tree), so the answer never
depends on ``jobs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .gate import Gate, Stop
from .graph import Case, own_copy
from .interval import first_failing_tree, gallop, next_round_points
from .verdict import Verdict

__all__ = ["Gate", "MinifyError", "MinifyResult", "Problem", "Progress", "Step", "Stop"]


class MinifyError(Exception):
    """The search cannot start (the starting graph does not fail) or went wrong;
    ``verdict``: what the oracle said of the starting graph, when that is the reason."""

    def __init__(self, message: str, verdict: Verdict | None = None) -> None:
        super().__init__(message)
        self.verdict = verdict


class Stopped(Exception):
    pass


@dataclasses.dataclass
class Progress:
    nodes: int
    calls: int
    pass_name: str
    best_nodes: int


@dataclasses.dataclass
class Step:
    pass_name: str
    nodes_before: int
    nodes_after: int
    calls: int


@dataclasses.dataclass
class MinifyResult:
    gm: Any
    inputs: list[Any]
    calls: int
    history: list[Step]
    nodes_before: int
    nodes_after: int
    cache_hits: int
    seconds: float
    stopped: bool = False
    verified: bool = True
    final_verdict: Verdict = Verdict.SAME_FAILURE
    # per pass: oracle calls, candidates kept, seconds (the gate's statistics)
    passes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


Oracle = Callable[[Any, list[Any]], Any]


class Problem:
    def __init__(
        self,
        start: Case,
        oracle: Oracle,
        *,
        jobs: int = 1,
        stop: Stop | Callable[[], bool] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        checkpoint: Callable[[Case, list[Step], int], None] | None = None,
    ) -> None:
        self.best = start
        self.smallest_seen = start
        self.jobs = max(1, int(jobs))
        self.on_progress = on_progress
        self.checkpoint = checkpoint
        # the one gate (minifier/gate.py): limits, the verdict cache, calls, statistics;
        # oracles may mutate their inputs: each call gets its own copies
        self.gate = Gate(
            lambda c: oracle(c.gm, [own_copy(x) for x in c.inputs]),
            limits=stop,
            jobs=self.jobs,
            on_best=None if checkpoint is None else self._checkpoint,
        )
        self._rechecks: dict[str, Any] = {}  # key -> future of a second, independent run
        self._sanity_done: set[str] = set()
        self.history: list[Step] = []
        self._pool = ThreadPoolExecutor(self.jobs) if self.jobs > 1 else None

    # ---- the gate (the format's part: smaller than the best) -------------------
    @property
    def cache(self) -> dict[str, Verdict]:
        return self.gate.cache

    @property
    def calls(self) -> int:
        return self.gate.calls

    @property
    def cache_hits(self) -> int:
        return self.gate.cache_hits

    @property
    def pass_name(self) -> str:
        return self.gate.pass_name

    @pass_name.setter
    def pass_name(self, name: str) -> None:
        self.gate.pass_name = name

    def _admissible(self, case: Case | None) -> bool:
        return case is not None and case.order_key() < self.best.order_key()

    def _should_stop(self) -> bool:
        return self.gate.exhausted()

    def _call_oracle(self, case: Case) -> Verdict:
        return self.gate.call(case)

    def evaluate(self, cases: Sequence[Case | None | Callable[[], Case | None]]) -> list[bool]:
        """Test cases (concurrently when jobs > 1); True where the same failure shows."""
        return [get() for get in self.submit(cases)]

    def submit(
        self,
        cases: Sequence[Case | None | Callable[[], Case | None]],
        while_waiting: Callable[[], None] | None = None,
    ) -> list[Callable[[], bool]]:
        """Start testing cases; return one result getter per case (blocking on that
        case alone).

        Items may be cases or zero-argument builders: with a pool, each candidate is
        handed to a worker as soon as it is built, so building the next one overlaps
        with testing this one.  A worker left idle by a batch re-tests the batch's
        smallest candidate: if that one ends up the answer, its second run is the
        final check, and the search saves a round trip.  ``while_waiting`` runs once
        everything is submitted, while the workers are busy.
        """
        getters: list[Callable[[], bool]] = []
        pending: dict[str, tuple[Any, Case]] = {}
        sanity = self._take_sanity()
        for item in cases:
            c = _build(item)
            if not self._admissible(c):
                getters.append(_const(False))
                continue
            assert c is not None
            if (known := self.gate.known(c.key)) is not None:
                getters.append(_const(known is Verdict.SAME_FAILURE))
                continue
            if c.key not in pending:
                if self._should_stop():
                    raise Stopped
                if self._pool is not None:
                    c.gm  # noqa: B018  generate its code here: a worker would fight for the GIL
                    job: Any = self._pool.submit(self._call_oracle, c)
                else:
                    job = _Done(self._call_oracle(c))
                pending[c.key] = (job, c)
                self.gate.count()
            getters.append(self._getter(c.key, pending[c.key][0], sanity, c))
        busy = len(pending) + (1 if sanity is not None else 0)
        if self._pool is not None and pending and busy < self.jobs:
            smallest = min((entry[1] for entry in pending.values()), key=lambda c: c.order_key())
            if smallest.key not in self._rechecks:
                self._rechecks[smallest.key] = self._pool.submit(self._call_oracle, smallest)
                self.gate.count()
        if pending:
            if while_waiting is not None and self._pool is not None:
                while_waiting()  # the workers are busy: prepare what comes next
            self._progress()
        elif sanity is not None:
            self._check_sanity(sanity.result())
        return getters

    def _getter(self, key: str, job: Any, sanity: Any, case: Case) -> Callable[[], bool]:
        def get() -> bool:
            if sanity is not None and key not in self._sanity_done:
                self._sanity_done.add(key)
                self._check_sanity(sanity.result())
            v = job.result()
            self.cache[key] = v
            if v is Verdict.SAME_FAILURE and case.order_key() < self.smallest_seen.order_key():
                self.smallest_seen = case  # survives an interruption mid-pass
            return v is Verdict.SAME_FAILURE

        return get

    def final_check(self, case: Case) -> Verdict:
        """Test ``case`` once more, past the cache (or use a re-test already made)."""
        self.pass_name = "final check"
        early = self._rechecks.get(case.key)
        if early is not None:
            return early.result()
        self.gate.count()
        return self._call_oracle(case)

    # The sanity check (does the start fail?) runs alone with jobs=1, and alongside
    # the first batch of candidates with jobs > 1, saving a round trip.
    _sanity_case: Case | None = None

    def _take_sanity(self) -> Any:
        case, self._sanity_case = self._sanity_case, None
        if case is None:
            return None
        self.gate.count()
        if self._pool is not None:
            return self._pool.submit(self._call_oracle, case)
        return _Done(self._call_oracle(case))

    def _check_sanity(self, verdict: Verdict) -> None:
        self.cache[self.best.key] = verdict
        if verdict is not Verdict.SAME_FAILURE:
            raise MinifyError(
                f"the starting graph does not fail (oracle said {verdict.value}); nothing to minify",
                verdict,
            )

    def sanity_check(self, start: Case, overlap: bool) -> None:
        self._sanity_case = start
        if not overlap or self._pool is None:
            sanity = self._take_sanity()
            self._check_sanity(sanity.result())

    def finish_sanity(self) -> None:
        sanity = self._take_sanity()
        if sanity is not None:
            self._check_sanity(sanity.result())

    def accept(self, case: Case) -> None:
        before = self.best.size
        self.best = case
        self.gate.taken()
        self.history.append(Step(self.pass_name, before, case.size, self.calls))
        self.gate.best(case)
        self._progress()

    def _checkpoint(self, case: Case) -> None:
        assert self.checkpoint is not None
        self.checkpoint(case, self.history, self.calls)

    def _progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(self.best.size, self.calls, self.pass_name, self.best.size))

    # ---- search primitives used by passes -----------------------------------
    def try_one(self, case: Case | None, name: str) -> Case | None:
        self.pass_name = name
        if case is not None and self.evaluate([case])[0]:
            return case
        return None

    def first_failing(self, candidates: Sequence[Callable[[], Case | None]]) -> Case | None:
        """The first candidate, in order, that fails: as a sequential scan would find,
        evaluating up to ``jobs`` of them at a time."""
        for start in range(0, len(candidates), self.jobs):
            batch = [_build(make) for make in candidates[start : start + self.jobs]]
            results = self.evaluate(batch)
            for c, ok in zip(batch, results):
                if ok:
                    return c
        return None

    def _bisect(self, lo: int, hi: int, make: Callable[[int], Case | None]) -> int:
        """The first failing k in (lo, hi], ``lo`` known passing and ``hi`` known
        failing: the one interval search's speculative form (minifier/interval.py).

        With jobs > 1 the midpoints of the next levels are evaluated together, and
        while they run the first midpoint of every possible next round is built, so a
        round's first candidate is ready the moment the round starts.  The path taken
        is always the sequential one."""
        built: dict[int, Case | None] = {}

        def get(k: int) -> Case | None:
            if k not in built:
                built[k] = _build(lambda: make(k))
            return built[k]

        def prebuild(a: int, b: int) -> Callable[[], None]:
            def run() -> None:
                for m in next_round_points(a, b, self._depth()):
                    c = get(m)
                    if c is not None and self._admissible(c) and c.key not in self.cache:
                        c.gm  # noqa: B018  (generate the code now, off the critical path)

            return run

        def submit(pts: list[int], bounds: tuple[int, int]) -> list[Callable[[], bool]]:
            return self.submit([(lambda p=p: get(p)) for p in pts], while_waiting=prebuild(*bounds))

        return first_failing_tree(lo, hi, submit, depth=self._depth())

    def _depth(self) -> int:
        return max(1, (self.jobs + 1).bit_length() - 1)  # 2**depth - 1 <= jobs

    def bisect_first_failing(
        self, lo: int, hi: int, make: Callable[[int], Case | None], name: str
    ) -> int | None:
        """Smallest k in [lo, hi) whose candidate fails, assuming failure is monotone
        (fails at k => fails at k+1) and that k = hi (the current case) fails."""
        self.pass_name = name
        first = self._bisect(lo - 1, hi, make)
        return first if first < hi else None

    def bisect_last_failing(
        self, lo: int, hi: int, make: Callable[[int], Case | None], name: str
    ) -> int | None:
        """Largest k in [lo, hi] whose candidate fails, assuming fails at k => fails
        below k, and that k = lo - 1 (the current case) fails.

        Galloping from the top (k = hi, hi-1, hi-3, hi-7, ...) then bisecting the last
        gap: when the answer is near ``hi`` (after truncate_suffix the culprit is the
        last node) this costs O(log distance) calls, not O(log n)."""
        self.pass_name = name
        # mirror j = hi - k: the first failing j is the last failing k; j = top is
        # k = lo - 1, the current case.  The galloping probes of a round are evaluated
        # together: the first usually decides, more than two a round is mostly waste
        top = hi - lo + 1
        below, first = gallop(
            top,
            lambda js: self.evaluate([(lambda j=j: make(hi - j)) for j in js]),
            width=min(self.jobs, 2),
        )
        first = self._bisect(below, first, lambda jj: make(hi - jj))
        return hi - first if first < top else None

    def ddmin(
        self,
        case: Case,
        items: Callable[[Case], list[str]],
        without: Callable[[Case, list[str]], Case | None],
        name: str,
    ) -> Case | None:
        """Delta debugging: remove chunks of items while the failure stays."""
        self.pass_name = name
        best: Case | None = None
        current = case
        n = 2
        while True:
            names = items(current)
            if len(names) < 2:
                break
            n = min(n, len(names))
            chunks = _split(names, n)
            # subsets first (keep one chunk), then complements (remove one chunk)
            subset_cands = [
                (lambda ch=ch, cur=current, ns=names: without(cur, [x for x in ns if x not in ch]))
                for ch in chunks
            ]
            found = self.first_failing(subset_cands)
            if found is not None:
                current = best = found
                self.accept(found)
                n = 2
                continue
            if n > 2:
                comp = [(lambda ch=ch, cur=current: without(cur, ch)) for ch in chunks]
                found = self.first_failing(comp)
                if found is not None:
                    current = best = found
                    self.accept(found)
                    n = max(n - 1, 2)
                    continue
            if n >= len(names):
                break
            n = min(2 * n, len(names))
        return best

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _const(value: bool) -> Callable[[], bool]:
    return lambda: value


def _build(item: Case | None | Callable[[], Case | None]) -> Case | None:
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


def _split(items: list[str], n: int) -> list[list[str]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        if end > start:
            out.append(items[start:end])
        start = end
    return out

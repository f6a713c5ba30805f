"""The one interval search: where a monotone predicate over integers turns true.

Every boundary tcompile looks for is one question -- the first k in (lo, hi] at which a
failure shows, ``lo`` known passing and ``hi`` known failing, assuming "fails at k"
implies "fails at k + 1":

* bisect: the first of N toggles and pass applications that, enabled, makes the
  failure show (``first_failing``, several points a round with ``width``; the guided
  bisect's guesses at the culprit op's applications are its first points);
* the minifier's passes: the shortest prefix that still fails (``first_failing_tree``,
  the engine's speculative form: the sequential path, the next levels' midpoints
  evaluated while waiting; where a pass already found the end, ``narrow`` asks it
  first), the last cut that still fails (``gallop`` then the same);
* the numerics search: the first node whose prefix is wrong;
* input shrinking: how many times a size can be halved with the failure still showing
  (``find_integer``: an exponential probe, then binary search).

The forms differ only in how points are evaluated (one at a time, a batch, started
and awaited); the interval arithmetic is here once.  Pure: no torch, nothing of
tcompile.  Hypothesis's shrinker (``find_integer``) is the model for the probe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

Batch = Callable[[list[int]], list[bool]]  # points evaluated together: does each fail?
# points started (with the interval they split); each answer awaited when needed
Submit = Callable[[list[int], tuple[int, int]], list[Callable[[], bool]]]


def first_failing(
    lo: int,
    hi: int,
    fails: Batch,
    *,
    width: int = 1,
    guesses: Iterable[int] = (),
    track: dict[str, int] | None = None,
) -> int:
    """The smallest k in (lo, hi] that fails, ``hi`` known failing and ``lo`` known
    passing (or one below the lowest point: unknown, nothing below).

    ``guesses`` are asked first, one at a time: the lowest inside the interval, then
    the middle one of those left inside (a guess c given as c and c + 1 pins the answer
    in two asks when right, and halves the interval at c when wrong).  Then rounds of up
    to ``width`` points splitting the interval evenly, evaluated together (the binary
    search's answer when the predicate is monotone).  ``track`` holds the narrowest
    (lo, hi) so far, for a search that is interrupted."""
    track = {} if track is None else track
    lo, hi = narrow(lo, hi, lambda p: fails([p])[0], guesses, track)
    while lo + 1 < hi:
        track.update(lo=lo, hi=hi)
        n = min(max(1, width), hi - lo - 1)
        pts = sorted({lo + (hi - lo) * (i + 1) // (n + 1) for i in range(n)} - {lo, hi})
        results = fails(pts)
        first_fail = next((p for p, r in zip(pts, results) if r), hi)
        passed = [p for p, r in zip(pts, results) if not r and p < first_fail]
        lo = max([lo, *passed])
        hi = first_fail
    track.update(lo=lo, hi=hi)
    return hi


def narrow(
    lo: int,
    hi: int,
    fails: Callable[[int], bool],
    guesses: Iterable[int],
    track: dict[str, int] | None = None,
) -> tuple[int, int]:
    """(lo, hi) narrowed by asking ``guesses`` one at a time: the lowest inside the
    interval first, then the middle one of those left inside -- the guess phase of
    ``first_failing``, for a search whose rounds are another form's."""
    track = {} if track is None else track
    points = sorted(set(guesses))
    first = True
    while True:
        inside = [p for p in points if lo < p < hi]
        if not inside:
            return lo, hi
        p = inside[0] if first else inside[(len(inside) - 1) // 2]
        first = False
        track.update(lo=lo, hi=hi)
        if fails(p):
            hi = p
        else:
            lo = p


def first_failing_tree(lo: int, hi: int, submit: Submit, *, depth: int = 1) -> int:
    """``first_failing`` along the sequential binary path, for an evaluator that starts
    points and answers them later: each round starts the midpoints of the next
    ``depth`` levels under (lo, hi) (``submit(points, (lo, hi))``) and waits only for
    the one it needs; a started point on the branch not taken finishes in the
    background.  The answer and the path are the sequential search's."""
    pending: dict[int, Callable[[], bool]] = {}
    while lo + 1 < hi:
        m = (lo + hi) // 2
        if m not in pending:
            pts = [p for p in tree_points(lo, hi, depth) if p not in pending]
            pending.update(zip(pts, submit(pts, (lo, hi))))
        if pending[m]():
            hi = m
        else:
            lo = m
    return hi


def tree_points(lo: int, hi: int, depth: int) -> list[int]:
    """The midpoints of the binary search's next ``depth`` levels between lo and hi,
    level by level (the first is the midpoint itself)."""
    points, intervals = [], [(lo, hi)]
    for _ in range(max(1, depth)):
        nxt = []
        for a, b in intervals:
            if a + 1 < b:
                m = (a + b) // 2
                points.append(m)
                nxt += [(a, m), (m, b)]
        intervals = nxt
    return points


def next_round_points(lo: int, hi: int, depth: int) -> list[int]:
    """The first point of every round the search can reach after ``depth`` more steps
    from (lo, hi): what to prepare while this round runs."""
    intervals = [(lo, hi)]
    for _ in range(depth):
        nxt = []
        for a, b in intervals:
            if a + 1 < b:
                m = (a + b) // 2
                nxt += [(a, m), (m, b)]
            else:
                nxt.append((a, b))
        intervals = nxt
    return [(a + b) // 2 for a, b in intervals if a + 1 < b]


def gallop(top: int, fails: Batch, *, width: int = 1, below: int = -1) -> tuple[int, int]:
    """An exponential probe up from ``below`` (known passing) towards ``top`` (known
    failing): points below + 1, + 3, + 7, ..., up to ``width`` a round.  Returns (lo, hi):
    the largest probe that passed and the first that failed (``top`` when none did),
    the interval ``first_failing`` finishes -- O(log distance) asks when the answer is
    near ``below``, not O(log top)."""
    step = 1
    while True:
        probes: list[int] = []
        j, s = below, step
        while len(probes) < max(1, width) and j + s < top:
            j += s
            probes.append(j)
            s *= 2
        if not probes:
            return below, top
        results = fails(probes)
        failing = [p for p, r in zip(probes, results) if r]
        if failing:
            first_fail = failing[0]
            passed = [p for p, r in zip(probes, results) if not r and p < first_fail]
            return max([below, *passed]), first_fail
        below = probes[-1]
        step = s


def find_integer(holds: Callable[[int], bool], limit: int) -> int:
    """The largest n in [0, limit] with ``holds(n)`` (``holds(0)`` assumed, never
    asked), by an exponential probe then binary search, each n asked at most once:
    Hypothesis's ``find_integer``, the shape of "how far can this step go" (input
    shrinking's halvings).  Assumes holds(n) implies holds(m) for m < n."""
    if limit <= 0:
        return 0

    def fails(pts: list[int]) -> list[bool]:
        return [not holds(p) for p in pts]

    lo, hi = gallop(limit + 1, fails, below=0)
    return first_failing(lo, hi, fails) - 1

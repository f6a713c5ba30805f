"""The one interval search (minifier/interval.py), on pure predicates: every form finds
the threshold of any monotone predicate, asks each point at most once, and stays
within the binary search's number of asks."""

import math

from hypothesis import given
from hypothesis import strategies as st

from tcompile.minifier.interval import (
    find_integer,
    first_failing,
    first_failing_tree,
    gallop,
    narrow,
    next_round_points,
    tree_points,
)


def _threshold(t: int):
    asked: list[int] = []

    def fails(pts):
        asked.extend(pts)
        return [p >= t for p in pts]

    return fails, asked


@given(st.integers(0, 200), st.integers(0, 200), st.integers(1, 8), st.lists(st.integers(0, 210)))
def test_first_failing_finds_the_threshold(n, t, width, guesses):
    t = min(t, n)  # hi = n is known failing
    fails, asked = _threshold(t)
    track: dict[str, int] = {}
    assert first_failing(-1, n, fails, width=width, guesses=guesses, track=track) == t
    assert all(-1 < p < n for p in asked) and len(asked) == len(set(asked))
    assert track["hi"] == t and track["lo"] == t - 1 or t == 0


@given(st.integers(1, 500), st.integers(0, 500))
def test_one_point_a_round_is_binary_search(n, t):
    t = min(t, n)
    fails, asked = _threshold(t)
    first_failing(-1, n, fails)
    assert len(asked) <= math.ceil(math.log2(n + 1))


def test_a_right_guess_takes_two_asks():
    fails, asked = _threshold(37)
    assert first_failing(-1, 1000, fails, guesses=[36, 37]) == 37
    assert asked == [36, 37]


@given(st.integers(0, 300), st.integers(0, 300), st.integers(1, 4))
def test_the_tree_form_takes_the_sequential_path(n, t, depth):
    t = min(t, n)
    seq, seq_asked = _threshold(t)
    first_failing(-1, n, seq)
    started: list[int] = []
    awaited: list[int] = []

    def submit(pts, bounds):
        lo, hi = bounds
        assert all(lo < p < hi for p in pts) and pts[0] == (lo + hi) // 2
        started.extend(pts)
        return [(lambda p=p: awaited.append(p) or p >= t) for p in pts]

    assert first_failing_tree(-1, n, submit, depth=depth) == t
    assert awaited == seq_asked  # the decisions are the sequential search's
    assert len(started) == len(set(started))
    assert len(started) <= len(seq_asked) * (2**depth - 1)


@given(st.integers(0, 200), st.integers(0, 200), st.lists(st.integers(-5, 210)))
def test_narrow_brackets_the_threshold(n, t, guesses):
    """The guess phase alone (a pass's earlier answer asked before the tree form)."""
    t = min(t, n)
    fails, asked = _threshold(t)
    lo, hi = narrow(-1, n, lambda p: fails([p])[0], guesses)
    assert lo < t <= hi and -1 <= lo and hi <= n
    assert set(asked) <= set(guesses) and len(asked) == len(set(asked))


def test_narrow_confirms_a_known_end_in_one_ask():
    fails, asked = _threshold(40)
    assert narrow(-1, 40, lambda p: fails([p])[0], [39]) == (39, 40)
    assert asked == [39]


def test_tree_points_and_next_rounds():
    assert tree_points(-1, 16, 1) == [7]
    assert tree_points(-1, 16, 2) == [7, 3, 11]
    assert next_round_points(-1, 16, 1) == [3, 11]
    assert next_round_points(5, 6, 2) == []


@given(st.integers(1, 400), st.integers(0, 400), st.integers(1, 3))
def test_gallop_brackets_the_threshold(top, t, width):
    t = min(t, top)
    fails, asked = _threshold(t)
    lo, hi = gallop(top, fails, width=width)
    assert lo < t <= hi and (hi == top or hi in asked)
    assert first_failing(lo, hi, fails) == t
    # near the start costs O(log distance), not O(log top)
    assert len(asked) <= 2 * math.ceil(math.log2(t + 2)) + 2


@given(st.integers(0, 70), st.integers(0, 64))
def test_find_integer(n, limit):
    asked: list[int] = []

    def holds(k):
        asked.append(k)
        return k <= n

    assert find_integer(holds, limit) == min(n, limit)
    assert 0 not in asked and all(k <= limit for k in asked)
    assert len(asked) == len(set(asked))
    assert len(asked) <= 2 * math.ceil(math.log2(min(n, limit) + 2)) + 2

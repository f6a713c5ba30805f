"""The one search problem (minifier/problem.py, fixpoint.py) over a format of its own:
a tuple of ints.  Nothing here is a graph or source -- the problem needs only the
format's key, size and admission (issue 36: graphs, source and inputs are formats)."""

from __future__ import annotations

import pytest

from tcompile.minifier.ddmin import ddmin
from tcompile.minifier.fixpoint import Growth, reduce
from tcompile.minifier.gate import Stop
from tcompile.minifier.problem import Candidate, Problem
from tcompile.minifier.verdict import Verdict


class Ints:
    """A case is a tuple of ints; smaller: fewer items, then a smaller sum."""

    def key(self, case):
        return repr(case)

    def size(self, case):
        return (len(case), sum(case))

    def admit(self, raw, best, grow):
        return raw if grow or self.size(raw) < self.size(best) else None

    def prepare(self, case):
        pass

    def oracle_input(self, case):
        return case

    def step(self, pass_name, what, before, after, calls):
        return (pass_name, what, len(after))


def fails(case):
    """The 'bug': a 3 and a 7 both present."""
    return Verdict.SAME_FAILURE if 3 in case and 7 in case else Verdict.PASS


START = tuple(range(12))


def drop_items(problem, best):
    return ddmin(
        problem,
        best,
        lambda c: [str(x) for x in c],
        lambda c, out: tuple(x for x in c if str(x) not in out),
        "ddmin",
    )


def lower_values(problem, best):
    """Each value as small as it can be while the failure stays (the interval search)."""
    return problem.first_failing(
        Candidate(tuple(v - 1 if j == i else v for j, v in enumerate(best)), f"lower {i}")
        for i in range(len(best))
        if best[i] not in (3, 7)
    )


@pytest.mark.parametrize("jobs", [1, 3])
def test_a_format_of_its_own_reduces_to_what_fails_whatever_jobs(jobs):
    p = Problem(Ints(), START, fails, jobs=jobs)
    try:
        stopped = reduce(p, [[drop_items, lower_values]], max_rounds=10)
    finally:
        p.close()
    assert not stopped and sorted(p.best) == [3, 7]
    assert sum(s["calls"] for s in p.gate.stats_json().values()) == p.calls
    assert p.wall["drop_items"]["runs"] + p.wall["lower_values"]["runs"] == p.calls


def test_first_failing_takes_the_first_in_order_and_the_cache_answers_repeats():
    p = Problem(Ints(), START, fails)
    cands = [START[:3], (3,), (3, 7, 8), (3, 7)]
    assert p.first_failing(cands) == (3, 7, 8) and p.calls == 3
    assert p.first_failing([(3, 7, 8)]) == (3, 7, 8) and p.calls == 3  # from the cache
    p.best = (3, 7, 8, 9)
    assert p.first_failing([(3,), (3, 7, 8)]) == (3, 7, 8) and p.calls == 3  # both cached


def test_the_limits_stop_the_search_and_it_keeps_the_smallest_seen_failing():
    p = Problem(Ints(), START, fails, limits=Stop(max_calls=8))
    assert reduce(p, [[drop_items]], max_rounds=10) is True
    assert p.calls == 8 and fails(p.best) is Verdict.SAME_FAILURE
    assert len(p.best) < len(START)


def test_a_growth_step_that_does_not_pay_off_is_taken_back():
    """A step that grows the case (an enabling step) is judged and taken; when the
    window passes with the case still larger than the smallest, the search goes back."""
    grown = (*START, 99, 98)

    def grow(problem, best):
        if best != START:
            return None
        return problem.first_failing([Candidate(grown, "grow it (2 more)", grow=True)])

    def shave(problem, best):  # proposes only cases that pass: never pays off
        return problem.first_failing(
            Candidate(tuple(x for x in best if x != v), f"drop {v}") for v in best if v in (3, 7)
        )

    p = Problem(Ints(), START, fails, max_calls=200)
    reduce(p, [[grow, shave]], max_rounds=40, growth=Growth(200))
    assert p.best == START  # back to the smallest
    assert any(str(h).startswith("back to the smallest candidate") for h in p.history)

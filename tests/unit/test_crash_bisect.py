"""Crash bisection spends repeats only where a verdict is in doubt (issue 24): the
search inside the stage on a fake program (no processes) whose crash fires on every
run, or only on some."""

import random

from tcompile.compiler.observer import NullObserver
from tcompile.compiler.probe import Bisector, items_of
from tcompile.compiler.signature import FailureSignature
from tcompile.minifier.verdict import Verdict
from tcompile.repro.jobs.bisection import _Bisection

COUNTS = {"lowerings": [f"op{i}" for i in range(40)]}
ITEMS = items_of("inductor", COUNTS)


class FakeBisector(Bisector):
    """The program crashes when lowering ``culprit`` is enabled, with probability
    ``rate`` (a fixed sequence of draws)."""

    def __init__(self, tmp_path, culprit, rate=1.0, repeat=None):
        super().__init__(
            ["prog.py"],
            accuracy="off",
            timeout=None,
            jobs=1,
            run_dir=tmp_path,
            observer=NullObserver(),
        )
        self.target = FailureSignature("inductor", "crash", "SIGSEGV", "")
        self.repeat = repeat
        self.culprit, self.rate, self.rng = culprit, rate, random.Random(0)

    def _run_once(self, label, stage, gate, bisect, attempt, tries):
        self.runs += 1
        limit = bisect["limits"].get("lowerings")
        enabled = limit is None or self.culprit < limit
        failed = enabled and self.rng.random() < self.rate
        self.steps.append({"what": label, "failed": failed})
        verdict = Verdict.SAME_FAILURE if failed else Verdict.PASS
        return verdict, {"failures": [], "graphs": [], "counts": COUNTS}


def _search(b):
    job = _Bisection(b, ["prog.py"], "off", None, None, None)
    return job.inside_stage("inductor", None, None, COUNTS)


def test_a_crash_on_every_run_costs_what_an_accuracy_bug_costs(tmp_path):
    b = FakeBisector(tmp_path, culprit=17)
    found = _search(b)
    assert found["detail"] == "op17" and found["application"] == 17
    assert not found["flaky"]
    # a binary search over 44 items (4 toggles + 40 lowerings) and one confirmation
    assert b.runs <= 7 and b.tries_for() == 1


def test_a_crash_that_misses_a_run_is_searched_again_with_repeats(tmp_path):
    # it shows in 60% of runs: a false pass sends the first search too high; the
    # confirmation sees the crash below that culprit, and the search starts again
    # trusting only failures, passes run up to 3 times
    found_right = 0
    for seed in range(12):
        b = FakeBisector(tmp_path, culprit=9, rate=0.6)
        b.rng = random.Random(seed)
        found = _search(b)
        if found["application"] == 9:
            found_right += 1
        if b.doubt:
            assert found["flaky"] and "searched again" in found["flaky_detail"]
            assert b.tries_for() == 3
    assert found_right >= 9


def test_a_stated_repeat_is_kept(tmp_path):
    b = FakeBisector(tmp_path, culprit=30, repeat=2)
    found = _search(b)
    assert found["application"] == 30 and b.tries_for() == 2
    # every passing configuration ran twice, and no confirmation run was added
    passes = [s for s in b.steps if not s["failed"]]
    fails = [s for s in b.steps if s["failed"]]
    assert len(passes) % 2 == 0 and b.runs == len(passes) + len(fails)


def test_a_configuration_asked_again_answers_what_its_run_said(tmp_path):
    """A stage asked by the confirmation run and again by the stage ladder (a captured
    graph's culprit the program did not confirm): the ladder reads the failures and
    counts of the first run, not a bare verdict (it raised KeyError 'failures')."""

    class EveryStage(FakeBisector):  # the failure shows at every stage, eager included
        def _run_once(self, label, stage, gate, bisect, attempt, tries):
            self.runs += 1
            return Verdict.SAME_FAILURE, {"failures": ["f"], "graphs": [], "counts": COUNTS}

    b = EveryStage(tmp_path, culprit=5)
    first = b.probe("stage aot_eager", stage="aot_eager")
    again = b.probe("stage aot_eager", stage="aot_eager")
    assert b.runs == 1 and again[0] is first[0] and again[1]["reused"]
    assert again[1]["counts"] == COUNTS and again[1]["failures"] == ["f"]
    job = _Bisection(b, ["prog.py"], "off", None, None, None)
    stage, target, counts = job.stage_ladder("inductor", "t", {})
    # three stages below inductor, one of them answered already
    assert b.runs == 3 and stage == "eager" and target == "f" and counts == COUNTS

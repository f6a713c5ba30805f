"""A failure that does not come back is flaky, not a compiler failure (classify.py):
what the verdict says of each run, read from a run's events and output (no compiles)."""

from tcompile.compiler.protocol import Event
from tcompile.compiler.runner import ProcessResult
from tcompile.repro.jobs.flaky import _root_cause
from tcompile.repro.jobs.flaky import flaky_outcome as _flaky

# what torchrun printed when gloo's destructor aborted rank 0 at exit (seen on CI)
TORCHRUN = """\
rank 0: loss 0.0280
terminate called without an active exception
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
fixtures/ddp_compiled_outside.py FAILED
-------------------------------------------------------
Failures:
[1]:
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 24670)  (SIGTERM)
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 24669)  (SIGABRT)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 24669
=======================================================""".splitlines()


def _result(returncode, events=(), stderr=()):
    return ProcessResult(returncode, 1.0, False, list(stderr), list(events), {}, "/nonexistent")


def test_the_root_cause_names_the_rank_and_its_signal():
    assert _root_cause(TORCHRUN) == (
        "rank 0 died of SIGABRT (terminate called without an active exception)"
    )
    assert _root_cause(["Traceback ...", "ValueError: x"]) is None
    exited = [ln.replace("-6 (pid: 24669)  (SIGABRT)", "2 (pid: 24669)") for ln in TORCHRUN]
    assert _root_cause([ln for ln in exited if "terminate" not in ln]) == "rank 0 exited with 2"


def test_at_teardown_only_when_every_rank_destroyed_its_group():
    ranks = [{"event": "graph", "rank": r, "pid": 10 + r} for r in (0, 1)]
    gone = [{"event": Event.GROUP_DESTROYED, "pid": 10 + r} for r in (0, 1)]
    passed = _result(0)
    both = _flaky(_result(1, ranks + gone, TORCHRUN), passed, passed)
    assert both["at_teardown"] and "teardown" in both["explanation"]
    assert both["first"].startswith("rank 0 died of SIGABRT")
    assert both["again"] == both["plain"] == "success (exit 0)"
    one = _flaky(_result(1, ranks + gone[:1], TORCHRUN), passed, passed)
    assert not one["at_teardown"] and "teardown" not in one["explanation"]
    alone = _flaky(_result(1), passed, passed)  # not a distributed job
    assert not alone["at_teardown"] and alone["first"] == "exit 1"
    assert "not shown to be the compiler's" in alone["explanation"]


def test_triage_calls_a_run_that_says_flaky_flaky(monkeypatch, tmp_path):
    """triage_one reads `run`'s exit 5 (it failed, then passed when the run tried it
    again) as its own 'flaky' verdict, with no second sample and no report."""
    from tcompile.repro.jobs import triage_one as t

    calls = []

    def fake(python, argv, budget, log, cwd, env):
        calls.append(argv[0])
        doc = {"exit_code": 5, "verdict": "flaky", "explanation": "failed once", "failures": []}
        return 5, doc, 1.0

    monkeypatch.setattr(t, "_tcompile", fake)
    task = {"path": str(tmp_path / "s.py"), "args": [], "work_dir": str(tmp_path / "w")}
    res = t.triage_one({**task, "timeout": 60, "repeat": 2})
    assert res.verdict == "flaky" and res.to_json()["flaky"] == {"failed": 1, "of": 2}, res
    assert calls == ["run"]

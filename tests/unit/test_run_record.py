"""A run's record read back (``report --baseline``) and triage's capture-check fields
(issue 62): pure, no compiles."""

from __future__ import annotations

import json

import pytest

from tcompile.compiler.exitcodes import UsageError
from tcompile.compiler.failure import Failure
from tcompile.compiler.signature import FailureSignature
from tcompile.repro.jobs.run_record import RunReport, given_baseline
from tcompile.repro.triage_records import Check, ScriptResult


def _report(**kw) -> RunReport:
    sig = FailureSignature("inductor", "compile", "CppCompileError", "C++ compile error")
    fields = dict(
        graphs=[{"index": 0, "device": "cpu"}],
        failures=[Failure(graph=0, graph_kind="inference", signature=sig, message="boom")],
        notes=[], exit_code=1, verdict="compiler-failure", explanation="1 failure",
        returncode=1, seconds=3.5, run_dir="/r", command=["python", "s.py"], stage=None,
        accuracy="off", captured=True, cpu_seconds=2.0,
    )  # fmt: skip
    fields.update(kw)
    return RunReport(**fields)


def test_a_runs_record_comes_back_whole():
    before = _report()
    doc = json.loads(json.dumps(before.to_json()))  # as result.json holds it
    after = RunReport.from_json(doc)
    assert after.failures[0].text == before.failures[0].text
    assert after.failures[0].graph == 0 and after.captured and after.cpu_seconds == 2.0
    assert after.to_json() == before.to_json()


def _folder(tmp_path, report: RunReport):
    (tmp_path / "result.json").write_text(json.dumps(report.to_json()))
    return str(tmp_path)


def test_a_baseline_must_be_a_capture_of_the_same_command(tmp_path):
    folder = _folder(tmp_path, _report())
    assert given_baseline(folder, ["python", "s.py"], "off").captured
    with pytest.raises(UsageError, match="not of this command"):
        given_baseline(folder, ["python", "other.py"], "off")
    with pytest.raises(UsageError, match="not of this command"):
        given_baseline(folder, ["python", "s.py"], "loose")  # another accuracy check
    (tmp_path / "plain").mkdir()
    with pytest.raises(UsageError, match="not made with --capture"):
        given_baseline(
            _folder(tmp_path / "plain", _report(captured=False)), ["python", "s.py"], "off"
        )
    (tmp_path / "staged").mkdir()
    staged = _folder(tmp_path / "staged", _report(stage="aot_eager"))
    with pytest.raises(UsageError, match="--backend aot_eager"):
        given_baseline(staged, ["python", "s.py"], "off")
    (tmp_path / "cut").mkdir()
    cut = _folder(tmp_path / "cut", _report(interrupted=True))
    with pytest.raises(UsageError, match="interrupted"):
        given_baseline(cut, ["python", "s.py"], "off")
    with pytest.raises(UsageError, match="no run's result"):
        given_baseline(str(tmp_path / "nothing"), ["python", "s.py"], "off")


def test_a_check_on_the_capture_and_why_not_are_kept():
    got = Check("lowerings:relu", off=0, on=1, passes=True, on_capture=True)
    assert Check.from_json(got.to_json()).on_capture
    fell = Check("lowerings:relu", capture_why="the captured graph does not fail alone")
    assert Check.from_json(fell.to_json()).capture_why == fell.capture_why
    assert "capture_why" not in Check("x").to_json()  # left out while unset
    r = ScriptResult(path="s.py", baseline="/r", capture="/r/captures/graph-0")
    back = ScriptResult.from_json(r.to_json())
    assert back.baseline == "/r" and back.capture == "/r/captures/graph-0"

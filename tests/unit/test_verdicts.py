"""Verdicts as one enum end to end (fast: no compiles): every oracle answers a
Verdict -- graph and frame workers, program runs, bisect's probes -- and the search
takes a bool only from a pure oracle."""

from __future__ import annotations

import pytest

from tcompile.compiler.failure import Failure
from tcompile.compiler.probe import _verdict_of
from tcompile.compiler.runner import ProcessResult
from tcompile.compiler.signature import FailureSignature
from tcompile.minifier.verdict import Verdict, as_verdict


def test_the_search_takes_a_verdict_or_a_pure_oracles_bool_and_nothing_else():
    assert as_verdict(Verdict.CRASH) is Verdict.CRASH
    assert as_verdict(True) is Verdict.SAME_FAILURE and as_verdict(False) is Verdict.PASS
    with pytest.raises(TypeError):
        as_verdict("same_failure")  # a verdict's bare string is an oracle's bug


def _result(returncode: int | None, timed_out: bool = False) -> ProcessResult:
    return ProcessResult(returncode, 1.0, timed_out, [], [], {}, "/tmp")


def test_a_probe_that_misses_its_target_says_what_it_saw_instead():
    other = Failure(
        graph=0, graph_kind="dynamo", signature=FailureSignature("inductor", "compile", "E", "m")
    )
    assert _verdict_of(_result(0), []) is Verdict.PASS
    assert _verdict_of(_result(1), [other]) is Verdict.OTHER_FAILURE
    assert _verdict_of(_result(1), []) is Verdict.OTHER_FAILURE  # the program's own error
    assert _verdict_of(_result(-11), []) is Verdict.CRASH
    assert _verdict_of(_result(None, timed_out=True), []) is Verdict.TIMEOUT


def test_one_node_of_a_job_of_several_is_never_run_again_alone(tmp_path, monkeypatch):
    """A node's command that failed with nothing tcompile checked: a run of it alone
    would wait in torchrun's rendezvous for nodes that do not join, so it is not run
    again; the note says why (a two-node test once waited out its 300 s so on CI)."""
    from tcompile.repro.jobs import classify

    def never(*args, **kwargs):
        raise AssertionError("a node of a multi-node job was run again alone")

    monkeypatch.setattr(classify, "run_process", never)
    command = ["torchrun", "--nnodes", "2", "--node-rank", "1", "--nproc-per-node=1", "t.py"]
    result = ProcessResult(1, 1.0, False, ["RuntimeError: boom"], [], {}, str(tmp_path))
    report = classify.classify_result(result, command, str(tmp_path), classify.RunOptions())
    assert report.exit_code == 1 and report.verdict == "compiler-failure"
    assert any("node 1 of a job of 2 nodes" in n["text"] for n in report.notes)
    single = ["torchrun", "--nproc-per-node", "2", "t.py"]
    assert classify.one_node_of(single) is None
    assert classify.one_node_of(["torchrun", "--nnodes=1:2", "t.py"]) is not None
    assert classify.one_node_of(["torchrun", "--nnodes", "$N", "t.py"]) is None

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

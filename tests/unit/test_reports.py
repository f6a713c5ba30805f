"""The minify reports: one type per kind of minify, one --json contract (fast: no
compiles, no torch)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tcompile.cli.render import minify_result
from tcompile.repro.jobs.minify_types import (
    JSON_FIELDS,
    KINDS,
    CaptureMinifyReport,
    GraphMinifyReport,
    MinifyReport,
    ProgramMinifyReport,
)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_every_kind_writes_every_field_of_the_contract_in_order(kind):
    doc = kind(1, "m").to_json()
    assert list(doc) == list(JSON_FIELDS)
    assert len(JSON_FIELDS) == len(set(JSON_FIELDS)) == 50


def test_a_field_a_kind_has_not_is_written_as_its_default():
    program = ProgramMinifyReport(1, "m", repro="r.py", program={"lines_before": 9}).to_json()
    assert program["level"] == "program" and program["program"] == {"lines_before": 9}
    assert program["nodes_after"] is None and program["passes"] == {}
    assert program["after"] == "dynamo" and program["capture"] is None
    base = MinifyReport(0, "no compiler failure").to_json()
    assert base["level"] == "graph" and base["history"] == [] and base["real_inputs"] is False


def test_every_field_is_on_exactly_the_kinds_that_fill_it():
    names = [{f for f in kind.__dataclass_fields__} for kind in KINDS]
    assert set().union(*names) == set(JSON_FIELDS)
    base = names[0]
    own = [n - base for n in names[1:]]
    for i, a in enumerate(own):  # no field is declared by two kinds
        for b in own[i + 1 :]:
            assert not a & b


def _shown(report: MinifyReport) -> str:
    out = io.StringIO()
    minify_result(report, Console(file=out, width=200))
    return out.getvalue()


def test_each_kind_renders_its_own_lines():
    graph = GraphMinifyReport(
        1, "m", repro="repro.py", verified=True, graph=0, graph_kind="forward",
        stage="inductor", nodes_before=6, nodes_after=1, calls=4, real_inputs=True,
        launcher="minifier_launcher.py",
    )  # fmt: skip
    text = _shown(graph)
    assert "nodes:    6 -> 1" in text and "real inputs" in text and "launcher:" in text
    program = ProgramMinifyReport(
        1, "m", repro="repro.py", program={"lines_before": 18, "lines_after": 8, "runs": 5}
    )
    text = _shown(program)
    assert "program:  18 -> 8 lines" in text and "real inputs" not in text
    capture = CaptureMinifyReport(
        1, "m", repro="repro.py", calls=3,
        capture={"entry": "f", "where": "x.py:3", "lines_before": 9, "function_lines": 2},
    )  # fmt: skip
    assert "function: f at x.py:3" in _shown(capture)
    assert "nothing to minify" in _shown(MinifyReport(0, "nothing to minify"))


def test_the_description_keeps_the_real_numbers_and_the_pattern():
    """report.md said the failure only by its signature (every number N): the real
    shapes appeared nowhere, nor the pattern the error names (issue 59)."""
    from tcompile.repro.jobs.report import describe

    bug = {
        "graph": 0, "graph_kind": "dynamo", "kind": "compile",
        "signature": "inductor/compile: RuntimeError: Attempting to broadcast a dimension "
                     "of length N at N! Mismatching argument at index N had [N, N]",
        "message": "RuntimeError: Attempting to broadcast a dimension of length 32 at -1! "
                   "Mismatching argument at index 1 had [8, 32]\n"
                   "(raised in inductor's _sfdp_replacement_28, fx_passes/fuse_attention.py)",
        "bisect": {"stage": "inductor", "subsystem": "joint_graph_passes", "application": 2,
                   "detail": "pass_pattern_0", "effects": {"fuse_attention": 1}},
        "minify": {"repro": "/x/repro.py", "verified": True, "level": "program",
                   "program": {"lines_before": 400, "lines_after": 40}},
    }  # fmt: skip
    text = describe(bug)
    assert "length 32 at -1" in text and "[8, 32]" in text, text
    assert "_sfdp_replacement_28" in text and "fuse_attention x1" in text, text
    assert 'backend="eager"' not in text and "torch.compile off" in text, text


@pytest.mark.parametrize(
    ("graph_kind", "said"),
    [("backward", "gives wrong gradients"), ("inference", "gives wrong results")],
)
def test_the_title_says_wrong_gradients_from_the_graph_kind_not_the_words(graph_kind, said):
    """issue 60: the report's title from the failure's record (its graph kind), never
    from the signature's text ("backward" in an inference graph's message included)."""
    from tcompile.repro.jobs.report import title

    bug = {
        "kind": "accuracy",
        "stage": "inductor",
        "graph_kind": graph_kind,
        "signature": "inductor/accuracy: AccuracyError: backward_like_op output differs",
        "minify": {"ops": ["mul"], "device": "cpu"},
    }
    assert title(bug) == f"[inductor] mul {said} on CPU"


@pytest.mark.parametrize(
    "verdict, failed, words",
    [
        ("same_failure", True, "-> fails ("),
        ("pass", False, "-> passes ("),
        ("other_failure", False, "-> fails another way (not the failure bisected)"),
        ("timeout", False, "-> runs past its limit"),
        (None, False, "-> passes ("),  # an older event without a verdict
    ],
)
def test_a_bisect_step_says_its_verdict(verdict: str | None, failed: bool, words: str) -> None:
    # #193061 on the GPU: a confirmation that failed another way printed "passes"
    from tcompile.cli.render import ConsoleObserver

    buf = io.StringIO()
    obs = ConsoleObserver(Console(file=buf, width=400, color_system=None))
    step = {"event": "bisect_step", "run": 1, "what": "confirm: cat off", "seconds": 26.5}
    obs.event({**step, "failed": failed, "verdict": verdict})
    line = buf.getvalue()
    assert words in line, line
    if verdict == "other_failure":
        assert "passes" not in line

"""Issue 60: every command reports the same culprit for the same failure.

``bisect``, ``report`` and ``triage`` each run on the fixture, from scratch (no cache
shared), and the culprit record each prints (compiler/culprit.py: ``culprit`` in
bisect's JSON, in each report bug, in each triage script) is compared: stage, graph and
its kind, subsystem, the application's name, the op and the pattern.  Before the record,
triage named the op where the minimal graph's values first went wrong in the place of
bisect's lowering (``sum`` for ``slice_scatter``).

With TCOMPILE_TEST_EXTENDED=1 (three whole commands each: 173 s for the cheapest): the
planted C++ compile error (a lowering), a backward graph's wrong values, a user's
decomposition, a post-grad pass and a culprit in the second of two graphs.  In the
30-minute suite, tests/e2e/test_triage.py runs bisect beside its triage (whose culprit is
its report's: triage runs ``tcompile report``) and compares the two.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import FIXTURES, run_tcompile
from tcompile.compiler.culprit import Culprit

pytestmark = pytest.mark.slow

CASES = [
    # in the suite, tests/e2e/test_triage.py compares its triage's culprit with a bisect's
    pytest.param("cpp_relu_compile_error.py", [], "lowering", marks=pytest.mark.extended),
    pytest.param("backward_only.py", ["--accuracy"], None, marks=pytest.mark.extended),
    pytest.param("bad_decomposition.py", ["--accuracy"], None, marks=pytest.mark.extended),
    pytest.param("post_grad_pass_bug.py", ["--accuracy"], None, marks=pytest.mark.extended),
    pytest.param("multi_graph.py", ["--accuracy"], "lowering", marks=pytest.mark.extended),
    # one pattern of a pattern-matcher pass (compiler/child/patterns.py), a reporter's code
    pytest.param("families/cumsum_193263.py", [], "post_grad_pass", marks=pytest.mark.extended),
]


def _json(command: str, *args: str) -> dict:
    r = run_tcompile(command, "--json", *args, timeout=900)
    assert r.returncode in (0, 1), r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.parametrize("fixture, flags, category", CASES)
def test_bisect_report_and_triage_name_one_culprit(fixture, flags, category, tmp_path):
    script = tmp_path / "scripts" / Path(fixture).name
    script.parent.mkdir()
    shutil.copy(FIXTURES / fixture, script)
    bis = _json("bisect", *flags, "--out", str(tmp_path / "b"), str(script))
    rep = _json("report", *flags, "--out", str(tmp_path / "r"), str(script))
    no_acc = [] if flags else ["--no-accuracy"]
    tri = _json("triage", *no_acc, "--out", str(tmp_path / "t"), str(script.parent))
    (bug,) = rep["bugs"]
    (res,) = tri["scripts"]
    assert res["verdict"] == "bug", res
    said = {
        "bisect": Culprit.from_json(bis["culprit"]),
        "report": Culprit.from_json(bug["culprit"]),
        "triage": Culprit.from_json(res["culprit"]),
    }
    keys = {cmd: c.key(graph=True) for cmd, c in said.items()}
    assert len(set(keys.values())) == 1, keys
    assert category is None or said["bisect"].category == category, said["bisect"]
    # and in the same words: the text each prints
    texts = {bis["culprit"]["text"], bug["culprit"]["text"], res["culprit"]["text"]}
    assert len(texts) == 1, texts

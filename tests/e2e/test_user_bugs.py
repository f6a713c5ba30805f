"""Issue 49: the user's own bug is not a compiler bug, however Dynamo words it.

fixtures/user_bugs/ holds programs whose own code is wrong -- a shape (a Linear head
sized for other images; torch.cat of mismatched batches), a dtype (float token ids; a
float16 @ float32 matmul), an index (ids past the vocabulary), a device (a model left on
the meta device; cumsum's out= on another device), a Python check on data or shape
(``assert``), an error only on a later step (the last, smaller batch), an off-by-one in
a loop Dynamo unrolls -- six of them the tracker's own reports, in their reporters'
code.  Under torch.compile each dies of an error worded by Dynamo (``TorchRuntimeError:
RuntimeError when making fake tensor call``) or by a compiled kernel (``index out of
bounds: 0 <= tmp2 < 1L``); without it, of eager's.  The cause is the same: the same kind
of error, raised from the same line of the program (compiler/cause.py).

One triage of the folder (``--no-accuracy``: its run step is ``tcompile run``) gives
both answers the issue asks for: each script's ``run`` (its result.json: exit 3,
``not-a-compiler-bug``, and the program ending as plain python ends it, or by the named
exception that says so) and triage's verdict ``not_compiler``.  The torchrun case is
tests/e2e/test_distributed.py's.  Slow: about a minute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_differential import _key, plain, recorded, user_bugs

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def test_each_users_bug_is_exit_3_in_run_and_not_compiler_in_triage(tmp_path):
    rels = user_bugs()
    assert len(rels) >= 9
    r = run_tcompile(
        "triage", "--json", "--no-accuracy", "--jobs", "2", "--timeout", "300",
        "--out", str(tmp_path), str(FIXTURES / "user_bugs"), timeout=1800,
    )  # fmt: skip
    doc = json.loads(r.stdout)
    verdicts = {Path(s["path"]).name: s["verdict"] for s in doc["scripts"]}
    assert verdicts == {Path(rel).name: "not_compiler" for rel in rels}, (
        verdicts,
        [s["message"] for s in doc["scripts"]],
    )
    assert r.returncode == 0, doc["message"]
    for rel in rels:
        name = Path(rel).stem
        (result,) = tmp_path.glob(f"scripts/{name}-*/run1/run-*/result.json")
        run = json.loads(result.read_text())
        assert run["exit_code"] == 3 and run["verdict"] == "not-a-compiler-bug", (rel, run)
        assert "raised at" in run["explanation"], run["explanation"]  # the user's line
        if run["program"].get("returncode", 0) < 0:  # compiled code died where eager raised:
            # the difference is named in its own words (issue 59): the C++ throw's what()
            # whenever the dying process printed it (two OpenMP threads throwing at once
            # can abort first: "terminate called recursively", seen in the suite)
            assert "died" in run["explanation"], run["explanation"]
            (log,) = tmp_path.glob(f"scripts/{name}-*/tcompile.log")
            if "index out of bounds" in log.read_text(errors="replace"):
                assert "index out of bounds" in run["explanation"], run["explanation"]
        want = recorded(rel) or plain(rel)
        if _key(run["program"]) != _key(want):
            # named: a graph whose compiled code raised runs eagerly and the program dies
            # of eager's error -- said in a note
            said = [n["text"] for n in run["notes"] if "eager raised on the same" in n["text"]]
            assert said, (rel, run["program"], want)


def test_minify_of_a_users_bug_says_not_a_compiler_bug_at_every_level(tmp_path):
    """minify's own start (the program level, which runs the program itself) says what
    run says: exit 3 -- it said exit 1 with the words "not a compiler bug"."""
    script = FIXTURES / "user_bugs" / "linear_head_sized_for_32px.py"
    for level in ("auto", "program"):
        r = run_tcompile(
            "minify", "--json", "--level", level, "--out", str(tmp_path / level), str(script),
            cwd=str(script.parent), timeout=900,
        )  # fmt: skip
        doc = json.loads(r.stdout)
        assert r.returncode == 3 and doc["exit_code"] == 3, (level, doc.get("message"))

"""Issue 61: a program that dies of its own check is located from its one run.

The classification run keeps each graph's last call (compiler/child/postmortem.py);
when the program dies of an uncaught exception outside every graph, each kept graph is
judged then.  A graph whose values differ names the failure: no run without
torch.compile and no locating run.  With the budget at 0 (``TCOMPILE_KEEP_MB=0``) the
two runs decide, as before: the same failure, three runs instead of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def _asserting(tmp_path: Path) -> Path:
    """The planted relu accuracy bug, the program comparing with eager itself."""
    script = tmp_path / "asserts.py"
    script.write_text(
        (FIXTURES / "cpp_relu_accuracy.py")
        .read_text()
        .replace("print(f(x, w))", "torch.testing.assert_close(f(x, w), f.__wrapped__(x, w))")
    )
    return script


def _run(tmp_path: Path, script: Path, name: str, **env: str) -> tuple[dict, str]:
    r = run_tcompile(
        "run", "--json", "--out", str(tmp_path / name), str(script),
        env={**os.environ, **env},
    )  # fmt: skip
    return json.loads(r.stdout), r.stderr


def test_a_wrong_value_the_program_asserts_is_located_in_its_one_run(tmp_path):
    script = _asserting(tmp_path)
    doc, err = _run(tmp_path, script, "one")
    assert doc["exit_code"] == 1 and doc["verdict"] == "compiler-failure", doc["explanation"]
    (f,) = doc["failures"]
    assert (f["graph"], f["kind"]) == (0, "accuracy"), f
    assert any("judged after the program died" in n["text"] for n in doc["notes"]), doc["notes"]
    # neither the plain run nor the locating run: one process ran the program
    assert "running it again without torch.compile" not in err, err[-2000:]
    assert "checking the values" not in err, err[-2000:]
    assert not (Path(doc["run_dir"]) / "plain").exists()
    assert doc["program"]["exception"].startswith("AssertionError"), doc["program"]
    # a bisect's baseline counts applications and changes none: it keeps the last
    # calls too, and the bisect asks the captured graph (2 runs: baseline, confirmation)
    r = run_tcompile("bisect", "--json", "--out", str(tmp_path / "b"), str(script))
    bis = json.loads(r.stdout)
    assert bis["exit_code"] == 1 and bis["from_capture"] and bis["runs"] <= 2, bis["message"]
    assert bis["culprit"]["category"] == "lowering" and bis["culprit"]["op"] == "relu"
    assert not list((tmp_path / "b").rglob("plain")) and not list((tmp_path / "b").rglob("located"))


# extended (the suite's time): the old path, on the same script, finds the same failure
@pytest.mark.extended
def test_with_no_last_call_kept_the_two_runs_find_the_same_failure(tmp_path):
    script = _asserting(tmp_path)
    doc, _ = _run(tmp_path, script, "one")
    (f,) = doc["failures"]
    old, err = _run(tmp_path, script, "three", TCOMPILE_KEEP_MB="0")
    assert "running it again without torch.compile" in err
    assert [(g["graph"], g["signature"]) for g in old["failures"]] == [(0, f["signature"])]
    assert any("did not fit the budget" in n["text"] for n in old["notes"])


def test_a_users_own_check_with_right_graphs_is_still_not_a_compiler_bug(tmp_path):
    """Every graph right when judged after the death: nothing said of them, and the
    run without torch.compile decides (exit 3), as before."""
    script = tmp_path / "own.py"
    script.write_text(
        "import torch\n"
        "f = torch.compile(lambda x: torch.relu(x) * 2)\n"
        "x = torch.randn(8)\n"
        "y = f(x)\n"
        "assert y.sum() < 0, 'the user expected a negative sum'\n"
    )
    doc, err = _run(tmp_path, script, "own")
    assert doc["exit_code"] == 3 and doc["failures"] == [], doc["explanation"]
    assert "running it again without torch.compile" in err

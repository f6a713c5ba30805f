"""`tcompile explain` and `tcompile run --debug-dir` against torch's own explain."""

import json
import os
import subprocess
import sys

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def torch_explain():
    """What torch._dynamo.explain says for the same function and first input."""
    code = (
        "import json, sys, torch\n"
        f"sys.path.insert(0, {str(FIXTURES)!r})\n"
        "from graph_breaks import f\n"
        "e = torch._dynamo.explain(f)(torch.randn(8))\n"
        "print(json.dumps({'graphs': e.graph_count, 'breaks': e.graph_break_count,\n"
        "  'where': [[r.user_stack[-1].lineno, r.reason.splitlines()[0]] for r in e.break_reasons]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_explain_matches_torch(tmp_path):
    r = run_tcompile("explain", "--json", "--out", str(tmp_path), str(FIXTURES / "graph_breaks.py"))
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    for key in ("graphs", "graph_breaks", "recompilations", "compile_seconds"):
        assert key in doc
    ref = torch_explain()
    # the program calls f twice (the second call recompiles every frame)
    assert doc["graph_count"] == 2 * ref["graphs"] == 8
    lines = sorted({b["line"] for b in doc["graph_breaks"]})
    assert lines == sorted(ln for ln, _ in ref["where"]) == [15, 17, 22]
    for b in doc["graph_breaks"]:
        assert b["file"].endswith("graph_breaks.py") and b["count"] == 2
        assert any(
            b["reason"].splitlines()[0] == reason for ln, reason in ref["where"] if ln == b["line"]
        )
    rec = doc["recompilations"]
    assert rec and rec[0]["frame"] == "f" and rec[0]["line"] == 13
    assert "size mismatch at index 0. expected 8, actual 12" in rec[0]["reason"]
    assert {"dynamo_capture", "aot_autograd", "inductor", "codegen"} <= set(doc["compile_seconds"])
    assert all(g["phases"] for g in doc["graphs"])


def test_debug_dir_index_lists_output_code_for_every_graph(tmp_path):
    debug = tmp_path / "debug"
    r = run_tcompile(
        "run",
        "--json",
        "--debug-dir",
        str(debug),
        "--out",
        str(tmp_path / "o"),
        str(FIXTURES / "multi_graph.py"),
    )
    doc = json.loads(r.stdout)
    index = doc["debug_index"]
    dynamo = [g for g in doc["graphs"] if g["kind"] == "dynamo"]
    assert len(index) == len(dynamo) == 3
    assert sorted(row["graph"] for row in index) == [0, 1, 2]
    for row in index:
        assert os.path.isfile(row["files"]["output_code.py"])
        assert os.path.dirname(row["files"]["output_code.py"]) == str(
            debug / f"graph-{row['graph']:03d}-{row['kind']}"
        )


def test_only_restricts_compilation(tmp_path):
    r = run_tcompile(
        "run",
        "--json",
        "--only",
        "no_such_function",
        "--out",
        str(tmp_path),
        str(FIXTURES / "multi_graph.py"),
    )
    assert json.loads(r.stdout)["graphs"] == []


def test_env_and_bad_input(tmp_path):
    r = run_tcompile("env", "--json")
    info = json.loads(r.stdout)
    for key in (
        "torch",
        "torch_git",
        "cuda",
        "cudnn",
        "triton",
        "gpu",
        "python",
        "os",
        "cxx",
        "tcompile",
        "env",
    ):
        assert key in info
    assert run_tcompile("explain", str(tmp_path / "missing.py")).returncode == 2
    assert run_tcompile("explain", str(tmp_path)).returncode == 2


def test_recompile_limit_reported(tmp_path):
    r = run_tcompile(
        "explain", "--json", "--out", str(tmp_path), str(FIXTURES / "recompile_limit.py")
    )
    doc = json.loads(r.stdout)
    assert doc["recompile_limit"] and "step" in doc["recompile_limit"][0]["function"]
    assert all(rec["frame"] == "step" for rec in doc["recompilations"])

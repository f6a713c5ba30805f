"""Issue 63: a compiled call that returns where eager raises -- the tracker's lost-
validation family (fixtures/families/, the reporters' code: a decomposition or lowering
drops an op's check of its arguments) -- is a failure of that graph, kind
``missing_error``: ``run --accuracy`` ties the program's own check to the graph, bisect
names the decomposition, and minify's repro prints REPRODUCED when the compiled graph
does not raise (and NOT REPRODUCED with ``--backend eager``, which raises).

Slow: about two minutes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow
FAMILIES = FIXTURES / "families"


def _json(tmp_path: Path, name: str, *args: str) -> dict:
    r = run_tcompile(args[0], "--json", "--out", str(tmp_path / name), *args[1:],
                     cwd=str(FAMILIES), timeout=900)  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"], r.stderr[-2000:]
    return doc


def test_the_manifest_names_every_family_script():
    names = {e["file"] for e in json.loads((FAMILIES / "MANIFEST.json").read_text())}
    assert names == {p.name for p in FAMILIES.glob("*.py")}
    assert sum(n.startswith("lost_validation") for n in names) >= 3


def test_a_lost_validation_is_a_missing_error_of_its_graph_bisected_and_minified(tmp_path):
    script = "lost_validation_smooth_l1_loss_194501.py"  # pytorch#194501
    run = _json(tmp_path, "run", "run", "--accuracy", script)
    (f,) = run["failures"]
    assert run["exit_code"] == 1 and f["kind"] == "missing_error" and f["graph"] == 0, run
    assert "smooth_l1_loss does not support negative values for beta" in f["message"]
    bis = _json(tmp_path, "bisect", "bisect", "--accuracy", script)
    assert bis["subsystem"] == "decomposition" and "smooth_l1_loss" in bis["detail"], bis["message"]
    mini = _json(tmp_path, "minify", "minify", "--accuracy", script)
    assert mini["verified"], mini.get("repro_output")
    repro = Path(mini["repro"])
    ran = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True)
    assert ran.returncode == 1 and "missing_error: RuntimeError" in ran.stdout, ran.stdout
    ran = subprocess.run([sys.executable, str(repro), "--backend", "eager"], capture_output=True,
                         text=True)  # fmt: skip
    assert ran.returncode == 0 and "NOT REPRODUCED" in ran.stdout, ran.stdout

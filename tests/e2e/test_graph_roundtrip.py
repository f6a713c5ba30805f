"""Issue 49: every captured graph loads -- every graph of every fixture.

Each fixture runs (tests/data/roundtrip.py capture) with every Dynamo graph and every
AOT graph (after inductor's decompositions) kept as tcompile keeps graphs
(compiler/graph_io.py), with its first call's inputs and outputs; a fresh interpreter
(roundtrip.py load), as tcompile's parent is, loads each one and runs it: the same
outputs.  Among them: prims ops (``prims.fma``, registered only by inductor's prims
module), higher-order ops (``cond``, ``while_loop``), a custom op's namespace
(fixtures/ops).  One process captures all fixtures (seconds each, no inductor compile).
Slow: about a minute."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_differential import ARGS, _fixtures, _gpu

from helpers import FIXTURES, ROOT

pytestmark = pytest.mark.slow


def test_every_graph_of_every_fixture_saves_loads_and_computes_the_same(tmp_path):
    fixtures = [str(FIXTURES / rel) for rel in _fixtures() if not _gpu(rel)]
    assert any("ops/handwritten_adam_item.py" in f for f in fixtures)
    args = tmp_path / "args.json"
    args.write_text(json.dumps({rel.rsplit("/", 1)[-1]: a for rel, a in ARGS.items()}))
    driver = str(ROOT / "tests" / "data" / "roundtrip.py")
    out = tmp_path / "graphs"
    out.mkdir()
    subprocess.run(
        [sys.executable, driver, "capture", str(out), str(args), *fixtures],
        capture_output=True,
        timeout=1200,
        stdin=subprocess.DEVNULL,
    )
    loaded = subprocess.run(
        [sys.executable, driver, "load", str(out)], capture_output=True, text=True, timeout=600
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    seen = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert seen["load_errors"] == [] and seen["save_errors"] == [], seen
    assert seen["differ"] == [], seen
    # every kind of graph and op namespace the issue names is among them
    assert seen["graphs"] >= 200 and seen["kinds"]["dynamo"] >= 90 and seen["kinds"]["aot"] >= 90
    assert {"prims", "hop", "tcompile_fixture"} <= set(seen["namespaces"]), seen["namespaces"]

"""No false positives on a real model: GPT-2 (two layers, random weights) trained
for a few steps with dropout on, under --accuracy.  Needs the `models` extra."""

import json

import pytest

from helpers import FIXTURES, run_tcompile

pytest.importorskip("transformers")
pytestmark = [pytest.mark.slow, pytest.mark.models]


@pytest.mark.extended
def test_gpt2_training_with_dropout_is_clean(tmp_path):
    r = run_tcompile(
        "run", "--json", "--accuracy", "--out", str(tmp_path), str(FIXTURES / "gpt2_train.py")
    )
    doc = json.loads(r.stdout)
    assert r.returncode == 0, doc["failures"]
    assert doc["failures"] == []
    kinds = {g["kind"] for g in doc["graphs"]}
    assert {"dynamo", "forward", "backward"} <= kinds
    assert max(g["nodes"] for g in doc["graphs"]) > 100  # a realistic graph, not a toy

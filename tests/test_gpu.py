"""GPU checks (Triton codegen); skipped without CUDA."""

import json

import pytest
import torch

from helpers import FIXTURES, run_tcompile

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_triton_relu_accuracy_run_and_minify(tmp_path):
    r = run_tcompile(
        "run",
        "--json",
        "--accuracy",
        "--out",
        str(tmp_path / "run"),
        str(FIXTURES / "gpu_triton_relu_accuracy.py"),
    )
    doc = json.loads(r.stdout)
    assert [(f["kind"], f["graph"]) for f in doc["failures"]] == [("accuracy", 0)]
    r = run_tcompile(
        "minify",
        "--json",
        "--accuracy",
        "--out",
        str(tmp_path / "min"),
        str(FIXTURES / "gpu_triton_relu_accuracy.py"),
    )
    doc = json.loads(r.stdout)
    assert doc["verified"] and doc["nodes_after"] == 1, doc
    text = open(doc["repro"]).read()
    assert "torch.relu(" in text and "'cuda:0'" in text

"""tcompile never changes whether or how the program fails (issue 22, DESIGN.md
mechanism 11): the check watches the program's own calls, ties a wrong value the
program noticed to its graph, and repros carry what the failure needs.  Slow: real
compiles.  (The CUDA-graph and max-autotune cases are GPU tests: tests/gpu/test_gpu.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow
REAL = FIXTURES / "real"


def _json(*args):
    r = run_tcompile(*args)
    assert "Traceback" not in r.stdout, r.stderr[-3000:]
    return r, json.loads(r.stdout)


def test_a_non_contiguous_input_updated_in_place_is_judged_with_its_own_strides(tmp_path):
    """#133512: the check used to feed the graph contiguous copies and reported another
    failure (a stride assertion); now the program's own call is judged, and without
    --accuracy the program's failed assertion is tied to the graph."""
    fixture = str(REAL / "strided_input_inplace_as_strided_copy.py")
    for extra in (["--accuracy"], []):
        r, doc = _json("run", *extra, "--json", "--out", str(tmp_path / "x".join(extra)), fixture)
        assert r.returncode == 1, doc["explanation"]
        (f,) = doc["failures"]
        assert f["graph"] == 0 and f["kind"] == "accuracy", f
        assert "stride" not in f["message"]


def test_gradients_under_an_outer_autocast_are_judged_outside_it(tmp_path):
    """#179804: a compiled backward computed in bf16 where the program's backward (outside
    autocast) is float32.  Strict and loose checks both see it; the program's own check,
    without --accuracy, is tied to the graph's backward."""
    fixture = str(REAL / "autocast_inner_disabled_backward.py")
    for extra in (["--strict-accuracy"], ["--accuracy"], []):
        r, doc = _json("run", *extra, "--json", "--out", str(tmp_path / "y".join(extra)), fixture)
        assert r.returncode == 1, (extra, doc["explanation"])
        assert [(f["graph"], f["graph_kind"], f["kind"]) for f in doc["failures"]] == [
            (0, "backward", "accuracy")
        ], doc["failures"]


def test_a_clean_program_under_autocast_is_clean(tmp_path):
    script = tmp_path / "clean_autocast.py"
    script.write_text(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))\n"
        "cm = torch.compile(m)\n"
        "with torch.autocast('cpu', dtype=torch.bfloat16):\n"
        "    y = cm(torch.randn(16, 32))\n"
        "y.float().pow(2).mean().backward()\n"
    )
    r, doc = _json("run", "--accuracy", "--json", "--out", str(tmp_path / "o"), str(script))
    assert r.returncode == 0 and doc["failures"] == [], doc["failures"]


def test_a_passive_run_decides_where_the_check_changed_the_program(tmp_path):
    r, doc = _json(
        "run",
        "--accuracy",
        "--json",
        "--out",
        str(tmp_path),
        str(FIXTURES / "check_changes_program.py"),
    )
    assert r.returncode == 0 and doc["returncode"] == 0, doc["explanation"]
    (note,) = [n["text"] for n in doc["notes"] if "passive" in n["text"]]
    assert "fallback_random" in note and "the passive verdict stands" in note


@pytest.mark.parametrize(
    "fixture, words",
    [
        (
            "custom_pass_module_import.py",
            "from torch._inductor.custom_graph_pass import get_hash_for_files",
        ),
        pytest.param(
            "decomp_table_lambda.py",
            "aten_gelu_default_lambda = lambda x",
            marks=pytest.mark.extended,
        ),
    ],
)
def test_customizations_travel_into_the_repro(fixture, words, tmp_path):
    r, doc = _json(
        "minify", "--accuracy", "--json", "--out", str(tmp_path), str(FIXTURES / fixture)
    )
    assert r.returncode == 1 and doc["verified"], doc.get("message")
    text = open(doc["repro"]).read()
    assert words in text
    assert "/" + "work" not in text and str(FIXTURES) not in text  # no paths of this machine


def test_special_values_survive_into_the_repro(tmp_path):
    r, doc = _json(
        "minify",
        "--accuracy",
        "--real-inputs",
        "--json",
        "--out",
        str(tmp_path),
        str(FIXTURES / "inf_inputs_accuracy.py"),
    )
    assert r.returncode == 1 and doc["verified"], doc.get("message")
    text = open(doc["repro"]).read()
    assert "float('inf')" in text and "float('nan')" in text and "-0.0" in text
    fresh = subprocess.run(
        [sys.executable, doc["repro"]], capture_output=True, text=True, cwd=tmp_path
    )
    assert fresh.returncode == 1 and "REPRODUCED" in fresh.stdout


def test_run_trace_writes_torch_s_trace_and_names_the_failing_graph_s_page(tmp_path):
    import shutil

    trace = tmp_path / "trace"
    r, doc = _json(
        "run",
        "--accuracy",
        "--json",
        "--trace",
        str(trace),
        "--out",
        str(tmp_path / "o"),
        str(FIXTURES / "multi_graph.py"),
    )
    assert r.returncode == 1 and doc["next_command"].startswith("tcompile bisect --accuracy")
    assert doc["trace"]["logs"] and all(p.startswith(str(trace)) for p in doc["trace"]["logs"])
    if shutil.which("tlparse"):
        assert doc["trace"]["tlparse"].endswith("index.html")
        assert "1" in doc["trace"]["pages"]  # graph 1 holds the planted bug
    else:
        assert "tlparse" in doc["trace"]["why"]

"""Accuracy failures: where the values first go wrong and which numerics switch fixes
them (issue 25, child/numerics.py).  Slow: real compiles in minifier workers."""

from __future__ import annotations

import json

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def _minify(tmp_path, fixture, *flags):
    r = run_tcompile("minify", *flags, "--json", "--out", str(tmp_path), str(FIXTURES / fixture))
    assert "Traceback" not in r.stdout, r.stderr[-3000:]
    return r, json.loads(r.stdout)


def test_a_real_miscompile_passes_with_no_switch_and_names_its_node_and_kernel(tmp_path):
    # report: bisect and minify from what its baseline saved (the minify's numerics here)
    r = run_tcompile(
        "report", "--accuracy", "--json", "--max-bugs", "1", "--out", str(tmp_path),
        str(FIXTURES / "multi_graph.py"),
    )  # fmt: skip
    assert "Traceback" not in r.stdout, r.stderr[-3000:]
    (bug,) = json.loads(r.stdout)["bugs"]
    doc = bug["minify"]
    assert r.returncode == 1 and doc["verified"] and doc["from_capture"], doc["message"]
    # the full graph's divergence is the baseline's own localization of that call, not
    # made again (minify_job.baseline_divergence)
    assert doc["divergence"]["full"]["from_baseline"], doc["divergence"]
    baseline = json.loads(next(tmp_path.glob("report-*/run-*/result.json")).read_text())
    (failure,) = [f for f in baseline["failures"] if f["graph"] == bug["graph"]]
    assert failure["divergence"]["node"] == doc["divergence"]["full"]["node"]
    for which in ("minimal", "full"):
        first = doc["divergence"][which]
        assert first["op"] == "relu" and "multi_graph.py" in first["source"], first
        assert "relu" in (first["kernel"] or ""), first
    assert "emulate_precision_casts=True" in doc["switches"]["tried"]
    assert doc["switches"]["passes_with"] == []
    assert doc["switches"]["verdict"].endswith("a miscompile")
    # every switch at once still fails the same way: none is judged alone (one compile)
    assert doc["switches"]["at_once"] == "same_failure", doc["switches"]
    assert "nor with all of them at once" in doc["switches"]["verdict"]


@pytest.mark.extended
def test_an_elided_cast_passes_with_emulate_precision_casts(tmp_path):
    r, doc = _minify(tmp_path, "numerics/cast_elided_bf16.py", "--strict-accuracy")
    assert r.returncode == 1, doc["message"]
    fixed = [s["switch"] for s in doc["switches"]["passes_with"]]
    assert "emulate_precision_casts=True" in fixed, doc["switches"]
    assert doc["switches"]["verdict"].startswith("passes with emulate_precision_casts")


def test_a_reduction_order_difference_is_not_called_a_miscompile(tmp_path):
    r, doc = _minify(tmp_path, "numerics/reduction_order.py", "--strict-accuracy")
    assert r.returncode == 1, doc["message"]
    assert "not a miscompile" in doc["switches"]["verdict"], doc["switches"]

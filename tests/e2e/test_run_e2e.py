"""End-to-end: `tcompile run --json` on every fixture, real compiles.

Each case names the failure kind, the graph it must be in, and for AOT-level
failures the graph kind.  Results are read from --json, never from stderr.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow

# fixture, extra flags, expected exit, expected failures [(kind, graph, graph_kind)]
CASES = [
    ("clean.py", [], 0, []),
    ("clean.py", ["--accuracy"], 0, []),
    ("capture_fullgraph.py", [], 1, [("capture", None, "dynamo")]),
    ("custom_backend.py", [], 1, [("compile", 0, "dynamo")]),
    ("bad_decomposition.py", ["--accuracy"], 1, [("accuracy", 0, "inference")]),
    ("cpp_relu_compile_error.py", [], 1, [("compile", 0, "inference")]),
    ("cpp_relu_runtime_error.py", [], 1, [("runtime", 0, "inference")]),
    ("cpp_relu_accuracy.py", ["--accuracy"], 1, [("accuracy", 0, "inference")]),
    ("cpp_throw_crash.py", [], 1, [("crash", 0, "inference")]),
    ("post_grad_pass_bug.py", ["--accuracy"], 1, [("accuracy", 0, "inference")]),
    ("backward_only.py", ["--accuracy"], 1, [("accuracy", 0, "backward")]),
    ("joint_pass_crash.py", ["--accuracy"], 1, [("compile", 0, "joint")]),
    ("hooks/register_hook_after_break_91468.py", ["--accuracy"], 1, [("hook", 0, "backward")]),
    ("hooks/two_heads_hook.py", ["--accuracy"], 1, [("hook", 0, "backward")]),
    # a lost validation in a program of our own (issue 63; the tracker's: test_families)
    ("missing_error/label_smoothing_bce.py", ["--accuracy"], 1, [("missing_error", 0, "forward")]),
    ("multi_graph.py", ["--accuracy"], 1, [("accuracy", 1, "inference")]),
    ("fails_without_compile.py", [], 3, []),
    # CUDA graph trees' words from the program itself: the run without them fails too
    ("raises_cudagraph_words.py", [], 3, []),
]


def _run(fixture, flags, tmp_path, env=None):
    r = run_tcompile(
        "run", "--json", "--out", str(tmp_path), *flags, str(FIXTURES / fixture), env=env
    )
    assert "Traceback (most recent call last)" not in r.stdout
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == r.returncode
    return doc


def _summary(doc):
    return [(f["kind"], f["graph"], f["graph_kind"]) for f in doc["failures"]]


def check_case(doc, fixture, code, expected):
    """What `tcompile run` must say of a fixture (CASES): tests/e2e/test_differential.py runs
    every fixture in every mode and calls this on the run a case names."""
    assert doc["exit_code"] == code, doc
    assert _summary(doc) == expected, doc["failures"]
    for f in doc["failures"]:
        for key in ("graph", "kind", "stage", "signature", "message"):
            assert key in f
    for g in doc["graphs"]:
        for key in ("index", "frame", "kind", "nodes", "stage"):
            assert key in g
    if code != 3 and fixture != "capture_fullgraph.py":
        assert any(g["kind"] == "dynamo" for g in doc["graphs"])
    if fixture == "cpp_relu_accuracy.py":  # where the values first go wrong (localize.py)
        first = doc["failures"][0]["divergence"]
        assert (first["op"], first["node"]) == ("relu", "h_2"), first
        assert first["kernel"].startswith("cpp_fused") and "relu" in first["kernel"]
        assert "h = torch.relu(h)" in first["source"]
    if fixture == "raises_cudagraph_words.py":  # asked first, then the plain run decided
        runs = sorted(p.name for p in Path(doc["run_dir"]).iterdir() if p.is_dir())
        assert {"without", "plain"} <= set(runs), runs
    if fixture.startswith("hooks/"):  # which hook, on which tensor, from which frame
        message = doc["failures"][0]["message"]
        made = "y = x * x" if "91468" in fixture else "features = torch.relu(self.encoder(x))"
        assert "the hook " in message and "<lambda> (defined at " in message, message
        assert made in message, message
        assert fixture.split("/")[1] in doc["failures"][0]["frame"], doc["failures"][0]
    if fixture == "backward_only.py":  # the forward is right: the gradient's divergence
        first = doc["failures"][0]["divergence"]
        # the backward graph's own node: the multiplication the planted pass scales
        assert first["grads"] and first["graph"] == "backward", first
        assert first["op"].startswith("mul") and "Tanh" in first["source"], first
        assert first["kernel"].startswith("cpp_fused"), first


def test_multi_graph_numbers_every_graph(tmp_path):
    doc = _run("multi_graph.py", [], tmp_path)
    dynamo = [g for g in doc["graphs"] if g["kind"] == "dynamo"]
    assert [g["index"] for g in dynamo] == [0, 1, 2]
    assert all(g["stage"] == "inductor" for g in dynamo)
    assert doc["exit_code"] == 0  # without --accuracy the wrong numbers go unnoticed


@pytest.mark.parametrize(
    "fixture, flags, expected",
    [
        ("post_grad_pass_bug.py", ["--accuracy"], [("accuracy", 0, "inference")]),
    ],
)
def test_same_result_with_warm_caches(fixture, flags, expected, tmp_path):
    """A plain run first warms inductor's caches (the user's default cache dir)."""
    cache = tmp_path / "inductor-cache"
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
    subprocess.run(
        [sys.executable, str(FIXTURES / fixture)],
        env={**os.environ, **env},
        capture_output=True,
        check=True,
        timeout=600,
    )
    assert any(cache.iterdir())
    doc = _run(fixture, flags, tmp_path / "out", env=env)
    assert _summary(doc) == expected


def test_backend_override_stage(tmp_path):
    doc = _run("custom_backend.py", ["--backend", "aot_eager"], tmp_path)
    assert doc["exit_code"] == 0
    assert {g["stage"] for g in doc["graphs"]} == {"aot_eager"}
    assert {g["kind"] for g in doc["graphs"]} == {"dynamo", "inference"}


def test_timeout_kills_the_group(tmp_path):
    script = tmp_path / "sleepy.py"
    pids = tmp_path / "pids"
    script.write_text(
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pids)!r}, 'a').write(f'{{os.getpid()}} {{child.pid}}\\n')\n"
        "time.sleep(60)\n"
    )
    r = run_tcompile("run", "--json", "--timeout", "2", "--out", str(tmp_path / "o"), str(script))
    doc = json.loads(r.stdout)
    # sleeps without torch.compile too: a timeout that is not a compiler bug
    assert doc["exit_code"] == 3
    # the program and its child, in both runs, are gone: killed, not waited for
    for pid in (int(p) for p in pids.read_text().split()):
        assert (
            not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
        )


def test_a_failure_that_does_not_come_back_is_flaky_not_a_compiler_failure(tmp_path):
    """The program fails on its first run only (a marker file): the run without
    torch.compile passes, and so does the compiled command run again (the locating run):
    exit 5, verdict "flaky", what each run showed -- no failure row, no next command, and
    bisect and minify say the same instead of searching."""
    marker = tmp_path / "marker"
    r = run_tcompile(
        "run", "--json", "--out", str(tmp_path / "r"), str(FIXTURES / "fails_once.py"), str(marker)
    )
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"] == 5, doc["explanation"]
    assert doc["verdict"] == "flaky" and doc["failures"] == [] and doc["next_command"] is None
    flaky = doc["flaky"]
    assert flaky["first"].startswith("exit 1") and flaky["at_teardown"] is False, flaky
    assert flaky["again"] == flaky["plain"] == "success (exit 0)", flaky
    assert "failed once under torch.compile" in doc["explanation"]
    marker.unlink()
    r = run_tcompile(
        "bisect", "--json", "--out", str(tmp_path / "b"), str(FIXTURES / "fails_once.py"),
        str(marker),
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == 5 and doc["flaky"] and "flaky" in doc["message"], doc["message"]

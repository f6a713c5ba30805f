"""``tcompile minify`` of capture failures (issue 16): a frame TorchDynamo could not
capture, shrunk from its record to a standalone repro.py of a few lines, verified in a
fresh interpreter and checked not to fail without torch.compile.  Slow: real runs."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow

# fixture -> words the minimal function must still hold (the construct Dynamo fails on)
# (capture_print.py, capture_item_branch.py and capture_builtin.py minify as
# capture_deep_branch.py does -- benchmarks/capture_minify.py measures all of them;
# capture_fullgraph.py is minified from its record below)
CAPTURE_FIXTURES = {
    "capture_deep_branch.py": "if ",  # a data-dependent branch three modules down
    "capture_dynamic_list_index.py": ".pop(",  # an internal Dynamo error (pytorch#196285)
    "capture_symbolic_guard.py": "== 8",  # a guard error on a symbolic size
    "capture_closure_global.py": "threshold",
    # a recompilation the program forbids: the earlier call (batch 8) comes first
    "recompile_error.py": "x=torch.randn((8, 16)",
}


def _minify(tmp_path, *args):
    r = run_tcompile("minify", "--json", "--out", str(tmp_path), *args)
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r, json.loads(r.stdout)


def _run_repro(path, *extra):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-I", path, *extra],  # -I: no PYTHONPATH, no user site, cwd /
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
    )


# the same path as capture_symbolic_guard.py: extended (a recompilation replays with
# its earlier calls in test_a_recompilation_replays_with_its_earlier_calls)
CAPTURE_EXTENDED = {
    "recompile_error.py",
    "capture_deep_branch.py",
    "capture_dynamic_list_index.py",
    "capture_closure_global.py",
    # since 2026-11-29 (the suite's time): capture_fullgraph's and the record's minify
    # tests take the same path
    "capture_symbolic_guard.py",
}


@pytest.mark.parametrize(
    "fixture",
    [
        pytest.param(f, marks=pytest.mark.extended) if f in CAPTURE_EXTENDED else f
        for f in sorted(CAPTURE_FIXTURES)
    ],
)
def test_capture_failure_minifies_to_a_short_verified_repro(fixture, tmp_path):
    r, doc = _minify(tmp_path, str(FIXTURES / fixture))
    assert r.returncode == 1 and doc["verified"], (fixture, doc["message"])
    assert doc["eager_passes"] and doc["repro_form"] == "capture"
    assert doc["signature"].startswith("eager/capture: ")
    text = open(doc["repro"]).read()
    assert text.count("\n") <= 40 and doc["repro_lines"] <= 40, text
    assert doc["capture"]["function_lines"] <= 10, doc["capture"]
    assert CAPTURE_FIXTURES[fixture] in text
    assert "import tcompile" not in text and "from tcompile" not in text
    assert str(FIXTURES) not in text and os.path.expanduser("~") not in text
    ran = _run_repro(doc["repro"])
    assert ran.returncode == 1 and ran.stdout.startswith("REPRODUCED: eager/capture: ")
    assert _run_repro(doc["repro"], "--no-compile").returncode == 0
    assert json.load(open(os.path.join(doc["run_dir"], "minify.json")))["verified"]


def test_minify_from_a_record_and_trust(tmp_path):
    """``tcompile minify record.pkl``; a record someone else signed needs --trust."""
    run = run_tcompile(
        "run", "--json", "--out", str(tmp_path / "run"), str(FIXTURES / "capture_print.py")
    )
    record = json.loads(run.stdout)["failures"][0]["record"]
    r, doc = _minify(tmp_path / "m", record)
    assert (
        r.returncode == 1
        and doc["verified"]
        and doc["capture"]["history"][0] == "step into forward"
    )
    stranger = {"TCOMPILE_CACHE_DIR": str(tmp_path / "other-user")}  # another user's key
    copy = shutil.copy(record, tmp_path / "theirs.pkl")
    r = run_tcompile("minify", "--out", str(tmp_path / "x"), str(copy), env=stranger)
    assert r.returncode == 2 and "--trust" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").rglob("repro.py"))
    r = run_tcompile(
        "minify", "--trust", "--json", "--out", str(tmp_path / "y"), str(copy), env=stranger
    )
    assert r.returncode == 1 and json.loads(r.stdout)["verified"]


def test_bisect_and_replay_go_on_to_minify_a_capture_failure(tmp_path):
    r = run_tcompile(
        "bisect", "--minify", "--json", "--out", str(tmp_path / "b"),
        str(FIXTURES / "capture_fullgraph.py"),
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert doc["stage"] == "eager" and doc["minify"]["verified"], doc.get("minify")
    r = run_tcompile("replay", "--minify", "--json", "--out", str(tmp_path / "r"), doc["record"])
    rep = json.loads(r.stdout)
    assert rep["outcome"] == "reproduced" and rep["minify"]["verified"]


# "gone" takes the path of "changed" (the bytecode decompiled): extended
@pytest.mark.parametrize("change", [pytest.param("gone", marks=pytest.mark.extended), "changed"])
def test_source_gone_or_changed_is_decompiled_from_the_record(change, tmp_path):
    """The script was deleted or edited after its run: the frame's source comes from
    the recorded bytecode (depyf), never from the file as it is now, and says so."""
    pytest.importorskip("depyf")
    script = tmp_path / "capture_fullgraph.py"
    shutil.copy(FIXTURES / "capture_fullgraph.py", script)
    run = run_tcompile("run", "--json", "--out", str(tmp_path / "run"), str(script))
    record = json.loads(run.stdout)["failures"][0]["record"]
    if change == "gone":
        script.unlink()
    else:  # the same lines, another op: the file no longer holds the recorded code
        script.write_text(script.read_text().replace("torch.sin(x)", "torch.cos(x)"))
    r, doc = _minify(tmp_path / "m", record)
    assert r.returncode == 1 and doc["verified"], doc["message"]
    assert doc["capture"]["source_from"].startswith("bytecode, decompiled by depyf")
    assert change in doc["capture"]["source_from"]
    text = open(doc["repro"]).read()
    assert "if " in text and "torch.cos" not in text


def test_a_recompilation_replays_with_its_earlier_calls(tmp_path):
    """The record of a recompilation holds the earlier call's arguments: replay makes
    that call first and the same guard fails; --info names the guard."""
    run = run_tcompile(
        "run", "--json", "--out", str(tmp_path / "run"), str(FIXTURES / "recompile_error.py")
    )
    record = json.loads(run.stdout)["failures"][0]["record"]
    r = run_tcompile("replay", "--json", "--out", str(tmp_path / "r"), record)
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["outcome"] == "reproduced", doc
    assert "RecompileError" in doc["signature"]
    info = run_tcompile("replay", "--info", record)
    assert "tensor 'x' size mismatch at index 0" in info.stdout
    assert "1 earlier call(s)" in info.stdout

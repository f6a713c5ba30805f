"""Issue 40, a new user's first hour, on a two-file training script
(fixtures/train_two_file: train.py imports Net from model.py, argparse, ``--bug``).

- every check compiles exactly the program's graphs: the accuracy check's localization
  never resets Dynamo (a reset made each later step recompile: 10 steps, 11 graphs);
- ``--json`` prints one document on every exit path, interrupts and usage errors too;
- a clean run that did not compare values says so.
"""

import json
import os
import signal
import subprocess
import time

import pytest

from helpers import FIXTURES, run_tcompile, tcompile_cmd

TRAIN = FIXTURES / "train_two_file" / "train.py"


def _graphs(doc):
    dynamo = [g for g in doc["graphs"] if g["level"] == "dynamo"]
    aot = sorted(g["kind"] for g in doc["graphs"] if g["level"] == "aot")
    return len(dynamo), aot


@pytest.mark.slow
@pytest.mark.parametrize("check", [[], ["--accuracy"], ["--strict-accuracy"]])
def test_every_check_compiles_exactly_the_programs_graphs(check, tmp_path):
    """Five training steps through one compiled model: one Dynamo graph, its forward
    and backward, whatever the check; the planted relu bug is one failure, not one per
    step."""
    r = run_tcompile(
        "run", "--json", "--out", str(tmp_path), *check, str(TRAIN),
        "--steps", "5", "--bug", "accuracy",
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert _graphs(doc) == (1, ["backward", "forward"]), doc["graphs"]
    if check:
        assert r.returncode == 1, r.stderr[-2000:]
        assert [(f["kind"], f["graph"]) for f in doc["failures"]] == [("accuracy", 0)]
        divergence = doc["failures"][0]["divergence"]
        assert divergence["op"] == "relu" and divergence["kernel"], divergence
        assert "model.py" in divergence["source"]
    else:  # the wrong values go unseen -- and the report says they were not checked
        assert r.returncode == 0 and doc["verdict"] == "clean"
        assert "not checked" in doc["explanation"]
        assert doc["next_command"].startswith("tcompile run --accuracy")
    # the program's own output is the same: it trained the same steps
    assert "final loss" in r.stderr
    # torch's warning about tcompile's own wrappers never reaches the user
    assert "boxed arguments" not in r.stderr


def _interrupt_after(args, marker, tmp_path, sig=signal.SIGINT, timeout=300, delay=0.0):
    """tcompile ARGS in its own process group, interrupted ``delay`` seconds after its
    stderr shows ``marker``: (exit status, stdout, stderr)."""
    err_path = tmp_path / "stderr.txt"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [*tcompile_cmd(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        t0 = time.monotonic()
        while marker not in err_path.read_text() and time.monotonic() - t0 < timeout:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        out, _ = proc.communicate(timeout=120)
    return proc.returncode, out, err_path.read_text()


@pytest.mark.slow
def test_an_interrupted_run_prints_what_it_found(tmp_path):
    """Ctrl-C after a failure was found: exit 130 and one JSON document holding it."""
    code, out, err = _interrupt_after(
        ["run", "--json", "--accuracy", "--no-localize", "--out", str(tmp_path / "o"),
         str(TRAIN), "--steps", "100000", "--bug", "accuracy"],
        "accuracy failure in graph 0", tmp_path,
    )  # fmt: skip
    assert code == 130, err[-2000:]
    doc = json.loads(out)
    assert doc["exit_code"] == 130 and doc["interrupted"] is True
    assert [f["kind"] for f in doc["failures"]] == ["accuracy"]
    assert os.path.isfile(os.path.join(doc["run_dir"], "result.json"))


@pytest.mark.slow
def test_minify_interrupted_in_its_first_run_prints_one_document(tmp_path):
    """SIGTERM while minify's first run is still running: exit 130, one JSON document,
    and minify.json in the run's folder."""
    out_dir = tmp_path / "o"
    code, out, err = _interrupt_after(
        ["minify", "--json", "--out", str(out_dir), str(TRAIN), "--steps", "100000"],
        "a worker stops at the first failure", tmp_path, sig=signal.SIGTERM, delay=4,
    )  # fmt: skip
    assert code == 130, err[-2000:]
    doc = json.loads(out)
    assert doc["exit_code"] == 130 and doc["interrupted"] is True
    found = list(out_dir.glob("*/minify.json"))
    assert len(found) == 1 and json.loads(found[0].read_text())["exit_code"] == 130


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--json", "--no-such-flag", "x.py"],
        ["run", "--json", "no-such-script.py"],
        ["bisect", "--json", "--jobs", "0", "x.py"],
        ["minify", "--json", "--include", "nope.py", "--level", "program", str(TRAIN)],
    ],
)
def test_usage_errors_print_one_json_document(args):
    r = run_tcompile(*args, timeout=120)
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 2 and doc["verdict"] == "usage-error" and doc["error"]
    assert r.stderr.count("tcompile: error:") == 1

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
import sys
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
            # Ctrl-C as a terminal delivers it: an ignored SIGINT is inherited across exec.
            # Seen once in the whole suite: both interrupted tcompile processes ignored
            # SIGINT (/proc/PID/status SigIgn), the test process having started them
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        t0 = time.monotonic()
        while marker not in err_path.read_text() and time.monotonic() - t0 < timeout:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # never left running after the test
            raise
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


def _repro_runs_elsewhere(repro, tmp_path, want):
    """repro.py alone in another folder (no model.py beside it), no arguments: it
    reproduces -- the program's modules and arguments are in it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    alone = elsewhere / "repro.py"
    alone.write_text(open(repro).read())
    said = subprocess.run(
        [sys.executable, str(alone)], capture_output=True, text=True, cwd=elsewhere, timeout=600
    )
    assert said.returncode == 1 and f"REPRODUCED: {want}" in said.stdout, said
    return alone.read_text()


@pytest.mark.slow
@pytest.mark.extended  # 300 s; the source-level test below goes through the same program level
def test_a_two_file_program_with_arguments_minifies_to_a_verified_user_level_repro(tmp_path):
    """``--level program`` on train.py (argparse; Net from model.py): model.py is pasted
    in (its ``model.parameters()`` calls stay), ``--bug compile_error`` is carried, and
    repro.py reproduces on its own from another folder."""
    r = run_tcompile(
        "minify", "--json", "--level", "program", "--out", str(tmp_path / "o"),
        str(TRAIN), "--steps", "2", "--bug", "compile_error", timeout=1500,
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["verified"], doc["message"]
    prog = doc["program"]
    assert prog["includes"] == [str(TRAIN.parent / "model.py")], prog
    text = _repro_runs_elsewhere(doc["repro"], tmp_path, "InductorError: CppCompileError")
    assert "from model import" not in text and "compile_error" in text, text


@pytest.mark.slow
@pytest.mark.extended  # 300 s; test_minify_e2e's source level, and the program level below
def test_the_source_level_of_a_two_file_program(tmp_path):
    """``--level source``: the graph's repro, then the program shrunk around the graph's
    source lines -- the relu in model.py -- to a verified user-level repro."""
    r = run_tcompile(
        "minify", "--json", "--level", "source", "--out", str(tmp_path / "o"),
        str(TRAIN), "--steps", "2", "--bug", "compile_error", timeout=1500,
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["verified"], doc["message"]
    source = doc["source"]
    assert source["verified"], source
    assert source["includes"] == [str(TRAIN.parent / "model.py")], source
    assert any(line["file"].endswith("model.py") for line in doc["source_lines"])
    text = _repro_runs_elsewhere(source["repro"], tmp_path, "InductorError: CppCompileError")
    assert "torch.relu" in text, text


# extended (CI took 1951 s on 2026-11-29): the program level's search and its verified
# repro are test_minify_e2e's no-graph test and nanoGPT's; an interrupted minify's best so
# far is tests/e2e/test_trust.py's SIGTERM test
@pytest.mark.slow
@pytest.mark.extended
def test_program_level_on_a_clean_program_and_on_a_wrong_value(tmp_path):
    """``--level program``: a program that runs clean is "no compiler failure", exit 0;
    one whose compiled values are wrong (no exception) is found by checking each
    compiled call against eager, before any search (--json's exit code, level)."""
    clean = run_tcompile(
        "minify", "--json", "--level", "program", str(TRAIN), "--steps", "1", timeout=600
    )
    doc = json.loads(clean.stdout)
    assert clean.returncode == 0 and doc["exit_code"] == 0, doc
    assert doc["message"].startswith("no compiler failure") and doc["run_dir"] is None
    # the wrong value: the search starts (then is interrupted: its best so far stands)
    code, out, err = _interrupt_after(
        ["minify", "--json", "--level", "program", "--out", str(tmp_path / "o"),
         str(TRAIN), "--steps", "1", "--bug", "accuracy"],
        "candidate(s)", tmp_path,
    )  # fmt: skip
    assert "each torch.compile'd call checked against eager" in err, err[-3000:]
    doc = json.loads(out)
    assert code == 130 and doc["interrupted"] and doc["level"] == "program", doc["message"]
    assert "torch.compile's result differs from eager" in doc["signature"]
    # the best program so far is one file (model.py pasted in) with the script's
    # arguments: repro.py, unverified, already runs alone
    assert doc["program"]["includes"] == [str(TRAIN.parent / "model.py")]
    text = open(doc["repro"]).read()
    assert "from model import" not in text and "'--bug', 'accuracy'" in text, text


def test_the_program_repro_carries_its_arguments_and_refuses_other_errors(tmp_path):
    """The harness of a program-level repro.py: the program's arguments are set before
    it runs; an error that is not the failure minified (a module it cannot import) is
    ERROR, exit 2 -- never REPRODUCED."""
    from tcompile.compiler.program import ProgramFailure
    from tcompile.repro.program_harness import program_repro

    failure = ProgramFailure("exception", "ValueError", "bad", "", "x")
    body = "import sys\nif sys.argv[1:] == ['--bug', 'x']:\n    raise ValueError('bad')\n"
    path = tmp_path / "repro.py"
    path.write_text(program_repro(body, failure, argv=["--bug", "x"]))
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    assert ran.returncode == 1 and "REPRODUCED: ValueError: bad" in ran.stdout, ran
    path.write_text(program_repro("import no_such_module_here\n", failure))
    ran = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    assert ran.returncode == 2 and "REPRODUCED" not in ran.stdout, ran
    assert "ERROR: not ValueError: ModuleNotFoundError" in ran.stdout


def test_local_modules_are_pasted_in_without_renaming_variables(tmp_path):
    """``from model import Net`` beside a variable ``model``: inlining never turns
    ``model.parameters()`` into ``parameters()``; an included module's own
    ``__main__`` part and ``from __future__`` import do not break the program."""
    from tcompile.repro.program_files import inline_modules, local_modules

    (tmp_path / "model.py").write_text(
        "from __future__ import annotations\nimport helpers\n\n"
        "class Net:\n    def parameters(self) -> list[int]:\n        return [helpers.K]\n\n"
        "if __name__ == '__main__':\n    raise SystemExit('not when imported')\n"
    )
    (tmp_path / "helpers.py").write_text("K = 7\n")
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom model import Net\nmodel = Net()\nprint(model.parameters())\n"
    )
    found = local_modules(script)
    assert [p.name for p in found] == ["model.py", "helpers.py"]
    out = inline_modules(script.read_text(), found)
    assert "model.parameters()" in out and out.startswith("from __future__"), out
    ran = subprocess.run([sys.executable, "-c", out], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == "[7]", ran

"""CLI behaviour that needs no compile: help, start-up cost, usage errors."""

import json
import os
import re
import subprocess
import sys

import pytest

from helpers import run_tcompile


def test_help_imports_no_torch():
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from tcompile.cli.main import main\n"
        "r = CliRunner().invoke(main, ['--help'])\n"
        "r2 = CliRunner().invoke(main, ['run', '--help'])\n"
        "assert r.exit_code == 0 and r2.exit_code == 0, (r.output, r2.output)\n"
        "assert 'torch' not in sys.modules, 'torch imported by --help'\n"
        "assert 'rich' not in sys.modules, 'rich imported by --help'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "does_not_exist.py"], "script not found"),
        (["run", "fixtures"], "is a directory"),
        (["run"], "missing SCRIPT"),
        (["run", "--", "no-such-command-xyz"], "command not found"),
        (["run", "--bogus-flag", "fixtures/clean.py"], "no such option"),
    ],
)
def test_usage_errors_exit_2(args, needle):
    r = run_tcompile(
        *args, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    assert r.returncode == 2, r.stderr
    assert needle.lower() in r.stderr.lower()
    assert "Traceback" not in r.stderr


def test_syntax_error_is_the_scripts_problem(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef f(:\n    pass\n")
    r = run_tcompile("run", str(bad))
    assert r.returncode == 2
    assert "syntax error" in r.stderr and "bad.py:2" in r.stderr
    assert "script's problem" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_unreadable_script(tmp_path):
    s = tmp_path / "secret.py"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        if not os.path.exists("/proc/self/mem"):
            pytest.skip("root reads any file, and there is no /proc/self/mem")
        s.symlink_to("/proc/self/mem")  # reading it fails with EIO, even for root
    else:
        s.write_text("print(1)\n")
        s.chmod(0)
    r = run_tcompile("run", str(s))
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_unknown_backend():
    r = run_tcompile(
        "run",
        "--backend",
        "not_a_backend",
        "fixtures/clean.py",
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    )
    assert r.returncode == 2
    assert "unknown backend 'not_a_backend'" in r.stderr
    assert "inductor" in r.stderr


def test_script_without_torch_runs_clean(tmp_path):
    s = tmp_path / "plain.py"
    s.write_text("print('hello')\n")
    r = run_tcompile("run", "--json", "--out", str(tmp_path / "out"), str(s))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == 0 and doc["graphs"] == [] and doc["failures"] == []
    assert "hello" in r.stderr  # the script's stdout goes to stderr under --json


def test_script_failing_without_torch_is_exit_3(tmp_path):
    s = tmp_path / "boom.py"
    s.write_text("raise SystemExit('boom')\n")
    r = run_tcompile("run", "--json", "--out", str(tmp_path / "out"), str(s))
    assert r.returncode == 3, r.stderr
    assert json.loads(r.stdout)["verdict"] == "not-a-compiler-bug"


def test_version_names_the_torch_found():
    r = run_tcompile("--version")
    assert r.returncode == 0
    assert re.match(r"tcompile \d+\.\d+\.\d+ \(torch \S+, Python \S+\)$", r.stdout.strip())


@pytest.mark.parametrize("command", ["run", "minify", "bisect", "replay", "explain"])
def test_help_lists_exit_codes(command):
    r = run_tcompile(command, "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "Exit codes: 0 " in text and "2 bad input" in text and "130 interrupted" in text


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--timeout", "nan", "fixtures/clean.py"],
        ["run", "--timeout", "inf", "fixtures/clean.py"],
        ["minify", "--jobs", "1000000", "fixtures/clean.py"],
        ["minify", "--after", "never", "fixtures/clean.py"],
        ["replay"],
        ["no-such-command"],
    ],
)
def test_usage_errors_are_one_line(args):
    r = run_tcompile(
        *args, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    )
    assert r.returncode == 2, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("tcompile: error: "), r.stderr


def test_tcompile_option_after_script_is_warned(tmp_path):
    s = tmp_path / "plain.py"
    s.write_text("import sys; print(sys.argv[1:])\n")
    r = run_tcompile("run", "--json", str(s), "--accuracy")
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("tcompile: warning:")]
    assert len(warnings) == 1 and "--accuracy" in warnings[0] and "before SCRIPT" in warnings[0]
    assert "['--accuracy']" in r.stderr  # the script got it, as the contract says


def test_clean_run_keeps_no_temporary_directory(tmp_path):
    s = tmp_path / "plain.py"
    s.write_text("print('hello')\n")
    env = {"TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    r = run_tcompile("run", "--json", str(s), env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["run_dir"] is None
    assert list((tmp_path / "tmp").glob("tcompile-run-*")) == []


def test_piped_output_is_not_cut_to_80_columns(tmp_path):
    s = tmp_path / "boom.py"
    s.write_text("raise SystemExit('a' * 150)\n")
    r = run_tcompile("run", "--out", str(tmp_path / "out"), str(s))
    assert r.returncode == 3
    assert any(len(line) > 120 for line in r.stdout.splitlines()), r.stdout


def test_untested_torch_is_warned_once_at_start(tmp_path):
    """A command on a torch release this repository was not tested with says so in one
    line before anything else (the version is read from the package metadata)."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").write_text(json.dumps({"failures": [], "exit_code": 0}))
    code = (
        "import importlib.metadata as m, sys\n"
        "real = m.version\n"
        "m.version = lambda name: '2.99.0+cpu' if name == 'torch' else real(name)\n"
        "from tcompile.cli.main import main\n"
        f"sys.argv = ['tcompile', 'merge', {str(tmp_path / 'run')!r}]\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("tcompile: warning:")]
    assert r.returncode == 0 and len(warnings) == 1 and "torch 2.99.0" in warnings[0], r.stderr

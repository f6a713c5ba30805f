"""Issue 49: tcompile, torch and the program all under folders named ``tcompile``.

Following the README in a clone named ``tcompile`` puts the virtual environment, so
torch itself, under that folder.  A rule that took every path holding ``/tcompile/`` for
tcompile's own code then lost every frame of torch's and of the program's: a user's
shape error read as a capture failure (exit 1, triage ``bug``).  Here the checkout is
copied to a folder named ``tcompile``, a virtual environment made inside it, torch
installed into it (from the local wheel pip finds; other packages come from the
interpreter's own site-packages), tcompile installed from the copy; then a user-bug
fixture runs under that tcompile (exit 3, not a compiler bug) and the frame tests run
from the copy.  Slow: about a minute, most of it installing torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slow


def _copy_checkout(dest: Path) -> None:
    """The checkout's files as git sees them (tracked and new, not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


# extended (2026-11-29, the suite's time): whose code a path is, is compiler/owners.py's
# alone now (issue 60), its rules unit-tested in tests/unit/test_truth.py (by location)
@pytest.mark.extended
def test_everything_under_folders_named_tcompile(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("needs git")
    clone = tmp_path / "tcompile"
    _copy_checkout(clone)
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    import torch

    pin = f"torch=={torch.__version__.split('+')[0]}"
    for args in (
        ["--no-deps", "--ignore-installed", pin],
        ["--no-deps", "-e", str(clone)],
    ):
        done = subprocess.run(
            [py, "-m", "pip", "install", "--quiet", *args], capture_output=True, text=True
        )
        if done.returncode != 0 and args[-1] == pin:  # no torch wheel to be had here
            pytest.skip(f"cannot install {pin} here: {done.stderr.strip()[-300:]}")
        assert done.returncode == 0, done.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TCOMPILE", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    where = subprocess.run(
        [py, "-c", "import torch, tcompile; print(torch.__file__); print(tcompile.__file__)"],
        capture_output=True, text=True, env=env, cwd=clone, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(p).resolve().is_relative_to(clone) for p in where), where
    # a user's own shape error, its program in the copy too: not a compiler bug
    run = subprocess.run(
        [str(venv / "bin" / "tcompile"), "run", "--json", "linear_head_sized_for_32px.py"],
        capture_output=True, text=True, env=env, cwd=clone / "fixtures" / "user_bugs",
        stdin=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip
    doc = json.loads(run.stdout)
    assert run.returncode == 3 and doc["verdict"] == "not-a-compiler-bug", doc["explanation"]
    assert "linear_head_sized_for_32px.py:20" in doc["explanation"]
    # the frame tests, from the copy, with its tcompile and its torch
    tests = subprocess.run(
        [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_truth.py",
         "tests/unit/test_signature.py"],
        capture_output=True, text=True, env=env, cwd=clone, timeout=600,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:]

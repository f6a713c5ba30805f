"""Issue 59: the program level on public training repositories, as their users run them
(fixtures/projects/nanogpt: karpathy/nanoGPT; fixtures/projects/word_language_model:
pytorch/examples), each with a real bug written in as a user's model holds it
(their TCOMPILE.md).  Each test copies its project to a folder of its own: the programs
write checkpoints beside themselves.

* nanoGPT, pytorch#195320/#195282 (the SDPA pattern's permuted key): the program-level
  repro carries what the program reads -- ``configurator.py``, which ``train.py`` runs
  with ``exec(open(...).read())``, the config file that ``exec``s, the data -- and is
  verified from a copy in an empty folder (it died with FileNotFoundError, then printed
  ``ERROR: not RuntimeError: BackendCompilerFailed``);
* nanoGPT, the user's data bug (token ids past the vocabulary): exit 3, the compiled
  kernel's abort named;
* nanoGPT clean under ``--accuracy``: no failure, one run (its ``nn.Dropout(0.0)`` draws
  nothing: no second, watching-only run);
* word_language_model, pytorch#194976 (a float baked into the first AOTAutograd artifact):
  ``run --accuracy`` finds it -- tcompile's wrapping had kept training graphs out of
  the cache, and the bug never showed.

Slow: about five minutes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow

NANOGPT = ["train.py", "config/train_pydocs_char.py"]
WLM = ["main.py", "--data", "data/pydocs", "--model", "Transformer", "--emsize", "32",
       "--nhid", "64", "--nlayers", "1", "--nhead", "2", "--epochs", "5", "--bptt", "16",
       "--batch_size", "8", "--dry-run", "--compile"]  # fmt: skip


def _project(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(FIXTURES / "projects" / name, dest, ignore=shutil.ignore_patterns("out-*"))
    return dest


def _json(where: Path, *args: str, timeout: float = 900) -> dict:
    r = run_tcompile(*args[:1], "--json", *args[1:], cwd=str(where), timeout=timeout)
    doc = json.loads(r.stdout)
    assert r.returncode == doc["exit_code"], r.stderr[-3000:]
    return doc


def test_nanogpt_program_level_repro_carries_what_the_program_reads(tmp_path):
    proj = _project(tmp_path, "nanogpt")
    doc = _json(proj, "minify", "--level", "program", "--max-time", "45",
                "--out", str(tmp_path / "out"), *NANOGPT)  # fmt: skip
    assert doc["exit_code"] == 1 and doc["verified"], (doc["message"], doc.get("repro_output"))
    prog = doc["program"]
    files = set(prog["files"])
    assert {"configurator.py", "config/train_pydocs_char.py"} <= files, files
    assert any(f.startswith("data/pydocs_char/") for f in files), files
    assert not any(f.startswith(("compiler/", "repro/", "minifier/")) for f in files), files
    # the folder runs where the user's project is not: a copy in an empty folder
    repro = Path(doc["repro"])
    away = tmp_path / "elsewhere"
    shutil.copytree(repro.parent, away)
    ran = subprocess.run([sys.executable, repro.name], cwd=away, capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert ran.returncode == 1 and "REPRODUCED: RuntimeError" in ran.stdout, ran.stdout[-2000:]


@pytest.mark.extended  # the same abort in every command: tests/e2e/test_one_verdict.py
def test_nanogpt_users_data_bug_that_aborts_compiled_code_is_exit_3(tmp_path):
    proj = _project(tmp_path, "nanogpt")
    doc = _json(proj, "run", "--out", str(tmp_path / "out"), *NANOGPT,
                "--dataset=pydocs_char_stale", "--bidirectional=False")  # fmt: skip
    said = doc["explanation"]
    assert doc["exit_code"] == 3, said
    assert "IndexError" in said and "SIGABRT" in said and "index out of bounds" in said, said


def test_nanogpt_clean_under_accuracy_is_one_run(tmp_path):
    proj = _project(tmp_path, "nanogpt")
    doc = _json(proj, "run", "--accuracy", "--out", str(tmp_path / "out"), *NANOGPT,
                "--bidirectional=False", "--max_iters=2")  # fmt: skip
    assert doc["exit_code"] == 0, (doc["explanation"], doc["failures"])
    assert "passive" not in (doc.get("program") or {}), doc["notes"]  # no watching-only rerun


def test_word_language_model_stale_float_is_found_by_accuracy(tmp_path):
    proj = _project(tmp_path, "word_language_model")
    doc = _json(proj, "run", "--accuracy", "--out", str(tmp_path / "out"), *WLM,
                "--logit-cap", "0.5", "--save", str(tmp_path / "model.pt"))  # fmt: skip
    assert doc["exit_code"] == 1, doc["explanation"]
    (f,) = {(f["kind"], f["graph_kind"]) for f in doc["failures"]}
    assert f == ("accuracy", "forward"), doc["failures"]

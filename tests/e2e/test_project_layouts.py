"""Issue 50, end to end: the four project layouts of fixtures/projects (each with a bug
from PyTorch's tracker, the reporter's code kept) and one under torchrun, through run,
bisect, minify at graph and program level, report and triage.

In the suite: ``run`` on each layout (the packages pasted into one file:
tests/unit/test_projects.py, fast; the program level on a real project with its config:
tests/e2e/test_training_repos.py).  The program-level minify of ``-m trainer.main --config
configs/run.yaml`` and the rest: ``extended`` (TCOMPILE_TEST_EXTENDED=1; the suite stays
under 30 minutes)."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from tests.helpers import run_tcompile

PROJECTS = Path(__file__).resolve().parents[2] / "fixtures" / "projects"
SRC = {"PYTHONPATH": "src"}  # the src/ layout, as `pip install -e .` would make it importable

pytestmark = pytest.mark.slow


def _minify_program(tmp_path: Path, layout: str, *argv: str, env=None) -> dict:
    r = run_tcompile(
        "minify", "--json", "--level", "program", "--out", str(tmp_path / layout), *argv,
        cwd=str(PROJECTS / layout), env=env, timeout=1200,
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["exit_code"] == 1, (doc["message"], r.stderr[-3000:])
    prog = doc["program"]
    assert doc["verified"] and doc["not_verified"] is None, doc["message"]
    # one count of candidates: the message, --json's calls and program.candidates
    assert prog["candidates"] == doc["calls"] and f"in {doc['calls']} candidates" in doc["message"]
    counts = [int(w) for w in _after(r.stderr, " lines after ", " candidate(s)")]
    assert counts and max(counts) <= doc["calls"], counts
    return doc


def _after(text: str, start: str, end: str) -> list[str]:
    return [
        ln.split(start)[1].split(end)[0] for ln in text.splitlines() if start in ln and end in ln
    ]


def _own_imports(repro: str, names: set[str]) -> list[str]:
    """The imports of the project's own modules left in a repro (none: it stands alone)."""
    tree = ast.parse(Path(repro).read_text())
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").split(".")[0] in names):
            found.append(ast.unparse(n))
        elif isinstance(n, ast.Import):
            found += [a.name for a in n.names if a.name.split(".")[0] in names]
    return found


@pytest.mark.extended  # the program level on a real project: test_training_repos (nanoGPT)
def test_a_module_run_with_python_m_and_a_config_is_minified_alone(tmp_path):
    """``python -m trainer.main --config configs/run.yaml`` (#190421): the package's
    modules pasted in (its __init__ first, relative imports), the config carried where
    the minimal program still reads it, repro.py verified from an empty folder."""
    doc = _minify_program(
        tmp_path, "module_config", "-m", "trainer.main", "--config", "configs/run.yaml"
    )
    prog = doc["program"]
    assert prog["module"] == "trainer.main"
    assert {Path(p).name for p in prog["includes"]} == {"__init__.py", "config.py", "metrics.py"}
    assert "OverflowError" in doc["signature"], doc["signature"]
    assert not _own_imports(doc["repro"], {"trainer"}), Path(doc["repro"]).read_text()
    assert prog["lines_after"] < prog["lines_before"]
    for rel in prog["files"]:  # what it still reads lies beside it
        assert (Path(prog["repro_dir"]) / rel).is_file(), prog


@pytest.mark.parametrize(
    "layout, argv, env, kind",
    [
        ("src_layout", ["train.py"], SRC, "compile"),
        ("module_config", ["-m", "trainer.main", "--config", "configs/run.yaml"], None, "compile"),
    ],
)  # fmt: skip
def test_run_classifies_each_layout(tmp_path, layout, argv, env, kind):
    """The layouts run unmodified, as their users run them: one compiler failure each,
    of the bug's kind (never "not a compiler bug": the program's modules import)."""
    r = run_tcompile(
        "run", "--json", "--out", str(tmp_path), *argv, cwd=str(PROJECTS / layout), env=env,
        timeout=600,
    )  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["exit_code"] == 1, doc.get("explanation")
    assert [f["kind"] for f in doc["failures"]][:1] == [kind], doc["failures"]


@pytest.mark.extended
@pytest.mark.parametrize(
    "layout, argv, env, names",
    [
        ("pkg_init", ["train.py"], None, {"nets", "utils"}),
        ("src_layout", ["train.py"], SRC, {"splitnet"}),
        ("deep_relative", ["run.py"], None, {"lib"}),
        ("textcls", ["run.py"], None, {"textcls"}),
    ],
)  # fmt: skip
def test_the_other_layouts_minify_at_the_program_level(tmp_path, layout, argv, env, names):
    doc = _minify_program(tmp_path, layout, *argv, env=env)
    assert not _own_imports(doc["repro"], names), Path(doc["repro"]).read_text()


@pytest.mark.extended
def test_a_package_under_torchrun_minifies_and_bisects(tmp_path):
    """train_ddp.py imports the package under torchrun (gloo, two ranks): the failure
    shows on every rank, so candidates run as one process; repro.py stands alone."""
    doc = _minify_program(
        tmp_path, "pkg_init", "--", "torchrun", "--nproc-per-node", "2", "train_ddp.py"
    )
    assert doc["program"]["single_process"], doc["program"]
    assert not _own_imports(doc["repro"], {"nets", "utils"})


@pytest.mark.extended
def test_bisect_report_and_triage_on_the_projects(tmp_path):
    """bisect names inductor's stage for the split bug (#197080), the graph-level minify
    verifies its repro.py; report writes report.md
    with a verified repro; triage finds the projects' scripts, not their modules."""
    b = run_tcompile(
        "bisect", "--json", "--out", str(tmp_path / "b"), "train.py",
        cwd=str(PROJECTS / "src_layout"), env=SRC, timeout=900,
    )  # fmt: skip
    doc = json.loads(b.stdout)
    assert b.returncode == 1 and doc["stage"] == "inductor", doc["message"]
    g = run_tcompile(
        "minify", "--json", "--out", str(tmp_path / "g"), "train.py",
        cwd=str(PROJECTS / "src_layout"), env=SRC, timeout=900,
    )  # fmt: skip
    doc = json.loads(g.stdout)
    assert g.returncode == 1 and doc["level"] == "graph" and doc["verified"], doc["message"]
    rep = run_tcompile(
        "report", "--json", "--out", str(tmp_path / "r"), "run.py",
        cwd=str(PROJECTS / "deep_relative"), timeout=1500,
    )  # fmt: skip
    doc = json.loads(rep.stdout)
    assert rep.returncode == 1 and os.path.isfile(doc["report"]), doc.get("message")
    t = run_tcompile(
        "triage", "--json", "--jobs", "2", "--out", str(tmp_path / "t"),
        str(PROJECTS / "deep_relative"), str(PROJECTS / "pkg_init" / "train.py"), timeout=2400,
    )  # fmt: skip
    doc = json.loads(t.stdout)
    verdicts = {Path(s["path"]).name: s["verdict"] for s in doc["scripts"]}
    assert verdicts == {"run.py": "bug", "train.py": "bug"}, verdicts

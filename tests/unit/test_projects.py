"""Issue 50: a program is a project (repro/project.py, program_files.py,
compiler/child/opened.py) -- pure, no compiles: ``-m pkg.mod``, a src/ layout, an
editable install, the data files a run opened, installed packages named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tcompile.compiler.exitcodes import UsageError
from tcompile.repro.program_files import inline_modules, program_files
from tcompile.repro.project import data_files, entry_of, installed_versions

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "projects"


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _runs_alone(source: str, tmp_path: Path, *argv: str) -> str:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    (empty / "prog.py").write_text(source)
    ran = subprocess.run(
        [sys.executable, "prog.py", *argv], capture_output=True, text=True, cwd=empty
    )
    assert ran.returncode == 0, (ran.stderr[-2000:], source)
    return ran.stdout.strip()


def test_python_m_runs_the_module_with_its_package_first(tmp_path, monkeypatch):
    """``-m app.main``: the module's file, its dotted name, the working folder its
    imports resolve from; ``app/__init__.py`` runs first (a side effect), relative
    imports of the module itself resolve from its package."""
    _tree(tmp_path, {
        "app/__init__.py": "ORDER = ['app']\n",
        "app/main.py": "from . import ORDER\nfrom .model import twice\nORDER.append('main')\n"
                       "print(twice(21), ORDER)\n",
        "app/model.py": "def twice(x):\n    return 2 * x\n",
    })  # fmt: skip
    monkeypatch.chdir(tmp_path)
    entry = entry_of([sys.executable, "-m", "app.main", "--lr", "1"])
    assert entry.script == tmp_path / "app" / "main.py" and entry.module == "app.main"
    assert entry.argv == ["--lr", "1"] and entry.roots[0] == tmp_path
    files = program_files(entry.script, None, list(entry.roots), entry.module)
    assert {f.name for f in files[1:]} == {"__init__.py", "model.py"}
    out = inline_modules(entry.script.read_text(), files[1:], roots=list(entry.roots),
                         current=entry.module)  # fmt: skip
    assert _runs_alone(out, tmp_path) == "42 ['app', 'main']"
    with pytest.raises(UsageError, match="no module app.nope"):
        entry_of([sys.executable, "-m", "app.nope"])


def test_a_package_main_runs_as_python_m_pkg(tmp_path, monkeypatch):
    _tree(tmp_path, {
        "tool/__init__.py": "",
        "tool/__main__.py": "from .core import go\nprint(go())\n",
        "tool/core.py": "def go():\n    return 'went'\n",
    })  # fmt: skip
    monkeypatch.chdir(tmp_path)
    entry = entry_of([sys.executable, "-m", "tool"])
    assert entry.script.name == "__main__.py" and entry.module == "tool.__main__"
    files = program_files(entry.script, None, list(entry.roots), entry.module)
    out = inline_modules(entry.script.read_text(), files[1:], roots=list(entry.roots),
                         current=entry.module)  # fmt: skip
    assert _runs_alone(out, tmp_path) == "went"


def test_a_src_layout_resolves_from_src_and_pythonpath(tmp_path, monkeypatch):
    """pyproject.toml and src/pkg: the script's imports of ``pkg`` resolve from src/
    (installed editable or PYTHONPATH=src), never from site-packages."""
    _tree(tmp_path, {
        "pyproject.toml": "[project]\nname = 'pkg'\n",
        "src/pkg/__init__.py": "from .core import scale\n",
        "src/pkg/core.py": "import json\n\ndef scale(x):\n    return json.dumps(x * 3)\n",
        "scripts/train.py": "import pkg\nimport torch.nn\nprint(pkg.scale(2))\n",
    })  # fmt: skip
    monkeypatch.delenv("PYTHONPATH", raising=False)
    entry = entry_of([sys.executable, str(tmp_path / "scripts" / "train.py")])
    assert entry.project == tmp_path and tmp_path / "src" in entry.roots
    files = program_files(entry.script, None, list(entry.roots))
    assert {f.name for f in files[1:]} == {"__init__.py", "core.py"}
    out = inline_modules(entry.script.read_text(), files[1:], roots=list(entry.roots))
    assert "import pkg" not in out and "import torch.nn" in out, out  # torch: installed
    assert _runs_alone(out, tmp_path) == "6"


def test_the_project_files_a_run_opened_go_beside_the_repro(tmp_path, monkeypatch):
    """child/opened.py records what a run opens; data_files keeps the project's (a
    config named relatively, a vocabulary found from __file__, a Python file read as
    data -- nanoGPT's ``exec(open('configurator.py').read())`` --, a module imported
    by path or one the pasting did not find: the program level pastes the modules its
    top-level imports name, so a run imports only the others), not a file the program wrote before reading it (a checkpoint it saves and loads back),
    not tcompile's run folder, not what lies outside the project (issue 59)."""
    _tree(tmp_path, {
        "proj/configs/run.yaml": "width: 8\n",
        "proj/data/vocab.txt": "a b c\n",
        "proj/configurator.py": "X = 1\n",
        "proj/bypath.py": "Y = 2\n",
        "proj/imported.py": "Z = 3\n",
        "proj/out/minify-001/target.json": "{}",
        "elsewhere/secret.txt": "no\n",
    })  # fmt: skip
    proj = tmp_path / "proj"
    record = tmp_path / "opened.jsonl"
    program = (
        "import os, sys, importlib.util\n"
        "from tcompile.compiler.child import opened\n"
        f"opened.record({str(record)!r})\n"
        "import imported\n"
        "open('configs/run.yaml').read()\n"
        "open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'vocab.txt')).read()\n"
        "exec(open('configurator.py').read()); open('out/minify-001/target.json').read()\n"
        "spec = importlib.util.spec_from_file_location('bp', 'bypath.py')\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        f"open({str(tmp_path / 'elsewhere' / 'secret.txt')!r}).read()\n"
        "open('written.txt', 'w').write('x'); open('written.txt').read()\n"
    )
    (proj / "train.py").write_text(program)
    ran = subprocess.run([sys.executable, "train.py"], cwd=proj, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    how = {(r["given"].rsplit("/", 1)[-1], r["how"]) for r in rows}
    assert {("imported.py", "import"), ("configurator.py", "read"), ("written.txt", "write")} <= how
    monkeypatch.chdir(proj)
    entry = entry_of([sys.executable, "train.py"])
    kept = data_files(record, entry, exclude=proj / "out")
    assert sorted(rel for _, rel in kept) == [
        "bypath.py", "configs/run.yaml", "configurator.py", "data/vocab.txt", "imported.py"
    ], kept  # fmt: skip


def test_installed_packages_are_named_with_versions():
    source = "import os\nimport torch\nimport yaml\nfrom rich.console import Console\n"
    found = installed_versions(source)
    assert "torch" not in found and "os" not in found
    assert set(found) >= {"pyyaml", "rich"} and all(found.values()), found


@pytest.mark.parametrize(
    "layout, command, names",
    [
        ("pkg_init", ["train.py"], {"__init__.py", "stats.py", "utils.py"}),
        ("deep_relative", ["run.py"],
         {"__init__.py", "util.py", "registry.py", "masks.py"}),
        ("module_config", ["-m", "trainer.main"],
         {"__init__.py", "config.py", "metrics.py"}),
        ("src_layout", ["train.py"], {"__init__.py", "evaluate.py", "model.py"}),
    ],
)  # fmt: skip
def test_the_fixture_projects_paste_into_one_file(layout, command, names, monkeypatch):
    """Each fixture layout's own code is found and pasted: nothing of the project is
    imported by the one file (checked by reading it; the e2e tests run them)."""
    import ast

    monkeypatch.chdir(FIXTURES / layout)
    monkeypatch.delenv("PYTHONPATH", raising=False)  # src/ is found from pyproject.toml
    if command[0] == "-m":
        entry = entry_of([sys.executable, *command])
    else:
        entry = entry_of([sys.executable, str(FIXTURES / layout / command[0])])
    files = program_files(entry.script, None, list(entry.roots), entry.module, entry.project)
    assert {f.name for f in files[1:]} == names, files
    out = inline_modules(entry.script.read_text(), files[1:], roots=list(entry.roots),
                         current=entry.module)  # fmt: skip
    tops = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(ast.parse(out)) if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }  # fmt: skip
    assert not any(
        t.split(".")[0] in {"nets", "utils", "lib", "trainer", "splitnet", "src"} for t in tops
    ), tops
    assert not any(getattr(n, "level", 0) for n in ast.walk(ast.parse(out))), out


def test_a_candidate_finds_files_from_where_the_program_lives(tmp_path):
    """Candidates run from folders of their own: ``__file__`` is the program's path,
    after the docstring and ``from __future__`` imports."""
    from tcompile.compiler.program import with_prelude

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.txt").write_text("found")
    src = '"""doc"""\nfrom __future__ import annotations\nimport os\n'
    src += "print(open(os.path.join(os.path.dirname(__file__), 'configs', 'a.txt')).read())\n"
    out = with_prelude("", src, str(tmp_path / "train.py"))
    assert out.startswith('"""doc"""\nfrom __future__ import annotations\n__file__ = '), out
    assert _runs_alone(out, tmp_path) == "found"

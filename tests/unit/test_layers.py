"""The house's rules (docs/layout.md), checked on the source: no compiles, no torch.

* no import cycles between files (a deferred import counts: a cycle that survives only
  because an import is deferred is still a cycle);
* compiler/child/ runs only inside the user's process: nothing outside it imports it
  (the bootstrap and the strings naming a child entry point aside);
* only cli/ imports rich and click; minifier/ imports nothing of tcompile but itself;
* the contract and the parent-side modules do not import torch when imported;
* no module over 500 lines, no function over 100.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import house  # noqa: E402

GRAPH = house.graph()
MODULES = house.modules()


def _external_imports(name: str) -> set[str]:
    """Top names of every import in a module (rich, click, torch, ...)."""
    import ast

    tree = ast.parse(MODULES[name].read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
    return out


def test_no_import_cycles():
    assert house.cycles(GRAPH) == []


def test_child_is_imported_only_from_child():
    child = "tcompile.compiler.child"
    offenders = {
        mod: sorted(m for m in deps if m.startswith(child))
        for mod, deps in GRAPH.items()
        if not mod.startswith(child) and any(m.startswith(child) for m in deps)
    }
    assert offenders == {}


@pytest.mark.parametrize("lib", ["rich", "click"])
def test_only_cli_imports(lib):
    users = sorted(m for m in MODULES if lib in _external_imports(m))
    assert users and all(m.startswith("tcompile.cli") for m in users), users


def test_minifier_imports_nothing_of_tcompile():
    for mod, deps in GRAPH.items():
        if mod.startswith("tcompile.minifier"):
            assert all(d.startswith("tcompile.minifier") for d in deps), (mod, deps)


def test_compiler_needs_only_the_minifiers_verdict_and_interval_search():
    allowed = {
        "tcompile",
        "tcompile.minifier",
        "tcompile.minifier.verdict",
        "tcompile.minifier.interval",
    }
    for mod, deps in GRAPH.items():
        if mod.startswith("tcompile.compiler"):
            outside = {d for d in deps if not d.startswith("tcompile.compiler")}
            assert outside <= allowed, (mod, outside)


def test_the_interval_search_is_pure():
    """minifier/interval.py: imported by the child process and the parent alike."""
    assert _external_imports("tcompile.minifier.interval") <= {"__future__", "collections"}
    assert not GRAPH["tcompile.minifier.interval"]


def test_one_interval_search():
    """Interval arithmetic (a midpoint, a bracket narrowed to adjacent points) lives in
    minifier/interval.py only: every boundary search goes through it."""
    import re

    midpoint = re.compile(r"\((lo|a|x) \+ (hi|b|y)\) // 2|\b(lo|a) \+ 1 < (hi|b)\b|while lo < hi")
    offenders = [
        f"{name}:{i}"
        for name, path in MODULES.items()
        if name != "tcompile.minifier.interval"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if midpoint.search(line)
    ]
    assert offenders == []


def test_dependency_direction():
    """cli -> jobs -> {repro, compiler, minifier}; repro -> {compiler, minifier};
    nothing -> cli (but the entry point, ``python -m tcompile``, as the ``tcompile``
    script); nothing but cli -> jobs (every command is one job, in jobs/)."""
    for mod, deps in GRAPH.items():
        if not mod.startswith("tcompile.cli") and mod != "tcompile.__main__":
            assert not any(d.startswith("tcompile.cli") for d in deps), (mod, deps)
        if not mod.startswith(("tcompile.cli", "tcompile.repro.jobs")):
            assert not any(d.startswith("tcompile.repro.jobs") for d in deps), (mod, deps)
        if not mod.startswith(("tcompile.cli", "tcompile.repro.jobs", "tcompile.repro")):
            assert not any(d.startswith("tcompile.repro") for d in deps), (mod, deps)


def test_every_job_is_in_jobs():
    """The CLI runs a command through one job of jobs/; below them it reaches only for
    the contract's types and for argument checks (each allowed module says why)."""
    allowed = {
        "tcompile": "the version",
        "tcompile.compiler.accuracy": "AccuracyMode, an option's type",
        "tcompile.compiler.exitcodes": "exit codes",
        "tcompile.compiler.failure": "Failure rows, rendered",
        "tcompile.compiler.signature": "FailureKind, rendered",
        "tcompile.compiler.stack": "the torch version warning",
        "tcompile.compiler.runner": "check_script / check_backend: bad input, before any job",
        "tcompile.repro.environment": "`tcompile env` prints the environment, no job",
        "tcompile.repro.project": "-m MODULE: the module's file is found, before any job",
    }
    below = {
        d
        for m, deps in GRAPH.items()
        if m.startswith("tcompile.cli")
        for d in deps
        if not d.startswith(("tcompile.cli", "tcompile.repro.jobs"))
    }
    assert below <= set(allowed), sorted(below - set(allowed))
    src = "".join(MODULES[m].read_text() for m in MODULES if m.startswith("tcompile.cli"))
    assert "run_process" not in src and "Pool(" not in src  # no program run outside a job


def test_parent_side_imports_no_torch():
    parent = [
        m
        for m in MODULES
        if m.startswith(("tcompile.compiler", "tcompile.cli", "tcompile.minifier.verdict"))
        and not m.startswith("tcompile.compiler.child")
    ] + [
        f"tcompile.repro.jobs.{m}"
        for m in (
            "classify", "bisection", "bisect_report", "peers", "guided", "replay", "explain",
            "merge", "minify_job",
        )
    ] + ["tcompile.repro.verify"]  # fmt: skip
    code = (
        "import importlib, json, sys\n"
        f"bad = [m for m in {parent!r} if importlib.import_module(m) and 'torch' in sys.modules]\n"
        "print(json.dumps(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_sizes():
    mods, funcs = house.sizes()
    assert [m for m in mods if m[0] > 500] == []
    assert [f for f in funcs if f[0] > 100] == []


@pytest.mark.parametrize(
    "package", ["cli", "compiler", "compiler/child", "minifier", "repro", "repro/jobs"]
)
def test_package_docstrings_list_their_modules(package):
    """A newcomer reads a package's docstring first: it names every module in it."""
    import ast

    folder = ROOT / package
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    listed = set(re.findall(r"^\s*(\w+)\.py\s", doc, re.M))
    present = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert listed == present, (sorted(present - listed), sorted(listed - present))


# The jobs: what a command runs, all in jobs/.  The oracle and the writers sit below them.
JOBS = {m for m in MODULES if m.startswith("tcompile.repro.jobs")}
ORACLE = [
    f"tcompile.compiler.{m}"
    for m in ("signature", "accuracy", "collect", "program", "probe", "pool", "capture_pool")
]
WRITERS = [
    f"tcompile.repro.{m}"
    for m in (
        "artifacts", "writer", "writer_full", "snippets", "module", "inputs", "capture_writer",
        "program_harness", "kernel", "kernel_repro", "launcher", "launcher_template", "verify",
        "environment", "triage_page", "triage_cluster",
    )
]  # fmt: skip


@pytest.mark.parametrize("mod", ORACLE + WRITERS)
def test_the_oracle_and_the_writers_import_no_job(mod):
    """The oracle (same failure? wrong values?) and the writers serve every job; none
    of them reaches up into one (classify.py was both the collector and the run job)."""
    assert not set(GRAPH[mod]) & JOBS, (mod, sorted(set(GRAPH[mod]) & JOBS))


def test_the_search_problem_imports_no_format():
    """One search problem (problem.py, its fixed point fixpoint.py) over a format: it
    imports no format -- graphs, source, inputs are its parameters -- and every format
    is a Problem of it: the graph engine, the source engine and input shrinking.  The
    one gate (gate.py) knows no case at all."""
    one = {"tcompile.minifier.problem", "tcompile.minifier.fixpoint", "tcompile.minifier.ddmin"}
    allowed = {"tcompile.minifier.gate", "tcompile.minifier.interval", "tcompile.minifier.verdict"}
    for mod in one:
        assert set(GRAPH[mod]) <= allowed | one, (mod, GRAPH[mod])
    assert set(GRAPH["tcompile.minifier.interval"]) <= allowed
    assert set(GRAPH["tcompile.minifier.gate"]) <= {"tcompile.minifier.verdict"}
    assert set(GRAPH["tcompile.minifier.engine"]) <= allowed | one | {"tcompile.minifier.graph"}
    for fmt in ("tcompile.minifier.engine", "tcompile.minifier.source_case",
                "tcompile.repro.shrink"):  # fmt: skip
        assert "tcompile.minifier.problem" in GRAPH[fmt], fmt
    # one fixed point: both drivers are fixpoint.reduce
    for driver in ("tcompile.minifier.reduce", "tcompile.minifier.source"):
        assert "tcompile.minifier.fixpoint" in GRAPH[driver], driver


def test_one_module_owns_the_run_folders_layout():
    """Every file name a job writes into its run folder is compiler/layout.py's: no
    module spells one as a string of its own."""
    import ast

    from tcompile.compiler import layout

    names = {
        v for k, v in vars(layout).items()
        if k.isupper() and isinstance(v, str) and "." in v
    }  # fmt: skip
    offenders = []
    for name, path in MODULES.items():
        if name == "tcompile.compiler.layout":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                offenders.append(f"{name}:{node.lineno} {node.value!r}")
    assert offenders == []


def test_every_artifact_is_written_one_way():
    """The writers (repro/) and the parent's modules write files only through
    layout.write_file: whole or not at all, deleted on failure (the child, in the
    user's process, writes its event stream as it goes)."""
    offenders = []
    for name, path in MODULES.items():
        if (
            name == "tcompile.compiler.layout"
            or ".child." in name
            or name.startswith("tcompile.cli")
        ):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#")[0]
            if re.search(r"\.write_(text|bytes)\(|os\.replace\(|open\([^)]*[\"']w", code):
                offenders.append(f"{name}:{i} {line.strip()}")
    allowed = {  # not artifacts, each for its reason
        "tcompile.repro.jobs.classify": "a finished run's file moved, not written",
        "tcompile.compiler.pool": "a worker's log and pipe: streams",
        "tcompile.compiler.program": "os.devnull",
        "tcompile.compiler.trust": "the key, created 0600 through os.open",
        "tcompile.minifier.checkpoint": "the pure search imports nothing of tcompile",
        "tcompile.minifier.observe": "written inside the candidate program, as it runs",
    }
    assert [o for o in offenders if o.split(":")[0] not in allowed] == []


def test_write_file_is_whole_or_nothing(tmp_path, monkeypatch):
    import os

    from tcompile.compiler import layout

    path = layout.write_file(tmp_path / "repro.py", "print(1)\n", mode=0o755)
    assert path.read_text() == "print(1)\n" and os.access(path, os.X_OK)

    def fail(*a):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        layout.write_file(path, "print(2)\n")
    assert path.read_text() == "print(1)\n"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repro.py"]  # no temporary left


def test_failure_kinds_and_accuracy_modes_are_compared_as_their_enums():
    """A failure's kind is a FailureKind and --accuracy an AccuracyMode from the CLI to
    the writers: no module compares one with a string of its own."""
    kinds = "crash|capture|accuracy|compile|runtime|timeout"
    pattern = re.compile(
        rf'kind (==|!=) "({kinds})"|kind in \("({kinds})"|accuracy (==|!=) "(off|loose|strict)"'
    )
    offenders = [
        f"{name}:{i}"
        for name, path in MODULES.items()
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_the_cli_composes_nothing():
    """Each command calls one job: no CLI module imports two of them (bisect's minify
    and report.md, minify's record / launcher / program are repro/jobs/pipelines.py's)."""
    for name in ("tcompile.cli.main", "tcompile.cli.minify_cmd"):
        deps = set(GRAPH[name])
        assert not deps & {"tcompile.repro.jobs.minify_job", "tcompile.repro.report_after",
                           "tcompile.repro.jobs.launcher_job", "tcompile.repro.jobs.capture_job"}, (
            name, sorted(deps & JOBS))  # fmt: skip


def test_the_unit_folder_holds_only_fast_tests():
    """tests/unit is what `-m "not slow"` runs in seconds (docs/layout.md, Development):
    a slow test belongs in tests/e2e."""
    marked = re.compile(r"^\s*(@pytest\.mark\.slow|pytestmark = .*slow)", re.M)
    unit = (ROOT / "tests" / "unit").glob("test_*.py")
    slow = [p.name for p in unit if marked.search(p.read_text())]
    assert slow == [], slow

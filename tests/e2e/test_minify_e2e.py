"""End-to-end `tcompile minify` on fixtures: real compiles, real workers, and the
repro verified by tcompile in a fresh process.  Results come from --json."""

import json
import os
import subprocess
import sys

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def minify(tmp_path, fixture, *flags):
    r = run_tcompile("minify", "--json", "--out", str(tmp_path), *flags, str(FIXTURES / fixture))
    assert "Traceback" not in r.stdout, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == r.returncode
    return doc


def repro_module_body(doc):
    text = open(doc["repro"]).read()
    start = text.index("class Repro(torch.nn.Module):")
    body = text[start:].split("\n\n", 1)[0]
    return [
        ln.strip()
        for ln in body.splitlines()[2:]
        if ln.strip() and not ln.strip().startswith("return")
    ]


def run_repro(path, *args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, str(path), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def compile_error_minified(tmp_path_factory):
    return minify(tmp_path_factory.mktemp("compile_error"), "cpp_relu_compile_error.py", "--report")


# the accuracy variant is minified by tests/e2e/test_bisect_e2e.py (bisect --minify)
@pytest.mark.parametrize(
    "fixture, flags, op",
    [
        ("cpp_relu_compile_error.py", [], "torch.relu"),
        # the same path as the compile error (the runtime kind: tests/e2e/test_run_e2e.py)
        pytest.param("cpp_relu_runtime_error.py", [], "torch.relu", marks=pytest.mark.extended),
        ("cpp_throw_crash.py", [], "torch.relu"),  # kills its worker: tcompile carries on
    ],
)
def test_cpp_relu_bugs_minify_to_the_relu(fixture, flags, op, tmp_path, request):
    if fixture == "cpp_relu_compile_error.py":
        doc = request.getfixturevalue("compile_error_minified")
        tmp_path = __import__("pathlib").Path(doc["run_dir"]).parent
    else:
        doc = minify(tmp_path, fixture, *flags)
    assert doc["exit_code"] == 1 and doc["verified"], doc
    (line,) = repro_module_body(doc)
    assert f"= {op}(" in line
    assert doc["nodes_after"] == 1 and doc["nodes_before"] > 1
    for key in (
        "repro",
        "launcher",
        "nodes_before",
        "nodes_after",
        "calls",
        "seconds",
        "signature",
        "verified",
    ):
        assert key in doc
    # everything under --out, nothing in the working directory
    assert doc["repro"].startswith(str(tmp_path)) and doc["launcher"].startswith(str(tmp_path))
    # tcompile verified it (fresh process, no tcompile importable); once here too: it
    # runs from another directory with only torch, and says what it found
    if fixture == "cpp_relu_compile_error.py":
        # the generated code beside it, the kernel that holds the culprit first
        assert doc["kernel"].endswith("kernel.cpp") and os.path.isfile(doc["kernel"])
        kernel = open(doc["kernel"]).read()
        first = kernel.split("extern", 2)[1] if "extern" in kernel else kernel
        assert "relu" in kernel[:2000] or "relu" in first, kernel[:500]
        # --report: report.md beside it, in the shape of PyTorch's bug template
        report = open(doc["report"]).read()
        assert report.startswith("# [inductor]") and "### Versions" in report and "relu" in report
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        proc = run_repro(doc["repro"], cwd=elsewhere)
        assert proc.returncode == 1
        assert f"REPRODUCED: {doc['signature']}" in proc.stdout
        assert run_repro(doc["repro"], "--backend", "eager", cwd=elsewhere).returncode == 0
    assert doc["eager_passes"] is True
    if fixture == "cpp_throw_crash.py":
        assert doc["worker_restarts"] >= 1


def test_strict_accuracy_picks_the_bug_only_it_sees(tmp_path):
    strict = minify(tmp_path / "strict", "two_bugs.py", "--strict-accuracy")
    assert strict["verified"]
    (strict_line,) = repro_module_body(strict)
    assert "* 3.0" in strict_line  # the scaling only strict accuracy sees
    assert "StrictAccuracyError" in strict["signature"]


@pytest.mark.extended  # the loose check's minify: tests/e2e/test_bisect_e2e.py (--minify)
def test_loose_accuracy_picks_the_other_bug(tmp_path):
    loose = minify(tmp_path / "loose", "two_bugs.py", "--accuracy")
    assert loose["verified"]
    (loose_line,) = repro_module_body(loose)
    assert " + " in loose_line  # the add the pass turned into a sub
    assert "StrictAccuracyError" not in loose["signature"]


def test_custom_backend_after_dynamo_ends_at_the_rejected_op(tmp_path):
    doc = minify(tmp_path, "custom_backend.py", "--after", "dynamo")
    assert doc["verified"], doc
    (line,) = repro_module_body(doc)
    assert "torch.relu(" in line
    assert "def my_compiler" in open(doc["repro"]).read()  # the user's backend travels along


@pytest.mark.extended  # since 2026-11-29 (the suite's time): test_families minifies a
# real lost validation at the auto level, a decomposition's graph
def test_decomposition_bug_auto_level(tmp_path):
    doc = minify(tmp_path, "bad_decomposition.py", "--accuracy")
    assert doc["verified"], doc
    (line,) = repro_module_body(doc)
    assert "silu" in line
    assert "def bad_silu" in open(doc["repro"]).read()


def test_dynamic_shapes_kept(tmp_path):
    doc = minify(tmp_path, "dynamic_shapes.py", "--accuracy")
    assert doc["verified"], doc
    text = open(doc["repro"]).read()
    assert "DYNAMIC = True" in text or "'dynamic': True" in text
    (line,) = repro_module_body(doc)
    assert "torch.relu(" in line


def test_launcher_run_and_corrupt_launchers(tmp_path, compile_error_minified):
    launcher = compile_error_minified["launcher"]
    proc = subprocess.run(
        [sys.executable, launcher, "run"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1 and "REPRODUCED" in proc.stdout
    foreign = tmp_path / "minifier_launcher.py"
    foreign.write_text("# torch's own launcher\nimport torch\n")
    r = run_tcompile("minify", str(foreign))
    assert r.returncode == 2 and "not a tcompile minifier_launcher.py" in r.stderr
    corrupt = tmp_path / "corrupt" / "minifier_launcher.py"
    corrupt.parent.mkdir()
    corrupt.write_text(open(launcher).read().replace('"format"', '"form'))
    r = run_tcompile("minify", str(corrupt))
    assert r.returncode == 2 and "corrupt" in r.stderr and "Traceback" not in r.stderr


def test_capture_failure_is_recorded_and_minified_from_its_record(tmp_path):
    doc = minify(tmp_path, "capture_fullgraph.py")
    assert doc["exit_code"] == 1 and doc["verified"] and doc["repro_form"] == "capture"
    assert os.path.isfile(doc["record"])  # the frame's record, for `tcompile replay`


def test_bad_input(tmp_path):
    clean = minify(tmp_path / "clean", "clean.py")
    assert clean["exit_code"] == 0 and "nothing to minify" in clean["message"]
    assert not any((tmp_path / "clean").rglob("*.py"))  # no files for no failure
    r = run_tcompile(
        "minify",
        "--graph",
        "7",
        "--out",
        str(tmp_path / "g"),
        str(FIXTURES / "cpp_relu_compile_error.py"),
    )
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("tcompile: error:")]
    assert r.returncode == 2 and len(errors) == 1 and "--graph 7" in errors[0]
    assert "Traceback" not in r.stderr
    r = run_tcompile(
        "minify",
        "--match",
        "nothing-like-this",
        "--out",
        str(tmp_path / "m"),
        str(FIXTURES / "cpp_relu_compile_error.py"),
    )
    assert r.returncode == 2 and "no failure" in r.stderr
    ro = tmp_path / "readonly"
    ro.mkdir()
    (ro / "file").write_text("x")
    r = run_tcompile(
        "minify", "--out", str(ro / "file" / "sub"), str(FIXTURES / "cpp_relu_compile_error.py")
    )
    assert r.returncode == 2 and "--out" in r.stderr


def test_after_aot_backward_graph(tmp_path):
    """--after aot: the backward graph inductor was handed, compiled as inductor
    compiles it (the planted pass only touches graphs with tangents)."""
    doc = minify(tmp_path, "backward_only.py", "--after", "aot", "--accuracy")
    assert doc["verified"], doc
    assert doc["signature"].endswith("backward grad differs from eager")
    (line,) = repro_module_body(doc)
    assert "torch.ops.aten.mul.Tensor(tangents_1" in line
    assert "LEVEL = 'aot'" in open(doc["repro"]).read()


# extended: its two halves run in the suite (the graph minify; the program level: test_first_hour,
# test_no_graph_holds_the_failure_so_the_program_is_minified)
@pytest.mark.extended
def test_source_level_writes_a_user_level_repro_beside_the_graph_one(tmp_path):
    """Issue 23, --level source: the graph's aten repro, the user's lines of its minimal
    node, and the program shrunk around them (the program-level minify end to end:
    its oracle, engine, repro and verification on real runs)."""
    doc = minify(tmp_path, "source_level.py", "--level", "source", "--jobs", "2")
    assert doc["level"] == "source" and doc["verified"], doc["message"]
    [line] = [e for e in doc["source_lines"] if "relu" in e["ops"]]
    assert line["code"] == "return torch.relu(x) * self.scale", line
    src = doc["source"]
    assert src["verified"] and src["lines_after"] < src["lines_before"], src
    # the passes from what a run shows ran on real (forked) runs, and no pass broke
    assert src["observations"] >= 1 and src["pass_errors"] == [], src
    text = open(src["repro"]).read()
    assert "torch.relu(" in text and "REPRODUCED" in text
    assert "import tcompile" not in text and "Repro(torch.nn.Module)" not in text
    said = run_repro(src["repro"], cwd=tmp_path)
    assert said.returncode == 1 and "CppCompileError" in said.stdout, said.stdout + said.stderr


def test_no_graph_holds_the_failure_so_the_program_is_minified(tmp_path):
    """Issue 23 end to end, the level chosen automatically: a wrong result Dynamo makes
    (a mutation lost across a graph break, backend="eager") -- no graph, no frame that
    raises -- so minify shrinks the program itself, and repro.py keeps the contract."""
    doc = minify(tmp_path, "program/dynamo_mutation_lost_graph_break.py", "--jobs", "2")
    assert doc["exit_code"] == 1 and doc["level"] == "program", doc["message"]
    prog = doc["program"]
    assert doc["verified"] and prog["lines_after"] < prog["lines_before"], prog
    assert prog["control"] and prog["pass_errors"] == [] and prog["passes"], prog
    assert sum(p["runs"] for p in prog["passes"].values()) == doc["calls"], prog["passes"]
    text = open(doc["repro"]).read()
    # the class-attribute mutation stays (the graph break goes: not needed, it turns out)
    assert "import tcompile" not in text and "Holder.items.append(" in text, text
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    said = run_repro(doc["repro"], cwd=elsewhere)
    assert said.returncode == 1 and "REPRODUCED: AssertionError: mismatch" in said.stdout, said

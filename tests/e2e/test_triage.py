"""``tcompile triage`` end to end: real runs, bisects and minifies of four scripts, one
planted bug written two ways (a compile error: the cheapest to bisect and minify; the
accuracy path is the corpus benchmark's); the cache on a rerun; Ray gives the same
clusters."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPTS = {
    "relu_fn.py": """
        import torch
        import torch._inductor.config

        torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"

        @torch.compile
        def f(x):
            return torch.relu(x * 2 + 1).sum(dim=0)

        x = torch.randn(8, 4)
        print(f(x))
    """,
    "relu_module.py": """
        import torch
        import torch._inductor.config

        torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(4, 4)

            def forward(self, x):
                return torch.relu(self.lin(x)).mean()

        torch.manual_seed(0)
        net = torch.compile(Net())
        with torch.no_grad():
            print(net(torch.randn(6, 4)))
    """,
    "fine.py": """
        import torch

        f = torch.compile(lambda x: torch.sin(x) + 1)
        print(f(torch.randn(4)))
    """,
    "own_bug.py": """
        import torch

        f = torch.compile(lambda x: torch.cos(x))
        f(torch.randn(3))
        raise ValueError("the script's own bug")
    """,
}


def triage(*args: str, cwd: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "tcompile", "triage", "--json", *args],
        capture_output=True, text=True, cwd=cwd, timeout=1500,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["exit_code"] == proc.returncode
    return doc


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("triage")
    (d / "scripts").mkdir()
    for name, text in SCRIPTS.items():
        (d / "scripts" / name).write_text(textwrap.dedent(text))
    doc = triage("--repeat", "1", "--jobs", "2", "--out", str(d / "out"), str(d / "scripts"), cwd=d)
    return d, doc


def test_verdicts_culprit_one_cluster_and_a_verified_repro(corpus):
    d, doc = corpus
    by = {Path(r["path"]).name: r for r in doc["scripts"]}
    assert {n: r["verdict"] for n, r in by.items()} == {
        "fine.py": "clean", "own_bug.py": "not_compiler", "relu_fn.py": "bug", "relu_module.py": "bug",
    }  # fmt: skip
    assert doc["exit_code"] == 1 and doc["counts"]["bug"] == 2
    for name in ("relu_fn.py", "relu_module.py"):
        r = by[name]
        assert r["culprit"]["stage"] == "inductor" and r["culprit"]["op"] == "relu", r["culprit"]
        assert r["seconds"] > 0
        for field in ("path", "verdict", "culprit", "cluster", "repro", "seconds"):
            assert field in r
    # one bug written two ways: one cluster; bisected and minified once, on one script
    # (its repro), the other joined by a check with the culprit's switch off
    assert by["relu_fn.py"]["cluster"] == by["relu_module.py"]["cluster"]
    (rep,) = [r for r in by.values() if r.get("reported") and r["verdict"] == "bug"]
    (member,) = [r for r in by.values() if r.get("member_of")]
    assert rep["repro"] and rep["repro_lines"] > 0 and member["repro"] is None
    # issue 62: joined on the graph its one run saved (two compiles of it), not by running
    assert member["joined"]["on_capture"] and member["joined"]["on_exit"] == 1
    assert [s["what"].split()[0] for s in member["steps"]] == ["run", "captured"], member["steps"]
    assert not member["joined"]["checked_by_running"]
    assert member["joined"]["without"] and member["culprit"]["of"] == rep["path"]
    (c,) = doc["clusters"]
    assert set(c) >= {"id", "culprit", "members", "repro", "versions"} and len(c["members"]) == 2
    assert c["repro"] == rep["repro"] == member["cluster_repro"]
    out = subprocess.run([sys.executable, c["repro"]], capture_output=True, text=True, timeout=600)
    assert out.returncode == 1 and "REPRODUCED" in out.stdout
    page = (d / "out" / "triage.md").read_text()
    assert f"| {c['id']} |" in page and "own_bug.py" in page
    issue = (d / "out" / "issues" / f"{c['id']}.md").read_text()  # a ready issue text
    assert "REPRODUCED" in issue and "relu_fn.py" in issue and "### Versions" in issue
    assert "<html" in (d / "out" / "triage.html").read_text()
    from test_report_e2e import assert_no_absolute_paths

    assert_no_absolute_paths(d / "out", [d])  # the pages and repros: no folder of here


def test_bisect_names_the_culprit_triage_and_its_report_named(corpus):
    """Issue 60: one failure, one culprit in every command.  Triage's culprit is its
    ``tcompile report``'s (the report's bug, compiler/culprit.py's record); ``tcompile
    bisect`` run on its own names the same one, in the same words, on each member
    (tests/e2e/test_same_culprit.py runs all three commands on more fixtures, extended)."""
    from tcompile.compiler.culprit import Culprit

    d, doc = corpus
    by = {Path(r["path"]).name: r for r in doc["scripts"]}
    proc = subprocess.run(
        [sys.executable, "-m", "tcompile", "bisect", "--json", "--out", str(d / "bisect"),
         str(d / "scripts" / "relu_fn.py")],
        capture_output=True, text=True, cwd=d, timeout=900,
    )  # fmt: skip
    bis = json.loads(proc.stdout)
    assert proc.returncode == 1 and bis["culprit"], proc.stderr[-2000:]
    said = Culprit.from_json(bis["culprit"])
    assert said.category == "lowering" and said.op == "relu"
    for name in ("relu_fn.py", "relu_module.py"):
        triaged = Culprit.from_json(by[name]["culprit"])
        assert triaged.key() == said.key(), (name, by[name]["culprit"], bis["culprit"])
    assert by["relu_fn.py"]["culprit"]["text"] == bis["culprit"]["text"]


def test_a_rerun_does_only_new_work(corpus):
    d, first = corpus
    (d / "scripts" / "also_fine.py").write_text(
        "import torch\nprint(torch.compile(torch.abs)(torch.ones(2)))\n"
    )
    # --also (here the same interpreter): only the verified repros run again, there
    doc = triage("--repeat", "1", "--also", sys.executable, "--out", str(d / "out"),
                 str(d / "scripts"), cwd=d)  # fmt: skip
    (d / "scripts" / "also_fine.py").unlink()
    assert doc["from_cache"] == 4 and doc["done_now"] == 1
    assert [(c["id"], c["members"]) for c in doc["clusters"]] == [
        (c["id"], c["members"]) for c in first["clusters"]
    ]
    by = {Path(r["path"]).name: r for r in doc["scripts"]}
    assert by["also_fine.py"]["verdict"] == "clean"
    (rep,) = [r for r in by.values() if r.get("repro")]
    assert rep["also"]["result"] == "still fails", rep["also"]
    assert "also" not in by["fine.py"]
    (c,) = doc["clusters"]  # the version column: this torch, and --also's
    assert [v["result"] for v in c["versions"]] == ["fails (this run)", "still fails"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ray_gives_the_same_clusters(corpus):
    pytest.importorskip("ray")
    ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    d, local = corpus
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run(
        [ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--disable-usage-stats",
         "--include-dashboard=false"],
        check=True, capture_output=True, env=env, timeout=300,
    )  # fmt: skip
    try:
        doc = triage("--repeat", "1", "--ray", f"127.0.0.1:{port}", "--out", str(d / "ray"),
                     str(d / "scripts"), cwd=d)  # fmt: skip
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=env, timeout=300)
    assert doc["engine"] == "ray" and doc["done_now"] == 4
    verdicts = {Path(r["path"]).name: r["verdict"] for r in doc["scripts"]}
    assert verdicts == {Path(r["path"]).name: r["verdict"] for r in local["scripts"]}
    assert [sorted(map(os.path.basename, c["members"])) for c in doc["clusters"]] == [
        sorted(map(os.path.basename, c["members"])) for c in local["clusters"]
    ]

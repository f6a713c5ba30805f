"""`tcompile report` and failure grouping, end to end (issue 14)."""

import json

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def test_run_groups_failures_by_signature(tmp_path):
    r = run_tcompile(
        "run", "--json", "--accuracy", "--out", str(tmp_path), str(FIXTURES / "repeated_bugs.py")
    )
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and len(doc["failures"]) == 3
    groups = {g["kind"]: g for g in doc["groups"]}
    assert groups["compile"]["count"] == 2 and groups["compile"]["graphs"] == [0, 2]
    assert groups["accuracy"]["count"] == 1 and groups["accuracy"]["graphs"] == [1]
    assert "(2 distinct)" in doc["explanation"]


def test_report_writes_a_bug_report(tmp_path):
    # the program in a project under a home folder, the run's temporary folder beside it:
    # no artifact a person shares may hold either path (issue 49)
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    (home / "proj").mkdir(parents=True)
    tmp.mkdir()
    script = home / "proj" / "repeated_bugs.py"
    script.write_text((FIXTURES / "repeated_bugs.py").read_text())
    r = run_tcompile(
        "report",
        "--json",
        "--accuracy",
        "--max-bugs",
        "1",
        "--out",
        str(home / "out"),
        str(script),
        env={"HOME": str(home), "TMPDIR": str(tmp)},
        cwd=str(home / "proj"),
    )
    assert r.returncode == 1, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    [bug] = doc["bugs"]
    assert bug["title"] == "[inductor] relu fails to compile (exc.CppCompileError) on CPU"
    assert bug["count"] == 2 and bug["graphs"] == [0, 2]
    assert bug["bisect"]["subsystem"] == "lowerings" and bug["minify"]["verified"]
    text = open(doc["report"]).read()
    assert text.startswith("# [inductor] relu fails to compile")
    for part in (
        "### 🐛 Describe the bug",
        "```python\n#!/usr/bin/env python3",
        "REPRODUCED: inductor/compile: exc.CppCompileError",
        "TORCH_BISECT_SUBSYSTEM=lowerings",
        "```cpp\n// ---- cpp_fused_relu",
        "### Versions",
        "PyTorch version: 2.",
    ):
        assert part in text, part
    assert len(text) < 65_536 and doc["characters"] == len(text)
    assert_no_absolute_paths(home / "out", [home, tmp, tmp_path])


def assert_no_absolute_paths(out, folders):
    """Every artifact a person shares (pages, reports, repros) is free of the run's
    folders: the home and temporary folders it ran in.  (result.json and the logs are
    machine records: they name their files by design.)"""
    import os

    shared = [
        p
        for p in out.rglob("*")
        if p.is_file()
        and (p.suffix in (".md", ".html") or (p.suffix == ".py" and "repro" in p.name))
    ]
    assert shared, "no artifact to scan"
    needles = {str(f) for f in folders} | {os.path.realpath(f) for f in folders}
    leaks = [
        f"{p.relative_to(out)}: {line.strip()[:160]}"
        for p in shared
        for line in p.read_text(errors="replace").splitlines()
        if any(n in line for n in needles)
    ]
    assert not leaks, "\n".join(leaks)


def test_a_capture_failure_gets_its_capture_level_repro(tmp_path):
    # issue 62: a frame Dynamo could not capture had no repro in report (and so in
    # triage); its record's function is minified, the program not run again
    r = run_tcompile(
        "report", "--json", "--out", str(tmp_path), str(FIXTURES / "capture_fullgraph.py")
    )
    doc = json.loads(r.stdout)
    (bug,) = doc["bugs"]
    assert r.returncode == 1 and bug["kind"] == "capture", r.stderr[-2000:]
    mini = bug["minify"]
    assert mini["verified"] and mini["capture"]["entry"] == "step", mini.get("message")
    text = (tmp_path / doc["run_dir"].rsplit("/", 1)[-1] / "report.md").read_text()
    assert "REPRODUCED: eager/capture: exc.Unsupported" in text
    assert "The frame's code (`step`) shrinks from 5 to 3 lines" in text
    assert "passes with torch.compile off" in text

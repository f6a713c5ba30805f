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
    r = run_tcompile(
        "report",
        "--json",
        "--accuracy",
        "--max-bugs",
        "1",
        "--out",
        str(tmp_path),
        str(FIXTURES / "repeated_bugs.py"),
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

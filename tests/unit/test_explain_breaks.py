"""repro/jobs/explain.build_report on events alone: breaks ordered by count, then file."""

from __future__ import annotations

from tcompile.compiler.protocol import Event
from tcompile.repro.jobs.explain import build_report


def test_a_fatal_break_without_a_file_sorts_beside_one_with_a_file(tmp_path):
    """A frame Dynamo died of whose user frame is unknown has no file (None) while a
    graph's break has one: the same count must not compare None with a string."""
    events = [
        {"event": Event.GRAPH, "index": 0, "break_reason": "a call it cannot trace",
         "break_file": "a.py", "break_line": 3},
        {"event": Event.EXCEPTION, "dynamo": True, "message": "Unsupported: data-dependent"},
    ]  # fmt: skip
    report = build_report(events, 1, str(tmp_path))
    files = [b["file"] for b in report.graph_breaks]
    assert files == [None, "a.py"], files

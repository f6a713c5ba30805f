"""``tcompile explain``: why no speed-up, why recompiles, where compile time goes.

The program runs once under the hooks with diagnostics on (diagnostics.py); this
module turns the events into the report: graphs and ops, graph breaks grouped by
reason and place (most frequent first), recompilations with the guard that failed,
frames that hit the recompile limit, compile seconds per phase per graph.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from typing import IO, Any, TypedDict

from tcompile.compiler import layout
from tcompile.compiler.debug_artifacts import index_debug_dir
from tcompile.compiler.limitations import documented_limitation
from tcompile.compiler.observer import Observer
from tcompile.compiler.protocol import Event, HookConfig, read_events
from tcompile.compiler.runner import new_run_dir, run_process


class CaptureFailure(TypedDict):
    """A frame the program died of in Dynamo (:func:`_capture_failures`)."""

    reason: str  # the error's first line (Dynamo's break reason)
    file: str | None  # the user's frame
    line: int | None
    signature: str | None
    record: str | None  # the frame's record, for `tcompile replay`
    limitation: str | None  # a documented limitation its text names


@dataclasses.dataclass
class ExplainReport:
    graphs: list[dict[str, Any]]
    graph_count: int
    graph_break_count: int
    op_count: int
    graph_breaks: list[dict[str, Any]]
    recompilations: list[dict[str, Any]]
    recompile_limit: list[dict[str, Any]]
    compile_seconds: dict[str, float]
    exit_code: int
    returncode: int | None
    run_dir: str
    debug_index: list[dict[str, Any]] | None = None
    # frames Dynamo could not capture and the program died of (fullgraph=True turns a
    # graph break into this error): each is a break too, marked "fatal"
    capture_failures: list[CaptureFailure] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def explain(
    command: list[str],
    *,
    out: str | None = None,
    timeout: float | None = None,
    observer: Observer | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    debug_dir: str | None = None,
    only: str | None = None,
) -> ExplainReport:
    run_dir = new_run_dir(out, "explain")
    # the program's own backend: compile time per phase is the point
    config = HookConfig(
        dir=os.path.join(run_dir, layout.COMPILED), explain=True, debug_dir=debug_dir, only=only
    )
    result = run_process(
        command, config, timeout=timeout, observer=observer, stdout=stdout, stderr=stderr
    )
    report = build_report(read_events(config.dir), result.returncode, run_dir)
    if debug_dir:
        report.debug_index = index_debug_dir(debug_dir)
    return report


def build_report(
    events: list[dict[str, Any]], returncode: int | None, run_dir: str
) -> ExplainReport:
    graphs = [e for e in events if e.get("event") == Event.GRAPH]
    # (reason, file, line): a fatal break's file may be None (capture failures)
    breaks: Counter[tuple[str, str | None, int | None]] = Counter()
    ranks: dict[tuple[str, str | None, int | None], set[int]] = {}
    for g in graphs:
        if g.get("break_reason"):
            key = (g["break_reason"], g.get("break_file") or "", g.get("break_line"))
            breaks[key] += 1
            if g.get("rank") is not None:
                ranks.setdefault(key, set()).add(g["rank"])
    fatal = _capture_failures(events)
    for f in fatal:  # the break the program died of (fullgraph=True): a break too
        key = (f["reason"], f["file"], f["line"])
        breaks[key] += 1
    graph_breaks = [
        {"reason": r, "file": f, "line": ln, "count": c}
        | (
            {"fatal": True}
            if any((x["reason"], x["file"], x["line"]) == (r, f, ln) for x in fatal)
            else {}
        )
        | ({"ranks": sorted(ranks[(r, f, ln)])} if (r, f, ln) in ranks else {})
        for (r, f, ln), c in sorted(
            breaks.items(), key=lambda kv: (-kv[1], kv[0][1] or "", kv[0][2] or 0)
        )
    ]
    recompilations = [
        {
            "frame": e["frame"],
            "file": e["file"],
            "line": e["line"],
            "reason": (e.get("reasons") or ["unknown"])[0],
            "reasons": e.get("reasons") or [],
        }
        for e in events
        if e.get("event") == Event.RECOMPILE
    ]
    limits = [
        {"function": e.get("function"), "message": e.get("message")}
        for e in events
        if e.get("event") == Event.RECOMPILE_LIMIT
    ]
    totals: Counter[str] = Counter()
    rows = []
    for g in graphs:
        phases = g.get("phases") or {}
        totals.update(phases)
        rows.append(
            {
                "index": g["index"],
                "frame": g.get("frame"),
                "file": g.get("file"),
                "line": g.get("line"),
                "nodes": g.get("nodes"),
                "ops": g.get("ops") or {},
                "phases": phases,
                "compile_seconds": g.get("compile_seconds"),
                "compile_id": g.get("compile_id"),
            }
            | {
                k: g[k]
                for k in ("rank", "local_rank", "world_size", "node", "ddp_bucket")
                if k in g
            }
        )
    compile_seconds: dict[str, float] = {k: round(v, 3) for k, v in totals.items()}
    compile_seconds["total"] = round(
        sum(g.get("compile_seconds") or 0 for g in graphs) + totals.get("dynamo_capture", 0), 3
    )
    return ExplainReport(
        graphs=rows,
        graph_count=len(graphs),
        graph_break_count=sum(b["count"] for b in graph_breaks),
        op_count=sum(g.get("nodes") or 0 for g in graphs),
        graph_breaks=graph_breaks,
        recompilations=recompilations,
        recompile_limit=limits,
        compile_seconds=compile_seconds,
        # the report was made; 1: the program died of a frame Dynamo could not capture
        exit_code=1 if fatal else 0,
        returncode=returncode,
        run_dir=run_dir,
        capture_failures=fatal,
    )


def _capture_failures(events: list[dict[str, Any]]) -> list[CaptureFailure]:
    """The frames the program died of in Dynamo (an exception event Dynamo raised):
    where (the user's frame), why (the error's first line: Dynamo's break reason), and
    whether it was ``fullgraph=True`` that made the break an error."""
    out: list[CaptureFailure] = []
    for e in events:
        if e.get("event") != Event.EXCEPTION or not e.get("dynamo"):
            continue
        where = str(e.get("user_frame") or "").split(" in ", 1)[0]
        file, _, line = where.rpartition(":")
        message = str(e.get("message") or "")
        reason = message.splitlines()[0] if message else str(e.get("signature_text") or "")
        out.append(
            {
                "reason": reason.split(": ", 1)[-1] if reason.startswith("Unsupported") else reason,
                "file": file or None,
                "line": int(line) if line.isdigit() else None,
                "signature": e.get("signature_text"),
                "record": e.get("record"),
                "limitation": documented_limitation(message),
            }
        )
    return out

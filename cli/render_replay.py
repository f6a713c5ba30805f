"""Rich rendering of explain and replay results (split from render.py, which holds the
shared helpers and the other commands)."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .render import _files, at, debug_index, minify_result, plain


def explain_tables(report: Any) -> list[Any]:
    out = []
    summary = Table(title="Summary", title_justify="left", show_header=False)
    summary.add_column("what")
    summary.add_column("value", justify="right")
    summary.add_row("graphs", str(report.graph_count))
    summary.add_row("graph breaks", str(report.graph_break_count))
    summary.add_row("ops", str(report.op_count))
    summary.add_row("recompilations", str(len(report.recompilations)))
    summary.add_row("compile seconds", f"{report.compile_seconds.get('total', 0):.2f}")
    out.append(summary)
    listed = (
        ("Graph breaks (most frequent first)", "count", report.graph_breaks),
        ("Recompilations", "frame", report.recompilations),
    )
    for title, first, rows in listed:
        if not rows:
            continue
        last = "reason" if first == "count" else "guard that failed"
        t = Table(title=title, title_justify="left", show_lines=True)
        for col in (first, "where", last):
            t.add_column(col)
        for row in rows:
            where = at(row["file"], row["line"])
            t.add_row(str(row[first]), where, Text(row["reason"][:300]))
        out.append(t)
    for lim in report.recompile_limit:
        t = Table(title="Recompile limit hit", title_justify="left")
        t.add_column("function")
        t.add_column("message")
        t.add_row(lim.get("function") or "", lim.get("message") or "")
        out.append(t)
    t = Table(title="Graphs: ops and compile seconds by phase", title_justify="left")
    numeric = ("rank", "graph", "nodes", "capture", "aot", "inductor", "codegen")
    ranked = any(g.get("rank") is not None for g in report.graphs)  # a distributed job
    cols = ("graph", "frame", "nodes", "capture", "aot", "inductor", "codegen", "top ops")
    for col in (("rank",) if ranked else ()) + cols:
        t.add_column(col, justify="right" if col in numeric else "left")
    graphs = sorted(report.graphs, key=lambda g: g.get("rank") or 0)
    for g in graphs:
        p = g.get("phases") or {}
        ops = ", ".join(f"{k.rsplit('.', 1)[-1]}x{v}" for k, v in list(g["ops"].items())[:4])
        bucket = f" (bucket {g['ddp_bucket']})" if g.get("ddp_bucket") is not None else ""
        t.add_row(
            *([str(g.get("rank", ""))] if ranked else []),
            str(g["index"]) + bucket,
            f"{g.get('frame')} ({at(g.get('file'), g.get('line'))})",
            str(g.get("nodes")),
            f"{p.get('dynamo_capture', 0):.2f}",
            f"{p.get('aot_autograd', 0):.2f}",
            f"{p.get('inductor', 0):.2f}",
            f"{p.get('codegen', 0):.2f}",
            ops,
        )
    out.append(t)
    return out


def record_info(info: Any, console: Console) -> None:
    """``tcompile replay --info``: the metadata of a record (nothing unpickled).  Every
    value comes from the file, so every value is printed as plain text."""
    meta = info.meta
    if info.kind == "torch":
        rows = [
            ("record", f"{info.path} (written by torch's replay_record_enabled)"),
            ("function", f"{meta.get('function', '?')} (line {meta.get('line', '?')})"),
            ("failure", meta.get("signature_text", "")),
            ("size", f"{meta.get('payload_bytes')} bytes"),
            ("signed", "no: torch's records carry no signature (replay needs --trust)"),
        ]
        _rows(console, rows)
        console.print("[dim]torch's records carry no metadata: the rest is in the pickle[/dim]")
        return
    sizes = meta.get("sizes") or {}
    rows = [
        ("record", f"{info.path} (format {meta.get('format')})"),
        ("function", f"{meta.get('function')} at {meta.get('file')}:{meta.get('line')}"),
        ("failure", meta.get("signature_text", "")),
        ("failed at", meta.get("failure_at", "")),
        ("compile", ", ".join(f"{k}={v}" for k, v in (meta.get("compile") or {}).items())),
        (
            "written",
            f"{meta.get('written')} by tcompile {meta.get('tcompile')}, "
            f"torch {meta.get('torch')}, Python {meta.get('python')}",
        ),
        (
            "program",
            f"{' '.join(map(str, meta.get('argv') or []))} (the frame failed "
            f"{meta.get('seconds_into_program', '?')}s into it)",
        ),
        (
            "size",
            f"{meta.get('payload_bytes')} bytes; {sizes.get('tensors', 0)} tensors, "
            f"{sizes.get('tensor_bytes', 0)} bytes of tensor data",
        ),
        (
            "signed",
            "yes: by this user's tcompile"
            if info.trusted
            else "NO: not by this user's tcompile (replay needs --trust)",
        ),
    ]
    guards = meta.get("guard_failures_text") or meta.get("guard_failures")
    if guards:
        first = [next(iter(str(g).strip().splitlines()), "") for g in guards]
        rows.append(("guards", "; ".join(re.split(r"\s+#\s", g, maxsplit=1)[0] for g in first)))
    if meta.get("earlier_calls"):
        n = meta["earlier_calls"]
        rows.append(("earlier", f"{n} earlier call(s) of the frame, replayed before this one"))
    _rows(console, rows)
    args = meta.get("arguments") or {}
    if args:
        console.print("arguments:")
        for name, text in args.items():
            console.print(Text("  ") + plain(f"{name}: {text}"))
    for name, why in (meta.get("unrecorded") or {}).items():
        console.print(plain(f"not recorded: {name} ({why})"), style="yellow")


def _rows(console: Console, rows: list[tuple[str, Any]]) -> None:
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        console.print(Text(f"{(key + ':').ljust(width)} ") + plain(value))


def explain_result(report: Any, console: Console) -> None:
    for table in explain_tables(report):
        console.print(table)
    for f in getattr(report, "capture_failures", None) or []:
        console.print(
            Text(f"the program died in TorchDynamo at {at(f['file'], f['line'])}: ", style="red")
            + Text(f["reason"])
            + Text(" (fullgraph=True makes a graph break an error)")
        )
        if f.get("limitation"):
            console.print(Text(f"  documented limitation: {f['limitation']}", style="yellow"))
    if report.debug_index is not None:
        debug_index(report.debug_index, console)
    _files(report.run_dir, console)


def replay_result(report: Any, console: Console) -> None:
    replay_summary(report, console)
    if report.minify is not None:
        minify_result(report.minify, console)


def replay_summary(report: Any, console: Console) -> None:
    colour = {"reproduced": "red", "different": "red", "failed": "red", "none": "green"}.get(
        report.outcome, "yellow"
    )
    console.print()
    console.print(f"record:   {report.record} ({report.function})", highlight=False)
    if report.recorded_signature:
        console.print(f"recorded: {report.recorded_signature}", highlight=False)
    if report.signature:
        console.print(f"replayed: {report.signature}", highlight=False)
    if report.user_stack:
        console.print("user stack of the failure:")
        for line in report.user_stack:
            console.print(f"  {line}", highlight=False)
    took = f"{report.seconds:.1f}s"
    if report.original_seconds:
        took += f"; the program had run {report.original_seconds:.1f}s before this frame failed"
    console.print(
        f"[{colour}]{report.explanation}[/{colour}]  ({took}, files in {report.run_dir})",
        highlight=False,
    )
    if report.next_command and report.minify is None:
        console.print(f"next: {report.next_command}", highlight=False)

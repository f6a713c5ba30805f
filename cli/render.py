"""Rich rendering of library results and progress (with render_bisect.py, render_replay.py and render_triage.py, the only modules that import rich)."""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.signature import FailureKind
from tcompile.repro.jobs.minify_types import (
    CaptureMinifyReport,
    GraphMinifyReport,
    MinifyReport,
    ProgramMinifyReport,
)


def console(stderr: bool = False) -> Console:
    """A console for people; piped or redirected output is never cut to 80 columns
    (full names and signatures: a reader may be a script or a bug report)."""
    c = _Console(stderr=stderr)
    if not c.is_terminal:
        c = _Console(stderr=stderr, width=10_000)
    return c


_STEP_WORDS = {"same_failure": "[red]fails[/red]", "pass": "[green]passes[/green]"} | {
    v: f"[yellow]{w}[/yellow]"
    for v, w in [("other_failure", "fails another way (not the failure bisected)"),
                 ("timeout", "runs past its limit"), ("crash", "crashes"), ("invalid", "cannot run")]
}  # fmt: skip


class _Console(Console):
    """rich exits 1 when its reader goes away (``| head -1``); tcompile's answer stands:
    the pipe error goes to app.finish, which keeps the command's own exit code."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


class ConsoleObserver:
    """Prints one line per compiled graph and failure as the child reports them."""

    def __init__(self, console: Console, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet

    def status(self, text: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]tcompile: {text}[/dim]", highlight=False)

    def event(self, e: dict[str, Any]) -> None:
        if self.quiet:
            return
        kind = e.get("event")
        if kind == "graph":
            where = f"{e.get('frame') or '?'}"
            state = (
                "[red]failed[/red]"
                if e.get("failed")
                else ("gated: eager" if e.get("gated") else "ok")
            )
            self.console.print(
                f"[dim]tcompile: graph {e.get('index')} ({where}, {e.get('nodes')} nodes) "
                f"{e.get('stage')} {state} in {e.get('compile_seconds', 0):.2f}s[/dim]",
                highlight=False,
            )
        elif kind == "failure":
            where = (
                "outside any graph"
                if e.get("graph") is None
                else f"in graph {e.get('graph')} ({e.get('graph_kind')})"
            )
            rank = f" on rank {e['rank']}" if e.get("rank") is not None else ""
            self.console.print(
                Text(
                    f"tcompile: {e.get('kind')} failure {where}{rank}: {e.get('signature_text')}",
                    style="red",
                ),
                highlight=False,
            )
        elif kind == "bisect_step":
            # its verdict in words: a step that fails another way is not "passes"
            said = e.get("verdict") or ("same_failure" if e.get("failed") else "pass")
            verdict = _STEP_WORDS.get(said, said)
            which = (
                f"run {e['run']}" if e.get("run") is not None else f"compile {e.get('judgement')}"
            )
            other = f": {e['other']}" if e.get("other") else ""
            self.console.print(
                f"tcompile: {which}: {e.get('what')} -> {verdict}{other} ({e.get('seconds')}s)",
                highlight=False,
            )
        elif kind == "minify_progress":
            self.console.print(
                f"[dim]tcompile: {e.get('nodes')} nodes after {e.get('calls')} calls ({e.get('pass')})[/dim]",
                highlight=False,
            )
        elif kind == "note":
            self.console.print(Text(f"tcompile: {_note(e)}", style="yellow"))


def _note(note: dict[str, Any]) -> str:
    graph = note.get("graph")
    return (f"graph {graph}: " if graph is not None else "") + str(note.get("text"))


def at(file: str | None, line: Any) -> str:
    """``file.py:12``, or ``file.py`` when the line is unknown, or ''."""
    if not file:
        return ""
    return _short(file) + (f":{line}" if line is not None else "")


def graphs_table(graphs: list[dict[str, Any]]) -> Table:
    ranked = any(g.get("rank") is not None for g in graphs)  # a distributed job
    table = Table(title="Compiled graphs", title_justify="left")
    cols = (("rank",) if ranked else ()) + ("graph", "frame", "kind", "nodes", "stage", "compile s")
    for col in cols:
        table.add_column(
            col, justify="right" if col in ("rank", "graph", "nodes", "compile s") else "left"
        )
    for g in sorted(graphs, key=lambda g: g.get("rank") or 0) if ranked else graphs:
        where = g.get("frame") or ""
        if g.get("level") == "dynamo" and g.get("file"):
            where = f"{where} ({at(g['file'], g.get('line'))})"
        stage = g.get("stage") or ""
        if g.get("gated"):
            stage += " (gated)"
        if g.get("failed"):
            stage = f"[red]{stage} failed[/red]"
        idx = str(g.get("index")) if g.get("level") == "dynamo" else f"  {g.get('index')}"
        table.add_row(
            *([str(g.get("rank", ""))] if ranked else []),
            idx,
            where if g.get("level") == "dynamo" else "",
            g.get("kind") or "",
            str(g.get("nodes")),
            stage,
            f"{g.get('compile_seconds') or 0:.2f}",
        )
    return table


def failures_table(failures: list[Any]) -> Table:
    """One row per distinct failure (same signature), with where and how often."""
    from tcompile.compiler.failure import group

    ranked = any(f.rank is not None for f in failures)  # a distributed job
    table = Table(title="Failures", title_justify="left", show_lines=True)
    for col in (("ranks",) if ranked else ()) + ("graph", "kind", "signature", "error"):
        table.add_column(col)
    for g in group(failures):
        ranks = [", ".join(map(str, g["ranks"])) or "-"] if ranked else []
        where = ", ".join(str(x) for x in g["graphs"]) or "-"
        kinds = [k for k in g["graph_kinds"] if k != "dynamo"]
        if kinds:
            where += f" {'/'.join(kinds)}"
        if g["count"] > 1:
            where += f"\n({g['count']} times)"
        msg = error_excerpt(g["message"] or "")
        if g.get("limitation"):
            msg += f"\n(documented limitation: {g['limitation']})"
        table.add_row(*ranks, where, g["kind"], Text(g["signature"]), Text(msg))
    return table


def error_excerpt(message: str, lines: int = 3) -> str:
    """The lines of an error worth a table cell: a compiler's own ``error:`` lines (a
    C++ compile error's message starts with the whole g++ command line), else the
    first lines."""
    all_lines = message.splitlines()
    errors = [re.sub(r"^\S*/", "", ln.strip()) for ln in all_lines if re.search(r"\berror:", ln)]
    if errors:
        return "\n".join([all_lines[0][:200], *(e[:200] for e in errors[: lines - 1])])
    return "\n".join(ln[:200] for ln in all_lines[:lines])


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(value: Any) -> Text:
    """Text from a file someone else wrote: never markup, never terminal control
    sequences (an escape character is shown as a visible ``\\x1b``)."""
    text = str(value)
    return Text(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))


def _files(run_dir: str | None, console: Console) -> None:
    if run_dir:
        console.print(Text(f"files in {run_dir}", style="dim"))


def debug_index(index: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="inductor debug artifacts", title_justify="left")
    for col in ("graph", "kind", "output_code.py", "other files"):
        table.add_column(col)
    for row in index:
        files = row["files"]
        table.add_row(
            str(row["graph"]),
            row["kind"],
            files.get("output_code.py", "-"),
            ", ".join(sorted(k for k in files if k != "output_code.py")),
        )
    console.print(table)


def minify_result(report: MinifyReport, console: Console) -> None:
    console.print()
    if report.repro is None:
        colour = (
            "green"
            if report.exit_code == ExitCode.OK
            else ("yellow" if report.exit_code == ExitCode.NOT_COMPILER else "red")
        )
        console.print(f"[{colour}]{report.message}[/{colour}]", highlight=False)
        return
    ok = "[green]verified[/green]" if report.verified else "[red]NOT verified[/red]"
    console.print(Text("failure:  ") + plain(report.signature), highlight=False)
    graph = report if isinstance(report, GraphMinifyReport) else None
    if isinstance(report, CaptureMinifyReport) and report.capture:
        capture = report.capture  # a frame Dynamo could not capture: its source was minified
        console.print(
            Text("function: ") + plain(f"{capture['entry']} at {capture['where']}"),
            highlight=False,
        )
        console.print(
            f"lines:    {capture['lines_before']} -> {capture['function_lines']} "
            f"(user code the frame ran -> the minimal function)   oracle calls: "
            f"{report.calls}   time: {report.seconds:.1f}s",
            highlight=False,
        )
    elif isinstance(report, ProgramMinifyReport):
        prog = report.program or {}
        console.print(
            f"program:  {prog.get('lines_before')} -> {prog.get('lines_after')} lines   "
            f"candidates: {report.calls} ({prog.get('runs')} runs of the program, with "
            f"their controls)   time: {report.seconds:.1f}s",
            highlight=False,
        )
    else:
        console.print(
            f"graph:    {report.graph} ({report.graph_kind}), stage {report.stage}",
            highlight=False,
        )
        nodes = f"{graph.nodes_before} -> {graph.nodes_after}" if graph else "?"
        console.print(
            f"nodes:    {nodes}   oracle calls: {report.calls}   time: {report.seconds:.1f}s",
            highlight=False,
        )
    if graph is not None:
        _numerics(graph, console)
    real = ", real inputs" if graph is not None and graph.real_inputs else ""
    console.print(f"repro:    {report.repro} ({ok}{real})", highlight=False)
    if not report.verified and report.not_verified:  # why, and what to do, in one line
        console.print(Text("why:      ", style="red") + plain(report.not_verified), highlight=False)
    if graph is not None:
        _graph_extras(graph, console)
    if report.launcher:
        console.print(f"launcher: {report.launcher}", highlight=False)
    if report.interrupted:
        console.print("[yellow]interrupted: this is the smallest graph found so far[/yellow]")


def _graph_extras(report: GraphMinifyReport, console: Console) -> None:
    """A graph's pinned autotune choice, its kernel repro and its user-level lines."""
    if report.pinned_choice:
        console.print(
            Text("pinned:   ")
            + plain(f"{report.pinned_choice} alone (autotuning's choice that failed)"),
            highlight=False,
        )
    kr = report.kernel_repro
    if kr:
        text = (
            f"{kr['path']} ({kr['kernel']} alone, verified: {kr['says']})"
            if kr.get("path")
            else f"none ({kr.get('error') or kr.get('says') or 'not verified'})"
        )
        console.print(Text("kernel:   ") + plain(text), highlight=False)
    _source_level(report, console)


def _source_level(report: GraphMinifyReport, console: Console) -> None:
    """The user's lines of the minimal graph, and --level source's user-level repro."""
    lines = report.source_lines or []
    src = report.source
    if src is None:
        return
    for e in lines[:5]:
        ops = f" ({', '.join(e['ops'])})" if e.get("ops") else ""
        console.print(
            Text("line:     ") + plain(f"{e['file']}:{e['line']}  {e['code']}{ops}"),
            highlight=False,
        )
    if src.get("repro"):
        ok = "[green]verified[/green]" if src.get("verified") else "[red]NOT verified[/red]"
        console.print(
            f"source:   {src['repro']} ({ok}; user-level PyTorch, {src.get('repro_lines')} "
            f"lines: the program {src.get('lines_before')} -> {src.get('lines_after')} lines "
            f"in {src.get('runs')} runs, {src.get('seconds')}s)",
            highlight=False,
        )
    else:
        console.print(Text("source:   ") + plain(f"none ({src.get('error')})"), highlight=False)


def _divergence_text(first: dict[str, Any]) -> str | None:
    if not first.get("node"):
        return None
    kernel = f", kernel {first['kernel']}" if first.get("kernel") else ""
    grads = " (its gradient)" if first.get("grads") else ""
    if first.get("graph") == "backward":  # a node of the backward graph itself
        grads = " in the backward graph (the gradient of the forward op at this line)"
    return f"{first['op']}{grads} (node {first['node']}{kernel}) at {first.get('source') or '?'}"


def diverges(first: dict[str, Any], graph: Any = None) -> Text | None:
    """``diverges: [graph N: ]op (node x, kernel k) at file:line: code``, or None."""
    text = _divergence_text(first)
    if text is None:
        return None
    return Text("diverges: ") + plain(f"graph {graph}: {text}" if graph is not None else text)


def _numerics(report: GraphMinifyReport, console: Console) -> None:
    """An accuracy failure: where its values first go wrong, and which switch fixes it."""
    line = diverges(((report.divergence or {}).get("minimal")) or {})
    if line is not None:
        console.print(line, highlight=False)
    switches = report.switches
    if switches:
        console.print(Text("numerics: ") + plain(switches["verdict"]), highlight=False)


def run_result(report: Any, console: Console) -> None:
    console.print()
    in_graph = [f for f in report.failures if f.graph is not None]
    if report.graphs:
        console.print(graphs_table(report.graphs))
    elif in_graph:
        console.print(
            f"Graph {in_graph[0].graph} never finished compiling ({in_graph[0].kind} while "
            f"{in_graph[0].phase or 'compiling'} it)."
        )
    elif any(f.kind == FailureKind.CAPTURE for f in report.failures):
        console.print("No graph was compiled: TorchDynamo failed before capturing one.")
    elif getattr(report, "records", None):  # Dynamo was tracing a call when it died
        console.print(
            f"No graph was compiled: the program failed while TorchDynamo traced "
            f"{report.records[0]['function']}."
        )
    else:
        console.print(
            "No graph was compiled: the program never called a torch.compile'd function, "
            "or Dynamo skipped every frame it did call."
        )
    if report.failures:
        console.print(failures_table(report.failures))
        from tcompile.compiler.failure import rank_summary

        ranks = rank_summary(report.failures)
        if ranks:  # a distributed job: every rank alike, or some only
            console.print(Text("ranks: ") + plain(ranks))
        for f in report.failures:
            line = diverges(getattr(f, "divergence", None) or {}, f.graph)
            if line is not None:
                console.print(line, highlight=False)
    ended = [r for r in getattr(report, "ranks_ended", None) or [] if r["ended"] != "returned"]
    if ended:  # each rank's own ending reaches the output (issue 49)
        said = "; ".join(f"rank {r['rank']} {r['ended']}" for r in ended)
        console.print(Text("ranks ended: ") + plain(said))
    if report.verdict != "not-a-compiler-bug":  # nothing of the compiler's to replay
        _records(getattr(report, "records", None) or [], console)
    for note in report.notes:
        if note.get("text") != report.explanation:  # said once, on the last line
            console.print(Text(f"note: {_note(note)}", style="yellow"))
    colour = {"clean": "green", "compiler-failure": "red"}.get(report.verdict, "yellow")
    files = f", files in {report.run_dir}" if report.run_dir else ""
    console.print(
        Text(f"{report.explanation}", style=colour) + Text(f"  ({report.seconds:.1f}s{files})")
    )
    if report.debug_index is not None:
        debug_index(report.debug_index, console)
    trace = getattr(report, "trace", None)
    if trace:
        console.print(f"trace: {trace['dir']}", highlight=False)
        if trace.get("tlparse"):
            console.print(f"tlparse: {trace['tlparse']}", highlight=False)
        for graph, page in sorted((trace.get("pages") or {}).items()):
            console.print(f"  failing graph {graph}: {page}", highlight=False)
        if trace.get("why"):
            console.print(f"  ({trace['why']})", highlight=False)
    if getattr(report, "next_command", None):
        console.print(f"next: {report.next_command}", highlight=False)


def _records(records: list[dict[str, Any]], console: Console) -> None:
    for r in records:
        console.print(
            Text(
                f"recorded the frame {r['function']} that failed in Dynamo; replay only that frame: "
            )
            + Text(f"tcompile replay {r['path']}", style="bold")
        )


def report_result(report: Any, console: Console) -> None:
    console.print()
    if not report.report:
        console.print(Text(report.message))
        _files(report.run_dir, console)
        return
    console.print(Text(report.title or "", style="bold"))
    for k, bug in enumerate(report.bugs, 1):
        mini = bug.get("minify") or {}
        state = "verified" if mini.get("verified") else "NOT verified" if mini.get("repro") else "-"
        console.print(Text(f"  {k}. {bug['title']}  (repro: {mini.get('repro') or '-'}, {state})"))
    console.print(Text(f"report: {report.report} ({report.characters} characters)"))

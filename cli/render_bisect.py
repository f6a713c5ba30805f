"""Rich rendering of a bisect's result: its runs and compiles, the culprit, how it was
found and confirmed, torch's own hooks to run it by hand."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.stack import stage_words

from .render import _divergence_text, _files

# what a step showed: "no" is only a pass (a step that failed another way is not one)
_SHOWS = {
    "same_failure": "[red]yes[/red]",
    "pass": "[green]no[/green]",
    "other_failure": "[yellow]another failure[/yellow]",
    "timeout": "[yellow]ran past its limit[/yellow]",
    "crash": "[yellow]crashed[/yellow]",
}


def _instead(found: dict[str, Any] | None) -> str | None:
    """capture_bisect.toggle_instead: the application the search ended at."""
    if not found:
        return None
    return (
        f"{found.get('subsystem')} #{found.get('application')} {found.get('detail') or ''}: "
        f"with it alone off the graph fails another way ({found.get('fails')})"
    )


def _confirmed(confirmed: str | None, steps: list[dict[str, Any]]) -> str | None:
    """How the whole program ran with the culprit off."""
    if confirmed is None:
        return None
    if confirmed == "pass":
        return "the whole program passes with it off"
    other = next((s.get("other") for s in reversed(steps) if s.get("run")), None)
    return f"NOT a pass: the whole program ends {confirmed} with it off" + (
        f" ({other})" if other else ""
    )


def bisect_result(report: Any, console: Console) -> None:
    console.print()
    if report.steps:
        table = Table(title="Runs", title_justify="left")
        for col in ("run", "configuration", "failure shows", "seconds"):
            table.add_column(col)
        for s in report.steps:
            table.add_row(
                str(s["run"]) if s.get("run") is not None else f"graph {s.get('judgement')}",
                s["what"],
                _SHOWS.get(
                    s.get("verdict") or "", "[red]yes[/red]" if s["failed"] else "[green]no[/green]"
                ),
                f"{s['seconds']:.1f}",
            )
        console.print(table)
    if report.exit_code != ExitCode.COMPILER_FAILURE or report.stage is None:
        console.print(report.message, highlight=False)
        return
    res = Table(title="Result", title_justify="left", show_header=False)
    res.add_column("what")
    res.add_column("answer")
    for label, value in (
        ("failure", report.signature),
        ("stage", stage_words(report.stage)),
        ("graph", None if report.graph is None else f"{report.graph} ({report.graph_kind})"),
        ("subsystem", report.subsystem),
        ("application", report.application),
        ("detail", report.detail),
        ("diverges", _divergence_text(getattr(report, "divergence", None) or {})),
        ("instead of", _instead(getattr(report, "instead_of", None))),
        ("runs", f"{report.runs} in {report.seconds:.1f}s"),
        (
            "how",
            f"on the saved graph ({report.graph_judgements} compiles of it)"
            if getattr(report, "from_capture", False)
            else (
                f"by running the program: {report.fallback}"
                if getattr(report, "fallback", None)
                else None
            ),
        ),
        ("confirmed", _confirmed(getattr(report, "confirmed", None), report.steps)),
        (
            "flaky",
            f"YES: {report.flaky_detail}"
            if report.flaky
            else ("no" if report.flaky is False else "not checked (the failure leaves no doubt)"),
        ),
    ):
        if value is not None:
            res.add_row(label, str(value))
    console.print(res)
    if report.bad:
        import shlex

        cmd = shlex.join(getattr(report, "command", None) or ["<command>"])
        bad = " ".join(f"{k}={v}" for k, v in report.bad.items())
        good = " ".join(f"{k}={v}" for k, v in report.good.items())
        console.print(
            f"by hand (torch's own bisection hooks):\n  fails:  {bad} {cmd}\n"
            f"  passes: {good} {cmd}",
            highlight=False,
        )
    if report.minify:
        console.print(
            f"repro: {report.minify.get('repro')} ({'verified' if report.minify.get('verified') else 'NOT verified'})",
            highlight=False,
        )
    elif report.next_command:
        console.print(f"next: {report.next_command}", highlight=False)
    _files(report.run_dir, console)

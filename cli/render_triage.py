"""Rich rendering of a triage: the scripts' table, the clusters' table."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from tcompile.repro.jobs.triage import TriageReport

_VERDICT_STYLE = {
    "bug": "bold red",
    "flaky": "yellow",
    "timeout": "yellow",
    "error": "magenta",
    "not_compiler": "dim",
    "clean": "green",
    "needs_gpu": "blue",
}


def triage_result(report: TriageReport, console: Console) -> None:
    console.print()
    table = Table(title="scripts", show_lines=False)
    for col in ("script", "verdict", "culprit", "cluster", "repro", "s"):
        table.add_column(col)
    for r in report.scripts:
        verdict = str(r.verdict)
        if r.flaky and r.flaky.of:
            verdict += f" {r.flaky.failed}/{r.flaky.of}"
        if (r.also or {}).get("result"):
            verdict += f" ({(r.also or {})['result']})"
        table.add_row(
            Text(os.path.relpath(r.path)),
            Text(verdict, style=_VERDICT_STYLE.get(str(r.verdict), "")),
            Text((r.culprit or {}).get("text") or "-"),
            Text(r.cluster or "-"),
            Text(f"{r.repro_lines} lines" if r.repro_lines else "-"),
            Text(f"{r.seconds:.0f}" + (" (cached)" if r.cached else "")),
        )
    console.print(table)
    if report.clusters:
        ct = Table(title="clusters (by culprit; members checked by running its switch)")
        for col in ("id", "culprit", "kind", "members", "repro"):
            ct.add_column(col)
        for c in report.clusters:
            ct.add_row(
                c.id,
                Text(str(c.culprit)),
                Text(c.kind or "-"),
                Text("\n".join(os.path.relpath(m) for m in c.members)),
                Text(os.path.relpath(c.repro) if c.repro else "-"),
            )
        console.print(ct)
    console.print(Text(report.message, style="bold"))
    console.print(Text(f"pages: {report.page}, {report.html}"))

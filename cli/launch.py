"""Entry point of a generated minifier_launcher.py (the script prints; the library
does not)."""

from __future__ import annotations

import sys
from typing import Any


def launch_main(path: str, data: dict[str, Any], argv: list[str]) -> int:
    """``python minifier_launcher.py [run]``.  ``data`` is the launcher's own literal;
    the launcher file is read again (and checked) by the job."""
    from tcompile.compiler.exitcodes import ExitCode, UsageError
    from tcompile.repro.jobs.launcher_job import launch
    from tcompile.repro.jobs.minify_types import GraphMinifyReport

    del data
    try:
        report = launch(path, argv, trust=True)  # running the script is the act of trust
    except UsageError as exc:
        print(f"tcompile: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    print(report.message)
    if isinstance(report, GraphMinifyReport) and report.repro:
        state = "verified" if report.verified else "NOT verified"
        print(
            f"nodes {report.nodes_before} -> {report.nodes_after}, {report.calls} calls, "
            f"{report.seconds:.1f}s; repro: {report.repro} ({state})"
        )
    return report.exit_code

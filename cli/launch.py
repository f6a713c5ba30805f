"""Entry point of a generated minifier_launcher.py (the script prints; the library
does not)."""

from __future__ import annotations

import sys
from typing import Any


def launch_main(path: str, data: dict[str, Any], argv: list[str]) -> int:
    from tcompile.compiler.runner import UsageError
    from tcompile.minify_job import launch, serve_launcher

    if "--serve" in argv:  # a worker for the launcher's own minification
        serve_launcher(path, data)
        return 0
    try:
        report = launch(path, argv)
    except UsageError as exc:
        print(f"tcompile: error: {exc}", file=sys.stderr)
        return 2
    print(report.message)
    if report.repro:
        state = "verified" if report.verified else "NOT verified"
        print(
            f"nodes {report.nodes_before} -> {report.nodes_after}, {report.calls} calls, "
            f"{report.seconds:.1f}s; repro: {report.repro} ({state})"
        )
    return report.exit_code

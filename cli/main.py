"""The ``tcompile`` command line.  Parses, calls the library, renders.  No logic.

torch is imported lazily inside commands so that ``tcompile --help`` is instant.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

import click

from tcompile import __version__

EXIT_INTERNAL = 4


def _command_from_args(argv: tuple[str, ...]) -> list[str]:
    """``SCRIPT [ARGS]`` runs with this Python; anything else is a command (``-- COMMAND``)."""
    from tcompile.compiler.runner import UsageError, check_script

    if not argv:
        raise UsageError("missing SCRIPT (or -- COMMAND ...)")
    first = argv[0]
    if first.startswith("-") and first != "-":
        raise UsageError(f"no such option: {first} (tcompile's options go before SCRIPT)")
    if first.endswith(".py") or (os.path.exists(first) and not shutil.which(first)):
        check_script(first)
        return [sys.executable, first, *argv[1:]]
    if shutil.which(first) is None:
        raise UsageError(f"command not found: {first}")
    # `python script.py ...`: check the script too, so that a typo is a usage error
    if os.path.basename(first).startswith("python"):
        for arg in argv[1:]:
            if arg.endswith(".py"):
                check_script(arg)
                break
            if not arg.startswith("-"):
                break
    return list(argv)


def _fail_usage(message: str) -> None:
    click.echo(f"tcompile: error: {message}", err=True)
    sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tcompile")
def main() -> None:
    """Find, classify and shrink bugs in PyTorch's torch.compile stack.

    Exit codes: 0 no compiler failure, 1 compiler failure found, 2 usage error,
    3 the program fails the same way without torch.compile (not a compiler bug),
    4 tcompile itself failed.
    """


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--backend",
    default=None,
    envvar="TCOMPILE_BACKEND",
    help="Compile every graph with this stage or backend instead of the script's own "
    "(eager, aot_eager, aot_eager_decomp_partition, inductor, or a registered name).",
)
@click.option(
    "--accuracy",
    "accuracy",
    flag_value="loose",
    default=None,
    help="Check compiled results against eager and a float64 reference.",
)
@click.option(
    "--strict-accuracy",
    "accuracy",
    flag_value="strict",
    help="Check compiled results against eager directly, with tight tolerances.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    envvar="TCOMPILE_TIMEOUT",
    help="Kill the command (its whole process group) after this many seconds.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout (the script's stdout goes to stderr).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for tcompile's files (default: a new temporary directory).",
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def run(
    backend: str | None,
    accuracy: str | None,
    timeout: float | None,
    as_json: bool,
    out: str | None,
    argv: tuple[str, ...],
) -> None:
    """Run SCRIPT [ARGS] (or -- COMMAND ...) under the wrapped torch.compile stack.

    Reports every compiled graph and every compiler failure, classified as capture,
    compile, runtime, accuracy, crash or timeout.
    """
    from rich.console import Console

    from tcompile.compiler.runner import UsageError, check_backend, run_and_classify

    err = Console(stderr=True)
    try:
        command = _command_from_args(argv)
        check_backend(backend)
        observer = _observer(err, quiet=False)
        report = run_and_classify(
            command,
            out=out,
            stage=backend,
            accuracy=accuracy or "off",
            timeout=timeout,
            observer=observer,
            stdout=sys.stderr if as_json else sys.stdout,
            stderr=sys.stderr,
        )
    except UsageError as exc:
        _fail_usage(str(exc))
        return
    except KeyboardInterrupt:
        err.print("tcompile: interrupted")
        sys.exit(130)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, default=str))
    else:
        _render_run(report, Console())
    sys.exit(report.exit_code)


def _observer(console: Any, quiet: bool) -> Any:
    from tcompile.cli.render import ConsoleObserver

    return ConsoleObserver(console, quiet=quiet)


def _render_run(report: Any, console: Any) -> None:
    from tcompile.cli.render import failures_table, graphs_table

    console.print()
    if report.graphs:
        console.print(graphs_table(report.graphs))
    else:
        console.print(
            "No graph was compiled (the program never called a torch.compile'd function)."
        )
    if report.failures:
        console.print(failures_table(report.failures))
    for note in report.notes:
        console.print(f"[yellow]note: graph {note['graph']}: {note['text']}[/yellow]")
    colour = {"clean": "green", "compiler-failure": "red", "not-a-compiler-bug": "yellow"}[
        report.verdict
    ]
    console.print(
        f"[{colour}]{report.explanation}[/{colour}]  "
        f"({report.seconds:.1f}s, files in {report.run_dir})",
        highlight=False,
    )


if __name__ == "__main__":  # pragma: no cover
    main()

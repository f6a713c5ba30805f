"""The options commands share, declared once: same names, help, bounds and
``TCOMPILE_*`` environment defaults on every command that takes them.

Choices are ``str`` enums owned by the library, which compares with them end to end:
``AccuracyMode`` (compiler/accuracy.py) and minify's ``After`` (repro/jobs/minify_types.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..compiler.accuracy import AccuracyMode

F = TypeVar("F", bound=Callable[..., Any])


# Environment defaults: TCOMPILE_BACKEND, TCOMPILE_TIMEOUT, TCOMPILE_JOBS, TCOMPILE_OUT.
ENV = {
    "backend": "TCOMPILE_BACKEND",
    "timeout": "TCOMPILE_TIMEOUT",
    "jobs": "TCOMPILE_JOBS",
    "out": "TCOMPILE_OUT",
}

# commands that run a program: options before SCRIPT are tcompile's, the rest the script's
PROGRAM = {"ignore_unknown_options": True, "allow_interspersed_args": False}


def _apply(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def wrap(f: F) -> F:
        for d in reversed(decorators):
            f = d(f)
        return f

    return wrap


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document on stdout (the script's own stdout goes to stderr).",
)
out_option = click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    envvar=ENV["out"],
    help="Directory for everything tcompile writes (default: a new temporary directory). "
    f"Env: {ENV['out']}.",
)
only_option = click.option(
    "--only",
    "only",
    default=None,
    metavar="FUNCTION",
    help="Compile only frames of this function name (like TORCHDYNAMO_DEBUG_FUNCTION).",
)
match_option = click.option(
    "--match", default=None, help="Only the failure whose signature matches this regex."
)
report_option = click.option(
    "--report",
    "write_report",
    is_flag=True,
    help="Also write report.md, ready for a PyTorch bug report (see tcompile report).",
)
# SCRIPT [ARGS]... or -- COMMAND [ARGS]...: everything after SCRIPT is the script's
program_argument = click.argument("argv", nargs=-1, type=click.UNPROCESSED)


class Seconds(click.ParamType):
    """A time limit: a finite number of seconds, more than 0 and at most a week."""

    name = "seconds"
    MAX = 7 * 24 * 3600.0

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        import math

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not 0 < seconds <= self.MAX:
            self.fail(f"{value!r} is not between 0 and {self.MAX:.0f} seconds", param, ctx)
        return seconds


MAX_JOBS = 256  # workers or runs in parallel: each one is a copy of the program


def timeout_option(
    what: str = "Kill a run of the program (its whole process group)",
) -> Callable[[F], F]:
    return click.option(
        "--timeout",
        type=Seconds(),
        default=None,
        envvar=ENV["timeout"],
        help=f"{what} after this many seconds. Env: {ENV['timeout']}.",
    )


def backend_option(what: str) -> Callable[[F], F]:
    return click.option(
        "--backend",
        default=None,
        envvar=ENV["backend"],
        help=f"{what} (eager, aot_eager, aot_eager_decomp_partition, inductor, or a "
        f"registered name). Env: {ENV['backend']}.",
    )


def jobs_option(what: str, default: int | None = 1) -> Callable[[F], F]:
    return click.option(
        "--jobs",
        type=click.IntRange(min=1, max=MAX_JOBS),
        default=default,
        show_default=default is not None,
        envvar=ENV["jobs"],
        help=f"{what}. Env: {ENV['jobs']}.",
    )


def accuracy_options(what: str = "Check") -> Callable[[F], F]:
    return _apply(
        click.option(
            "--accuracy",
            "accuracy",
            flag_value=AccuracyMode.LOOSE.value,
            default=AccuracyMode.OFF.value,
            help=f"{what} compiled results against eager and a float64 reference.",
        ),
        click.option(
            "--strict-accuracy",
            "accuracy",
            flag_value=AccuracyMode.STRICT.value,
            help=f"{what} compiled results against eager directly, with tight tolerances.",
        ),
    )


_CODES = {
    "run": "0 no compiler failure; 1 a compiler failure was found",
    "bisect": "0 no compiler failure (nothing to bisect); 1 the culprit was named",
    "minify": "0 no compiler failure (nothing written); 1 a failure was minified (or could not be)",
    "replay": "0 the frame runs without a failure; 1 it fails (the same failure or another)",
    "explain": "0 the report was made; 1 the program died of a frame Dynamo could not capture",
    "report": "0 no compiler failure (nothing to report); 1 report.md was written",
    "merge": "0 no compiler failure in any run; 1 a compiler failure in some run",
    "triage": "0 no compiler bug in any script; 1 a compiler bug (or a flaky one) in some script",
}


def exit_codes(command: str) -> str:
    """The epilog of a command's --help: its exit codes."""
    rest = "2 bad input (a script, a flag, a file); "
    if command in ("run", "bisect", "minify", "replay", "report", "merge"):
        rest += "3 the program fails the same way without torch.compile: not a compiler bug; "
    if command in ("run", "bisect", "minify", "report", "merge"):
        rest += (
            "5 it failed once and passed when run again, with torch.compile and without: flaky; "
        )
    rest += "4 tcompile itself failed; 130 interrupted (Ctrl-C, SIGTERM)"
    return f"\b\nExit codes: {_CODES[command]};\n{rest}."

"""The options commands share, declared once: same names, help, bounds and
``TCOMPILE_*`` environment defaults on every command that takes them.

Choices are ``str`` enums (tests/test_cli_fast.py checks every member is handled).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class AccuracyMode(str, enum.Enum):
    """``--accuracy`` / ``--strict-accuracy``: how compiled results are judged."""

    OFF = "off"  # failures that raise or crash only
    LOOSE = "loose"  # against eager and a float64 reference (--accuracy)
    STRICT = "strict"  # against eager directly, torch.testing's tolerances


class After(str, enum.Enum):
    """``minify --after``: which graph is minified."""

    AUTO = "auto"  # where the failure shows (today: the Dynamo graph)
    DYNAMO = "dynamo"  # the Dynamo graph, judged against the eager Dynamo graph
    AOT = "aot"  # the AOT graph inductor was handed, compiled by compile_fx_inner


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


def json_option(f: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON document on stdout (the script's own stdout goes to stderr).",
    )(f)


def out_option(f: F) -> F:
    return click.option(
        "--out",
        type=click.Path(file_okay=False),
        default=None,
        envvar=ENV["out"],
        help="Directory for everything tcompile writes (default: a new temporary directory). "
        f"Env: {ENV['out']}.",
    )(f)


def timeout_option(
    what: str = "Kill a run of the program (its whole process group)",
) -> Callable[[F], F]:
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
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


def jobs_option(what: str) -> Callable[[F], F]:
    return click.option(
        "--jobs",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
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


def only_option(f: F) -> F:
    return click.option(
        "--only",
        "only",
        default=None,
        metavar="FUNCTION",
        help="Compile only frames of this function name (like TORCHDYNAMO_DEBUG_FUNCTION).",
    )(f)


def match_option(f: F) -> F:
    return click.option(
        "--match", default=None, help="Only the failure whose signature matches this regex."
    )(f)


def program_argument(f: F) -> F:
    """SCRIPT [ARGS]... or -- COMMAND [ARGS]...: everything after SCRIPT is the script's."""
    return click.argument("argv", nargs=-1, type=click.UNPROCESSED)(f)

"""The command group and the one path from a job to output and an exit code.

:func:`finish` runs a job and turns its outcome into output (JSON or rich) and an exit
code (compiler/exitcodes.py); :class:`Group` gives every error one format.  The
commands themselves are main.py.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from tcompile import __version__
from tcompile.compiler.exitcodes import ExitCode, InternalError, UsageError

from . import args

T = TypeVar("T")


def flags(cls: type[T]) -> Callable[[Callable[[T], None]], Callable[..., None]]:
    """A command's options as one record (cli/flags.py): click passes them by name,
    the command gets ``cls(**them)``.  Goes right above the ``def``."""

    def wrap(fn: Callable[[T], None]) -> Callable[..., None]:
        @functools.wraps(fn)
        def command(**given: Any) -> None:
            fn(cls(**given))

        return command

    return wrap


def observer(quiet: bool = False) -> Any:
    from .render import ConsoleObserver, console

    return ConsoleObserver(console(stderr=True), quiet=quiet)


def common(
    out: str | None, timeout: float | None, as_json: bool, quiet: bool = False
) -> dict[str, Any]:
    """The keyword arguments every job takes the same way."""
    return {"out": out, "timeout": timeout, "observer": observer(quiet), **args.streams(as_json)}


def finish(
    job: Callable[[], Any], *, as_json: bool, render: Callable[[Any, Any], None]
) -> NoReturn:
    """Run a job; print its report (JSON or rich) and exit with its exit code.  Bad
    input is one line and exit 2; Ctrl-C (or SIGTERM) is exit 130.  A torch release
    this repository was not tested with gets one warning line first."""
    from tcompile.compiler.stack import torch_version_warning

    warning = torch_version_warning()
    if warning:
        click.echo(f"tcompile: warning: {warning}", err=True)
    try:
        report = job()
    except UsageError as exc:
        fail_usage(str(exc), as_json)
    except InternalError as exc:
        path = keep_traceback()
        click.echo(
            f"tcompile: internal error: {one_line(str(exc))} (traceback in {path})", err=True
        )
        exit_with(ExitCode.INTERNAL, "internal-error", one_line(str(exc)), as_json, traceback=path)
    except KeyboardInterrupt:
        click.echo("tcompile: interrupted", err=True)
        exit_with(
            ExitCode.INTERRUPTED,
            "interrupted",
            "interrupted before anything was found",
            as_json,
            interrupted=True,
        )
    # the one invariant (compiler/invariant.py): a clean verdict never contradicts how
    # the program's processes ended; a report that would is tcompile's own error
    said = getattr(report, "contradiction", None)
    why = said() if callable(said) and int(report.exit_code) == ExitCode.OK else None
    if why:
        message = f"tcompile would report the program clean, but {why}"
        click.echo(f"tcompile: internal error: {message}", err=True)
        exit_with(ExitCode.INTERNAL, "internal-error", message, as_json)
    try:
        if as_json:
            click.echo(json.dumps(report.to_json(), indent=2, default=str))
        else:
            from .render import console

            render(report, console())
        sys.stdout.flush()
    except BrokenPipeError:
        # `tcompile run x.py | head -1`: the reader went away; the answer stands
        quiet_stdout()
    sys.exit(int(report.exit_code))


def quiet_stdout() -> None:
    """stdout's reader is gone: send the rest (and the flush at exit) nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def fail_usage(message: str, as_json: bool | None = None) -> NoReturn:
    # one line whatever the message holds: a file name may carry a line break (\x85, \u2028)
    click.echo(f"tcompile: error: {one_line(message)}", err=True)
    exit_with(ExitCode.USAGE, "usage-error", one_line(message), as_json)


def exit_with(
    code: ExitCode, verdict: str, explanation: str, as_json: bool | None, **more: Any
) -> NoReturn:
    """Exit with ``code``; under ``--json`` (``None``: if the command line asks for it)
    stdout still gets one document: every exit path of every command prints one."""
    if as_json is None:
        as_json = json_asked(sys.argv[1:])
    if as_json:
        doc = {"exit_code": int(code), "verdict": verdict, "explanation": explanation, **more}
        if code == ExitCode.USAGE:
            doc["error"] = explanation
        try:
            click.echo(json.dumps(doc, indent=2))
            sys.stdout.flush()
        except BrokenPipeError:
            quiet_stdout()
    sys.exit(code)


def json_asked(argv: list[str]) -> bool:
    """``--json`` among tcompile's own options: before the script (or ``--``), which
    takes everything after it."""
    for before, arg in zip(["", *argv], argv):
        if arg == "--json":
            return True
        if arg == "--" or (arg.endswith((".py", ".pkl")) and before not in _PATH_OPTIONS):
            return False
    return False


_PATH_OPTIONS = {"--include", "--out", "--debug-dir", "--trace", "--code", "--peers"}


def one_line(text: str) -> str:
    return " ".join(text.split())


def raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


class Group(click.Group):
    """One error format: a usage error is ``tcompile: error: ...`` on one line (exit
    2); an unexpected error of tcompile itself is one line and exit 4, with the
    traceback kept in a file (a bug report for tcompile, not a crash in the user's face)."""

    def main(self, *a: Any, **kw: Any) -> Any:  # type: ignore[override]
        try:
            return super().main(*a, standalone_mode=False, **kw)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
            sys.exit(ExitCode.USAGE)
        except click.UsageError as exc:
            hint = (
                f" (see tcompile {exc.ctx.info_name} --help)" if exc.ctx and exc.ctx.parent else ""
            )
            fail_usage(one_line(exc.format_message()) + hint)
        except click.ClickException as exc:
            fail_usage(one_line(exc.format_message()))
        except (click.Abort, KeyboardInterrupt):
            click.echo("tcompile: interrupted", err=True)
            exit_with(ExitCode.INTERRUPTED, "interrupted", "interrupted", None, interrupted=True)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (
            click.exceptions.Exit,
            click.ClickException,
            click.Abort,
            SystemExit,
            KeyboardInterrupt,
        ):
            raise
        except BrokenPipeError:  # `tcompile env | head`: the reader went away
            quiet_stdout()
            sys.exit(ExitCode.OK)
        except Exception as exc:
            path = keep_traceback()
            said = f"{type(exc).__name__}: {one_line(str(exc))} (traceback in {path})"
            click.echo(f"tcompile: internal error: {said}", err=True)
            exit_with(ExitCode.INTERNAL, "internal-error", said, None, traceback=path)


ERROR_DIR_ENV = "TCOMPILE_ERROR_DIR"  # where an internal error's traceback goes (triage sets it)


def keep_traceback() -> str:
    """The traceback of the exception being handled, kept in a file for a bug report of
    tcompile's own: under ``$TCOMPILE_ERROR_DIR``, else the command's ``--out``, else
    the system's temporary folder.  Its path."""
    import tempfile
    import traceback

    folder = os.environ.get(ERROR_DIR_ENV) or _out_of(sys.argv[1:]) or tempfile.gettempdir()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, path = tempfile.mkstemp(prefix="tcompile-internal-error-", suffix=".txt", dir=folder)
    except OSError:
        fd, path = tempfile.mkstemp(prefix="tcompile-internal-error-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(f"tcompile {__version__}\nargv: {sys.argv}\n\n")
        traceback.print_exc(file=f)
    return path


def _out_of(argv: list[str]) -> str | None:
    """``--out DIR`` among tcompile's own options (before the script)."""
    for before, arg in zip(argv, argv[1:]):
        if before == "--out":
            return arg
        if before == "--" or before.endswith((".py", ".pkl")):
            return None
    for arg in argv:
        if arg.startswith("--out="):
            return arg.split("=", 1)[1]
    return None


def version() -> str:
    """``tcompile X.Y.Z`` and the torch it found (read without importing torch)."""
    from importlib import metadata

    try:
        found = f"torch {metadata.version('torch')}"
    except metadata.PackageNotFoundError:
        found = "torch not found"
    return f"tcompile {__version__} ({found}, Python {sys.version.split()[0]})"

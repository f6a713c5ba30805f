"""What follows tcompile's options: SCRIPT [ARGS] or -- COMMAND [ARGS], checked once."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from tcompile.compiler.exitcodes import UsageError


def command_from_args(argv: tuple[str, ...]) -> list[str]:
    """``SCRIPT [ARGS]`` runs with this Python, as does ``-m MODULE [ARGS]`` (``python
    -m pkg.train``, from the working folder); anything else is a command (``--
    COMMAND``)."""
    from tcompile.compiler.runner import check_script

    warn_misplaced(argv)
    if not argv:
        raise UsageError("missing SCRIPT (or -m MODULE, or -- COMMAND ...)")
    first = argv[0]
    if first == "-m" or (first.startswith("-m") and len(first) > 2 and first[2] != "-"):
        name = argv[1] if first == "-m" and len(argv) > 1 else first[2:]
        rest = argv[2:] if first == "-m" else argv[1:]
        if not name or name.startswith("-"):
            raise UsageError("-m needs a module name (tcompile run -m pkg.train ARGS)")
        check_module(name)
        return [sys.executable, "-m", name, *rest]
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


def check_module(name: str) -> None:
    """``-m pkg.train``: the module is a file under the working folder (or PYTHONPATH,
    or an installed package): else a usage error, in one line.  Nothing is imported."""
    from tcompile.repro.project import entry_of

    try:
        entry_of([sys.executable, "-m", name])
        return
    except UsageError:
        pass
    import importlib.util

    try:  # an installed module (no parent package is imported for a top-level name)
        if "." not in name and importlib.util.find_spec(name) is not None:
            return
    except (ImportError, ValueError):
        pass
    raise UsageError(f"-m {name}: no module named {name} under {os.getcwd()}")


def streams(as_json: bool) -> dict[str, Any]:
    """Where the program's own output goes: under --json, stdout is tcompile's."""
    return {"stdout": sys.stderr if as_json else sys.stdout, "stderr": sys.stderr}


def abs_dir(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path}: {exc.strerror or exc}") from None
    return os.path.abspath(path)


def program(argv: tuple[str, ...], backend: str | None = None) -> list[str]:
    """The command to run, with ``--backend`` checked too: bad input fails here, once."""
    from tcompile.compiler.runner import check_backend

    command = command_from_args(argv)
    check_backend(backend)
    return command


def warn_misplaced(argv: tuple[str, ...]) -> None:
    """``tcompile run x.py --accuracy``: the option goes to the script (that is the
    contract: everything after SCRIPT is the script's), but say so in one line."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None or not argv:
        return
    ours = {name for p in ctx.command.params for name in getattr(p, "opts", [])}
    ours -= {"-h", "--help"}
    for arg in argv[1:]:
        if arg == "--":
            break
        if arg.split("=", 1)[0] in ours:
            click.echo(
                f"tcompile: warning: {arg} comes after {argv[0]}, so it goes to the script; "
                f"tcompile's options go before SCRIPT",
                err=True,
            )
            return


def without(items: tuple[str, ...]) -> dict[str, Any] | None:
    """``--without SUBSYSTEM:NAME ...`` as the run's bisection configuration (None: none
    given, the run as it is); a bad one is a usage error."""
    if not items:
        return None
    from tcompile.compiler.stack import without as parse

    try:
        return parse(list(items))
    except ValueError as exc:
        raise UsageError(str(exc)) from None

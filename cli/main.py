"""The ``tcompile`` command line.  Parses, calls the library, renders.  No logic.

torch is imported lazily inside commands so that ``tcompile --help`` is instant.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
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


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _fail_usage(message: str) -> None:
    click.echo(f"tcompile: error: {message}", err=True)
    sys.exit(2)


class _Group(click.Group):
    """Turns an unexpected error of tcompile itself into one line and exit 4, with the
    traceback kept in a file (a bug report for tcompile, not a crash in the user's face)."""

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
        except BrokenPipeError:  # `tcompile ... | head`: the reader went away
            sys.exit(0)
        except Exception as exc:
            import tempfile
            import traceback

            fd, path = tempfile.mkstemp(prefix="tcompile-internal-error-", suffix=".txt")
            with os.fdopen(fd, "w") as f:
                f.write(f"tcompile {__version__}\nargv: {sys.argv}\n\n")
                traceback.print_exc(file=f)
            click.echo(
                f"tcompile: internal error: {type(exc).__name__}: {exc} (traceback in {path})",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tcompile")
def main() -> None:
    """Find, classify and shrink bugs in PyTorch's torch.compile stack.

    Exit codes: 0 no compiler failure, 1 compiler failure found, 2 usage error,
    3 the program fails the same way without torch.compile (not a compiler bug),
    4 tcompile itself failed.
    """
    # SIGTERM (a CI timeout, `kill`) ends tcompile like Ctrl-C: the programs it runs,
    # each in its own process group, are killed on the way out.
    signal.signal(signal.SIGTERM, _raise_interrupt)


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
@click.option(
    "--debug-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep inductor's debug artifacts (output_code.py, IR, FX graphs) per graph here.",
)
@click.option(
    "--only",
    "only",
    default=None,
    metavar="FUNCTION",
    help="Compile only frames of this function name (like TORCHDYNAMO_DEBUG_FUNCTION).",
)
@click.option(
    "--record",
    "record_all",
    is_flag=True,
    help="Record every frame whose conversion fails in Dynamo, also those Dynamo then "
    "skips and runs eagerly (by default: the frames the program dies of).",
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def run(
    backend: str | None,
    accuracy: str | None,
    timeout: float | None,
    as_json: bool,
    out: str | None,
    debug_dir: str | None,
    only: str | None,
    record_all: bool,
    argv: tuple[str, ...],
) -> None:
    """Run SCRIPT [ARGS] (or -- COMMAND ...) under the wrapped torch.compile stack.

    Reports every compiled graph and every compiler failure, classified as capture,
    compile, runtime, accuracy, crash or timeout.  A frame that fails in TorchDynamo
    is recorded (record.pkl in the run's directory) for `tcompile replay`.
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
            debug_dir=_abs_dir(debug_dir),
            only=only,
            record="all" if record_all else "failures",
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
        if report.debug_index is not None:
            _render_debug_index(report.debug_index, Console())
    sys.exit(report.exit_code)


def _abs_dir(path: str | None) -> str | None:
    from tcompile.compiler.runner import UsageError

    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {path}: {exc.strerror or exc}") from None
    return os.path.abspath(path)


def _render_debug_index(index: list[dict[str, Any]], console: Any) -> None:
    from rich.table import Table

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


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--code",
    "code_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also keep inductor's generated code and IR per graph in this directory.",
)
@click.option(
    "--only",
    "only",
    default=None,
    metavar="FUNCTION",
    help="Compile only frames of this function name (like TORCHDYNAMO_DEBUG_FUNCTION).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Kill the command after this many seconds.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for tcompile's files (default: a new temporary directory).",
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def explain(
    as_json: bool,
    code_dir: str | None,
    only: str | None,
    timeout: float | None,
    out: str | None,
    argv: tuple[str, ...],
) -> None:
    """Graph breaks, recompilations and compile time of SCRIPT [ARGS] (or -- COMMAND ...)."""
    from rich.console import Console

    from tcompile.compiler.explain import explain as run_explain
    from tcompile.compiler.runner import UsageError

    err = Console(stderr=True)
    try:
        command = _command_from_args(argv)
        report = run_explain(
            command,
            out=out,
            timeout=timeout,
            observer=_observer(err, quiet=True),
            stdout=sys.stderr if as_json else sys.stdout,
            stderr=sys.stderr,
            debug_dir=_abs_dir(code_dir),
            only=only,
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
        from tcompile.cli.render import explain_tables

        console = Console()
        for table in explain_tables(report):
            console.print(table)
        if report.debug_index is not None:
            _render_debug_index(report.debug_index, console)
    sys.exit(report.exit_code)


@main.command()
@click.option(
    "--backend",
    default=None,
    help="Compile the frame with this stage or backend instead of the recorded one.",
)
@click.option(
    "--no-fullgraph",
    "no_fullgraph",
    is_flag=True,
    help="Compile with fullgraph=False (graph breaks allowed) whatever was recorded.",
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
    "--info",
    is_flag=True,
    help="Print the record's metadata only: nothing is unpickled or executed.",
)
@click.option(
    "--minify",
    "then_minify",
    is_flag=True,
    help="When the replayed failure is in a backend (a graph), continue into tcompile minify.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Kill the replay after this many seconds.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for tcompile's files (default: a new temporary directory).",
)
@click.argument("record", type=click.Path(dir_okay=True))
def replay(
    backend: str | None,
    no_fullgraph: bool,
    accuracy: str | None,
    info: bool,
    then_minify: bool,
    timeout: float | None,
    as_json: bool,
    out: str | None,
    record: str,
) -> None:
    """Re-run only the frame recorded in RECORD under torch.compile.

    RECORD is a record.pkl written by tcompile (run, bisect, minify) or a record of
    torch's own TORCH_COMPILE_REPLAY_RECORD=1.  Exit 1 when the frame fails (the
    same failure or a different one: both are shown), 0 when it does not, 3 when it
    fails the same way without torch.compile (not a compiler bug).

    Replaying EXECUTES the recorded program's code (its functions, its pickled
    objects): replay only records you trust.  --info executes nothing.
    """
    from rich.console import Console

    from tcompile.compiler.runner import UsageError, check_backend

    err = Console(stderr=True)
    try:
        if info:
            from tcompile.compiler.replay import load_info

            meta = load_info(record)
            if as_json:
                click.echo(json.dumps(meta.to_json(), indent=2, default=str))
            else:
                from tcompile.cli.render import record_info

                record_info(meta, Console())
            sys.exit(0)
        from tcompile.compiler.replay import replay as run_replay

        check_backend(backend)
        report = run_replay(
            record,
            backend=backend,
            fullgraph=False if no_fullgraph else None,
            accuracy=accuracy or "off",
            timeout=timeout,
            out=out,
            observer=_observer(err, quiet=False),
            stdout=sys.stderr if as_json else sys.stdout,
            stderr=sys.stderr,
        )
        for warning in report.warnings:
            click.echo(f"tcompile: warning: {warning}", err=True)
        minified = None
        target = next((f for f in report.failures if f.get("graph") is not None), None)
        if then_minify and target is not None:
            from tcompile.minify_job import run_minify

            minified = run_minify(
                report.command,
                accuracy=accuracy or "off",
                backend=backend,
                graph=int(target["graph"]),
                timeout=timeout,
                out=out,
                observer=_observer(err, quiet=False),
                stdout=sys.stderr if as_json else sys.stdout,
                stderr=sys.stderr,
            )
        elif then_minify and report.failures:
            err.print(
                "tcompile: the replayed failure is in Dynamo's capture, before any graph: "
                "nothing to minify",
                highlight=False,
            )
    except UsageError as exc:
        _fail_usage(str(exc))
        return
    except KeyboardInterrupt:
        err.print("tcompile: interrupted")
        sys.exit(130)
    if as_json:
        data = report.to_json()
        if minified is not None:
            data["minify"] = minified.to_json()
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        from tcompile.cli.render import replay_summary

        console = Console()
        replay_summary(report, console)
        if minified is not None:
            _render_minify(minified, console)
    sys.exit(report.exit_code)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def env(as_json: bool) -> None:
    """The environment, for a bug report."""
    from tcompile.repro.environment import full_environment

    info = full_environment()
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    width = max(len(k) for k in info)
    for key, value in info.items():
        if isinstance(value, dict):
            click.echo(f"{key}:")
            for k, v in value.items():
                click.echo(f"  {k}={v}")
        else:
            click.echo(f"{key.ljust(width)}  {value}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--after",
    type=click.Choice(["auto", "dynamo", "aot"]),
    default="auto",
    show_default=True,
    help="Minify the Dynamo graph (dynamo) or the AOT graph (aot); auto: where the failure shows.",
)
@click.option(
    "--accuracy",
    "accuracy",
    flag_value="loose",
    default=None,
    help="Minify an accuracy failure (compiled vs eager and float64).",
)
@click.option(
    "--strict-accuracy",
    "accuracy",
    flag_value="strict",
    help="Minify a strict accuracy failure (compiled vs eager, tight tolerances).",
)
@click.option(
    "--backend",
    default=None,
    envvar="TCOMPILE_BACKEND",
    help="Stage or backend to compile with (default: the script's own).",
)
@click.option(
    "--graph",
    "graph",
    type=click.IntRange(min=0),
    default=None,
    help="Which compiled graph to minify (default: the first failing one).",
)
@click.option("--match", default=None, help="Only the failure whose signature matches this regex.")
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Workers judging candidates in parallel (each one a paused copy of the program).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Time limit in seconds for a run of the program.",
)
@click.option("--real-inputs", is_flag=True, help="Embed the real input values in repro.py.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for everything tcompile writes (default: a new temporary directory).",
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def minify(
    after: str,
    accuracy: str | None,
    backend: str | None,
    graph: int | None,
    match: str | None,
    jobs: int,
    timeout: float | None,
    real_inputs: bool,
    as_json: bool,
    out: str | None,
    argv: tuple[str, ...],
) -> None:
    """Shrink the failing graph of SCRIPT [ARGS] (or -- COMMAND ...) to a verified repro.py.

    Also accepts a minifier_launcher.py written by an earlier run.
    """
    from rich.console import Console

    from tcompile.compiler.runner import UsageError, check_backend

    err = Console(stderr=True)
    observer = _observer(err, quiet=False)
    try:
        if argv and argv[0].endswith(".py") and _is_launcher(argv[0]):
            from tcompile.minify_job import launch

            report = launch(
                argv[0],
                list(argv[1:]),
                jobs=jobs,
                out=out,
                real_inputs=real_inputs,
                observer=observer,
            )
        else:
            command = _command_from_args(argv)
            check_backend(backend)
            from tcompile.minify_job import run_minify

            report = run_minify(
                command,
                after=after,
                accuracy=accuracy or "off",
                backend=backend,
                graph=graph,
                match=match,
                jobs=jobs,
                timeout=timeout,
                real_inputs=real_inputs,
                out=out,
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
        _render_minify(report, Console())
    sys.exit(report.exit_code)


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option(
    "--accuracy",
    "accuracy",
    flag_value="loose",
    default=None,
    help="Bisect an accuracy failure (compiled vs eager and float64).",
)
@click.option(
    "--strict-accuracy", "accuracy", flag_value="strict", help="Bisect a strict accuracy failure."
)
@click.option("--match", default=None, help="Only the failure whose signature matches this regex.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Time limit in seconds for each run of the program.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Runs of the program in parallel.",
)
@click.option("--minify", "then_minify", is_flag=True, help="Go on to minify the culprit graph.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for everything tcompile writes (default: a new temporary directory).",
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def bisect(
    accuracy: str | None,
    match: str | None,
    timeout: float | None,
    jobs: int,
    then_minify: bool,
    as_json: bool,
    out: str | None,
    argv: tuple[str, ...],
) -> None:
    """Find the stage, graph, inductor pass or lowering that breaks SCRIPT [ARGS] (or -- COMMAND ...)."""
    from rich.console import Console

    from tcompile.compiler.bisect import run_bisect
    from tcompile.compiler.runner import UsageError

    err = Console(stderr=True)
    observer = _observer(err, quiet=False)
    try:
        command = _command_from_args(argv)
        report = run_bisect(
            command,
            accuracy=accuracy or "off",
            match=match,
            timeout=timeout,
            jobs=jobs,
            out=out,
            observer=observer,
            stdout=sys.stderr if as_json else sys.stdout,
            stderr=sys.stderr,
        )
        if then_minify and report.exit_code == 1 and report.graph is not None:
            from tcompile.minify_job import run_minify

            stage = report.stage if report.stage != "inductor" else None
            m = run_minify(
                command,
                accuracy=accuracy or "off",
                backend=stage,
                graph=report.graph,
                match=None,
                jobs=jobs,
                timeout=timeout,
                out=report.run_dir,
                observer=observer,
                stdout=sys.stderr if as_json else sys.stdout,
                stderr=sys.stderr,
            )
            report.minify = m.to_json()
    except UsageError as exc:
        _fail_usage(str(exc))
        return
    except KeyboardInterrupt:
        err.print("tcompile: interrupted")
        sys.exit(130)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, default=str))
    else:
        _render_bisect(report, Console())
    sys.exit(report.exit_code)


def _render_bisect(report: Any, console: Any) -> None:
    from rich.table import Table

    console.print()
    if report.steps:
        table = Table(title="Runs", title_justify="left")
        for col in ("run", "configuration", "failure shows", "seconds"):
            table.add_column(col)
        for s in report.steps:
            table.add_row(
                str(s["run"]),
                s["what"],
                "[red]yes[/red]" if s["failed"] else "[green]no[/green]",
                f"{s['seconds']:.1f}",
            )
        console.print(table)
    if report.exit_code != 1 or report.stage is None:
        console.print(report.message, highlight=False)
        return
    res = Table(title="Result", title_justify="left", show_header=False)
    res.add_column("what")
    res.add_column("answer")
    for label, value in (
        ("failure", report.signature),
        ("stage", report.stage),
        ("graph", None if report.graph is None else f"{report.graph} ({report.graph_kind})"),
        ("subsystem", report.subsystem),
        ("application", report.application),
        ("detail", report.detail),
        ("runs", f"{report.runs} in {report.seconds:.1f}s"),
        ("flaky", f"YES: {report.flaky_detail}" if report.flaky else "no"),
    ):
        if value is not None:
            res.add_row(label, str(value))
    console.print(res)
    if report.bad:
        bad = " ".join(f"{k}={v}" for k, v in report.bad.items())
        good = " ".join(f"{k}={v}" for k, v in report.good.items())
        console.print(
            f"by hand (torch's own bisection hooks):\n  fails:  {bad} <command>\n"
            f"  passes: {good} <command>",
            highlight=False,
        )
    if report.minify:
        console.print(
            f"repro: {report.minify.get('repro')} ({'verified' if report.minify.get('verified') else 'NOT verified'})",
            highlight=False,
        )
    elif report.next_command:
        console.print(f"next: {report.next_command}", highlight=False)


def _is_launcher(path: str) -> bool:
    from tcompile.repro.launcher import MARKER

    try:
        with open(path, errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return False
    return MARKER in head or os.path.basename(path) == "minifier_launcher.py"


def _render_minify(report: Any, console: Any) -> None:
    console.print()
    if report.repro is None:
        colour = (
            "green" if report.exit_code == 0 else ("yellow" if report.exit_code == 3 else "red")
        )
        console.print(f"[{colour}]{report.message}[/{colour}]", highlight=False)
        return
    ok = "[green]verified[/green]" if report.verified else "[red]NOT verified[/red]"
    console.print(f"failure:  {report.signature}", highlight=False)
    console.print(
        f"graph:    {report.graph} ({report.graph_kind}), stage {report.stage}", highlight=False
    )
    console.print(
        f"nodes:    {report.nodes_before} -> {report.nodes_after}   oracle calls: {report.calls}   "
        f"time: {report.seconds:.1f}s",
        highlight=False,
    )
    console.print(
        f"repro:    {report.repro} ({ok}{', real inputs' if report.real_inputs else ''})",
        highlight=False,
    )
    if report.launcher:
        console.print(f"launcher: {report.launcher}", highlight=False)
    if report.interrupted:
        console.print("[yellow]interrupted: this is the smallest graph found so far[/yellow]")


def _observer(console: Any, quiet: bool) -> Any:
    from tcompile.cli.render import ConsoleObserver

    return ConsoleObserver(console, quiet=quiet)


def _render_run(report: Any, console: Any) -> None:
    from tcompile.cli.render import failures_table, graphs_table

    console.print()
    if report.graphs:
        console.print(graphs_table(report.graphs))
    elif any(f["kind"] == "capture" for f in report.failures):
        console.print("No graph was compiled: TorchDynamo failed before capturing one.")
    else:
        console.print(
            "No graph was compiled (the program never called a torch.compile'd function)."
        )
    if report.failures:
        console.print(failures_table(report.failures))
    _render_records(getattr(report, "records", None) or [], console)
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


def _render_records(records: list[dict[str, Any]], console: Any) -> None:
    for r in records:
        console.print(
            f"recorded the frame [bold]{r['function']}[/bold] that failed in Dynamo: {r['path']}\n"
            f"  replay only that frame: [bold]tcompile replay {r['path']}[/bold]",
            highlight=False,
        )


if __name__ == "__main__":  # pragma: no cover
    main()

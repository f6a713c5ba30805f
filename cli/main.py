"""The ``tcompile`` command line.  Parses, calls a job, renders.  No policy.

Every command hands its job to :func:`app.finish`, the one place that turns an outcome
into output and an exit code (compiler/exitcodes.py).  Rendering is render.py; the
shared options are options.py.  torch is imported lazily inside commands so that
``tcompile --help`` is instant.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import click

from tcompile.compiler.exitcodes import ExitCode

from . import app, args
from .flags import BisectFlags, ReplayFlags, ReportFlags, RunFlags
from .options import (
    PROGRAM,
    accuracy_options,
    backend_option,
    exit_codes,
    jobs_option,
    json_option,
    match_option,
    only_option,
    out_option,
    program_argument,
    report_option,
    timeout_option,
)

# the bisection configuration that counts inductor's applications and changes none
_COUNT: dict[str, Any] = {"limits": {}, "toggles": {}}


@click.group(cls=app.Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    help="Show tcompile's version and the torch it found, and exit.",
    callback=lambda ctx, _param, value: value and (click.echo(app.version()), ctx.exit(0)),
)
def main() -> None:
    """Find, classify and shrink bugs in PyTorch's torch.compile stack.

    Exit codes: 0 no compiler failure, 1 compiler failure found, 2 usage error,
    3 the program fails the same way without torch.compile (not a compiler bug),
    4 tcompile itself failed, 5 the program failed once and passed when run again, with
    torch.compile and without (flaky), 130 interrupted.
    """
    # SIGTERM (a CI timeout, `kill`) ends tcompile like Ctrl-C: the programs it runs,
    # each in its own process group, are killed on the way out.
    signal.signal(signal.SIGTERM, app.raise_interrupt)


@main.command(context_settings=PROGRAM, epilog=exit_codes("run"))
@backend_option("Compile every graph with this stage or backend instead of the script's own")
@accuracy_options()
@timeout_option("Kill the command (its whole process group)")
@json_option
@out_option
@click.option(
    "--debug-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep inductor's debug artifacts (output_code.py, IR, FX graphs) per graph here.",
)
@only_option
@click.option(
    "--trace",
    "trace",
    type=click.Path(file_okay=False),
    default=None,
    help="Write torch's structured trace of the run here (TORCH_TRACE); with tlparse "
    "installed, its pages too, the failing graph's named.",
)
@click.option(
    "--record",
    "record_all",
    is_flag=True,
    help="Record every frame whose conversion fails in Dynamo, also those Dynamo then "
    "skips and runs eagerly (by default: the frames the program dies of).",
)
@click.option(
    "--localize/--no-localize",
    default=True,
    help="With --accuracy: name the first node of a failing graph whose values go "
    "wrong, and its kernel (compiles prefixes of that graph; default on).",
)
@click.option(
    "--without",
    "without",
    multiple=True,
    metavar="SUBSYSTEM:NAME",
    help="Turn one inductor culprit off wherever it applies (repeatable): lowerings:sum, "
    "post_grad_passes:NAME, decomposition:aten.silu.default, pattern:NAME (one pattern of a "
    "pattern-matcher pass), config:fallback_random "
    "(bisect's `without`). Does the failure go away with it?",
)
@click.option(
    "--capture",
    is_flag=True,
    help="Run as report's first run does: each failing graph saved with its failing "
    "call's inputs, inductor's applications counted; `report --baseline` then starts "
    "from this run instead of running the program again.",
)
@program_argument
@app.flags(RunFlags)
def run(f: RunFlags) -> None:
    """Run SCRIPT [ARGS] (or -- COMMAND ...) under the wrapped torch.compile stack.

    Reports every compiled graph and every compiler failure, classified as capture,
    compile, runtime, accuracy, crash or timeout.  A frame that fails in TorchDynamo
    is recorded (record.pkl in the run's directory) for `tcompile replay`.
    """

    def job() -> Any:
        from tcompile.repro.jobs.classify import RunOptions, run_and_classify

        return run_and_classify(
            args.program(f.argv, f.backend),
            RunOptions(
                stage=f.backend,
                accuracy=f.accuracy,
                debug_dir=args.abs_dir(f.debug_dir),
                only=f.only,
                record="all" if f.record_all else "failures",
                trace=args.abs_dir(f.trace),
                localize=f.localize,
                # --capture counts applications as report's baseline does (none changed)
                bisect=args.without(f.without) or (_COUNT if f.capture else None),
                capture=f.capture,
                **app.common(f.out, f.timeout, f.as_json),
            ),
        )

    from .render import run_result

    app.finish(job, as_json=f.as_json, render=run_result)


@main.command(context_settings=PROGRAM, epilog=exit_codes("explain"))
@json_option
@click.option(
    "--code",
    "code_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also keep inductor's generated code and IR per graph in this directory.",
)
@only_option
@timeout_option("Kill the command")
@out_option
@program_argument
def explain(
    as_json: bool,
    code_dir: str | None,
    only: str | None,
    timeout: float | None,
    out: str | None,
    argv: tuple[str, ...],
) -> None:
    """Graph breaks, recompilations and compile time of SCRIPT [ARGS] (or -- COMMAND ...)."""

    def job() -> Any:
        from tcompile.repro.jobs.explain import explain as run_explain

        return run_explain(
            args.command_from_args(argv),
            debug_dir=args.abs_dir(code_dir),
            only=only,
            **app.common(out, timeout, as_json, quiet=True),
        )

    from .render_replay import explain_result

    app.finish(job, as_json=as_json, render=explain_result)


@main.command(epilog=exit_codes("replay"))
@backend_option("Compile the frame with this stage or backend instead of the recorded one")
@click.option(
    "--no-fullgraph",
    "no_fullgraph",
    is_flag=True,
    help="Compile with fullgraph=False (graph breaks allowed) whatever was recorded.",
)
@accuracy_options()
@click.option(
    "--info",
    is_flag=True,
    help="Print the record's metadata only: nothing is unpickled or executed.",
)
@click.option(
    "--trust",
    is_flag=True,
    help="Replay a record this user's tcompile did not sign (someone else's, or torch's "
    "own): replaying executes the code it holds.",
)
@click.option(
    "--minify",
    "then_minify",
    is_flag=True,
    help="When the replayed failure is in a backend (a graph), continue into tcompile minify.",
)
@timeout_option("Kill the replay")
@json_option
@out_option
@click.argument("record", type=click.Path(dir_okay=True))
@app.flags(ReplayFlags)
def replay(f: ReplayFlags) -> None:
    """Re-run only the frame recorded in RECORD under torch.compile.

    RECORD is a record.pkl written by tcompile (run, bisect, minify) or a record of
    torch's own TORCH_COMPILE_REPLAY_RECORD=1.  Exit 1 when the frame fails (the
    same failure or a different one: both are shown), 0 when it does not, 3 when it
    fails the same way without torch.compile (not a compiler bug).

    Replaying EXECUTES the recorded program's code (its functions, its pickled
    objects).  Records tcompile writes are signed with a key in your cache directory;
    any other record (someone else's, torch's own, an altered one) is refused, exit 2,
    unless you pass --trust.  --info executes and unpickles nothing.
    """
    if f.info:
        from tcompile.repro.jobs.replay import load_info

        from .render_replay import record_info

        app.finish(
            lambda: _InfoReport(load_info(f.record)),
            as_json=f.as_json,
            render=lambda report, console: record_info(report.info, console),
        )

    def job() -> Any:
        from tcompile.compiler.runner import check_backend
        from tcompile.repro.jobs.pipelines import replay_then
        from tcompile.repro.jobs.replay import ReplayOptions

        check_backend(f.backend)
        options = ReplayOptions(
            backend=f.backend,
            fullgraph=False if f.no_fullgraph else None,
            accuracy=f.accuracy,
            trust=f.trust,
            **app.common(f.out, f.timeout, f.as_json),
        )
        return replay_then(
            f.record,
            options,
            then_minify=f.then_minify,
            warn=lambda text: click.echo(f"tcompile: warning: {text}", err=True),
            say=lambda text: click.echo(f"tcompile: {text}", err=True),
        )

    from .render_replay import replay_result

    app.finish(job, as_json=f.as_json, render=replay_result)


class _InfoReport:
    """``replay --info``: a record's metadata as a report (exit 0)."""

    exit_code = ExitCode.OK

    def __init__(self, info: Any) -> None:
        self.info = info

    def to_json(self) -> dict[str, Any]:
        return self.info.to_json()


@main.command(context_settings=PROGRAM, epilog=exit_codes("bisect"))
@accuracy_options("Bisect an accuracy failure: judge")
@match_option
@timeout_option("Time limit for each run of the program: kill it")
@jobs_option("Runs of the program in parallel")
@click.option(
    "--repeat",
    type=click.IntRange(min=1, max=10),
    default=None,
    help="Runs a configuration gets before it counts as passing (default: 3 for a crash "
    "or timeout, which may not show every run; 1 otherwise).",
)
@click.option("--minify", "then_minify", is_flag=True, help="Go on to minify the culprit graph.")
@click.option(
    "--peers",
    type=click.Path(file_okay=False),
    default=None,
    help="A job of several nodes (torchrun --nnodes N): a directory every node's tcompile "
    "bisect shares, so that all take the same steps.",
)
@click.option(
    "--guided/--no-guided",
    default=True,
    help="An accuracy failure: try the applications of the op whose values go wrong first "
    "before the binary search (default on; --no-guided: the binary search alone).",
)
@click.option(
    "--confirm/--no-confirm",
    default=None,
    help="Run the whole program once more with the culprit found on the saved graph "
    "turned off (default: when its first run took at most 2 minutes).",
)
@click.option(
    "--whole-program",
    is_flag=True,
    help="Ask every question of the whole program (a run each), not of the failing graph "
    "the baseline saved (the default: two program runs for a failure in a graph).",
)
@report_option
@json_option
@out_option
@program_argument
@app.flags(BisectFlags)
def bisect(f: BisectFlags) -> None:
    """Find the stage, graph, inductor pass or lowering that breaks SCRIPT [ARGS] (or -- COMMAND ...)."""

    def job() -> Any:
        from tcompile.repro.jobs.bisect_report import BisectOptions
        from tcompile.repro.jobs.pipelines import bisect_then

        options = BisectOptions(
            accuracy=f.accuracy, match=f.match, jobs=f.jobs, repeat=f.repeat, peers=f.peers,
            guided=f.guided, whole_program=f.whole_program, confirm=f.confirm,
            **app.common(f.out, f.timeout, f.as_json),
        )  # fmt: skip
        return bisect_then(
            args.command_from_args(f.argv),
            options,
            then_minify=f.then_minify,
            write_report=f.write_report,
        )

    from .render_bisect import bisect_result

    app.finish(job, as_json=f.as_json, render=bisect_result)


from .minify_cmd import minify  # noqa: E402
from .tools import env, merge  # noqa: E402  (commands that run no program)
from .triage_cmd import triage  # noqa: E402

main.add_command(minify)
main.add_command(triage)
main.add_command(env)
main.add_command(merge)

if __name__ == "__main__":  # pragma: no cover
    main()


@main.command(context_settings=PROGRAM, epilog=exit_codes("report"))
@accuracy_options()
@timeout_option("Time limit for each run of the program: kill it")
@jobs_option("Workers / runs of the program in parallel")
@click.option(
    "--max-bugs",
    type=click.IntRange(min=1, max=50),
    default=3,
    show_default=True,
    help="Bisect and minify at most this many distinct failures.",
)
@click.option(
    "--level",
    type=click.Choice(["auto", "source"]),
    default="auto",
    show_default=True,
    help="auto: each failure's graph repro (or the program's, when no graph holds it); "
    "source: a graph's failure gets a user-level repro too (minify --level source).",
)
@click.option(
    "--trace",
    type=click.Path(file_okay=False),
    default=None,
    help="Write torch's structured trace of the first run here (TORCH_TRACE); with "
    "tlparse installed, the failing graph's page is named in report.md.",
)
@click.option(
    "--confirm/--no-confirm",
    default=None,
    help="Run the whole program once more with the culprit found on the saved graph "
    "turned off (default: when its first run took at most 2 minutes).",
)
@click.option(
    "--max-time",
    "max_time",
    type=click.FloatRange(min=0),
    default=None,
    help="A program-level minify stops this many seconds after the report's start (less "
    "what verifying takes) and keeps the best program so far (default: minify's 300 s).",
)
@click.option(
    "--baseline",
    type=click.Path(file_okay=False),
    default=None,
    help="The run folder of a `tcompile run --capture` of the same command: the report "
    "starts from it (its failures, its saved graphs) and does not run the program first.",
)
@json_option
@out_option
@program_argument
@app.flags(ReportFlags)
def report(f: ReportFlags) -> None:
    """Run, bisect and minify SCRIPT [ARGS] (or -- COMMAND ...); write report.md for a bug report.

    One section per distinct failure: a title, what goes wrong, the repro inline with
    its output, the bisect result, the generated code, and the versions.
    """

    def job() -> Any:
        from tcompile.repro.jobs.report import ReportOptions, run_report

        return run_report(
            args.command_from_args(f.argv),
            ReportOptions(
                accuracy=f.accuracy,
                jobs=f.jobs,
                max_bugs=f.max_bugs,
                level=f.level,
                trace=args.abs_dir(f.trace),
                confirm=f.confirm,
                max_time=f.max_time,
                baseline=f.baseline and os.path.abspath(f.baseline),
                **app.common(f.out, f.timeout, f.as_json),
            ),
        )

    from .render import report_result

    app.finish(job, as_json=f.as_json, render=report_result)

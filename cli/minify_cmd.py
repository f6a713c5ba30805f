"""``tcompile minify``: a failing graph, a recorded frame, a launcher, or the program
itself, shrunk to a verified repro.py."""

from __future__ import annotations

from typing import Any

import click

from ..repro.jobs.minify_types import After
from . import app, args
from .flags import MinifyFlags
from .options import (
    PROGRAM,
    accuracy_options,
    backend_option,
    exit_codes,
    jobs_option,
    json_option,
    match_option,
    out_option,
    program_argument,
    report_option,
    timeout_option,
)


@click.command(context_settings=PROGRAM, epilog=exit_codes("minify"))
@click.option(
    "--after",
    type=click.Choice([a.value for a in After]),
    default=After.AUTO.value,
    show_default=True,
    help="Minify the Dynamo graph (dynamo) or the AOT graph (aot); auto: where the failure shows.",
)
@accuracy_options("Minify an accuracy failure: judge")
@backend_option("Stage or backend to compile with (default: the script's own)")
@click.option(
    "--graph",
    "graph",
    type=click.IntRange(min=0),
    default=None,
    help="Which compiled graph to minify (default: the first failing one).",
)
@match_option
@jobs_option(
    "Workers judging candidates in parallel (each one a paused copy of the program; "
    "default: 1 for a graph, the cores up to 4 for the program level)",
    default=None,
)
@timeout_option("Time limit for a run of the program: kill it")
@click.option("--real-inputs", is_flag=True, help="Embed the real input values in repro.py.")
@click.option(
    "--level",
    type=click.Choice(["auto", "graph", "program", "source"]),
    default="auto",
    show_default=True,
    help="What to shrink: the failing graph (graph), the program's own source (program: "
    "a repro in user-level PyTorch); source: the graph, then the program shrunk around "
    "the minimal graph's source lines (both repros); auto: the graph, or the program "
    "when no single graph holds the failure.",
)
@click.option(
    "--include",
    "include",
    multiple=True,
    type=click.Path(exists=True),
    help="A module or a folder of the program's own code found nowhere its imports "
    "resolve, pasted in and shrunk with it at the program level (repeatable).",
)
@click.option(
    "--max-time",
    "max_time",
    type=click.FloatRange(min=0),
    default=None,
    help="The program level's search stops after this many seconds of the program level "
    "(default 300; 0: no limit) and the best program so far is verified and kept.",
)
@click.option(
    "--trust",
    is_flag=True,
    help="Minify from a minifier_launcher.py or a record this user's tcompile did not "
    "sign: their data are pickles, which execute code when loaded.",
)
@report_option
@json_option
@out_option
@program_argument
@app.flags(MinifyFlags)
def minify(f: MinifyFlags) -> None:
    """Shrink the failing graph of SCRIPT [ARGS] (or -- COMMAND ...) to a verified repro.py.

    Also accepts a minifier_launcher.py written by an earlier run, and a record.pkl of
    a frame TorchDynamo could not capture (its function's source is minified).
    """

    def job() -> Any:
        from tcompile.repro.jobs.minify_types import Level, MinifyOptions
        from tcompile.repro.jobs.pipelines import minify_start
        from tcompile.repro.jobs.program_job import default_jobs

        options = MinifyOptions(
            after=f.after,
            accuracy=f.accuracy,
            backend=f.backend,
            graph=f.graph,
            match=f.match,
            jobs=f.jobs or 1,
            program_jobs=f.jobs or default_jobs(),
            real_inputs=f.real_inputs,
            level=Level(f.level),
            include=list(f.include),
            max_time=f.max_time,
            **app.common(f.out, f.timeout, f.as_json),
        )
        return minify_start(
            list(f.argv),
            lambda: args.program(f.argv, f.backend),
            options,
            trust=f.trust,
            write_report=f.write_report,
        )

    from .render import minify_result

    app.finish(job, as_json=f.as_json, render=minify_result)

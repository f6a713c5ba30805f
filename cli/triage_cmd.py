"""``tcompile triage``: many bug scripts to verdicts, culprits, repros and clusters."""

from __future__ import annotations

from typing import Any

import click

from tcompile.compiler.accuracy import AccuracyMode

from . import app
from .flags import TriageFlags
from .options import exit_codes, jobs_option, json_option


@click.command(epilog=exit_codes("triage"))
@click.option(
    "--strict-accuracy",
    "accuracy",
    flag_value=AccuracyMode.STRICT.value,
    default=AccuracyMode.LOOSE.value,
    help="Judge values against eager directly, with tight tolerances (default: the "
    "accuracy check of run --accuracy).",
)
@click.option(
    "--no-accuracy",
    "accuracy",
    flag_value=AccuracyMode.OFF.value,
    help="Do not judge values: crashes and compile errors only.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=900.0,
    show_default=True,
    help="Seconds for all of one script's runs (run, bisect, minify): past them the "
    "script is a timeout, or a bug without a repro.",
)
@jobs_option("Scripts triaged at a time (each holds a GPU while it runs, where there are GPUs)")
@click.option(
    "--per-gpu",
    type=click.IntRange(min=1, max=64),
    default=1,
    show_default=True,
    help="Scripts that share one GPU at a time (small scripts fit several to a GPU).",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1, max=20),
    default=None,
    help="Runs of a script before its report or membership check (default 1; with "
    "--each 2); the report's run, or the check's run as it is, is one more sample: a "
    "failure must come back in each.",
)
@click.option(
    "--each",
    is_flag=True,
    default=False,
    help="Bisect and minify every failing script (slower); by default once per "
    "cluster, the other members joining by a check of the culprit's switch.",
)
@click.option(
    "--max-time",
    "max_time",
    type=click.FloatRange(min=30),
    default=150.0,
    show_default=True,
    help="Seconds of one report (report --max-time): past them a program-level minify "
    "keeps the best program so far; at most what --timeout leaves after the runs.",
)
@click.option(
    "--also",
    metavar="PYTHON",
    multiple=True,
    help="Another interpreter (another torch): rerun each verified repro there "
    '("fixed in 2.14.1" / "still fails"); repeat for several.',
)
@click.option(
    "--ray",
    "ray_address",
    metavar="ADDRESS",
    default=None,
    help="Run each piece of a script's triage as a Ray task on this cluster ('auto', or host:port); needs "
    "the [ray] extra.",
)
@json_option
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="tcompile-triage",
    show_default=True,
    help="Results, repros and pages; a rerun with the same --out does only new work.",
)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@app.flags(TriageFlags)
def triage(f: TriageFlags) -> None:
    """Triage every script under PATHS: verdict, culprit, verified repro, duplicates.

    Verdicts: bug, clean, not_compiler, flaky, timeout, needs_gpu (and error: tcompile
    itself failed on the script). Each cluster is bisected and minified once, on its
    cheapest script; another script joins it when the culprit's switch, turned off,
    makes it pass (and it fails again as it is).
    Writes triage.md, triage.html and triage.json under --out; results are cached
    there by script content, torch version and options -- not the budgets: a rerun
    with a larger --timeout keeps what finished and does again what was cut.
    """

    def job() -> Any:
        from tcompile.repro.jobs.triage import TriageOptions, run_triage

        return run_triage(
            list(f.paths),
            TriageOptions(
                accuracy=f.accuracy,
                timeout=f.timeout,
                jobs=f.jobs,
                per_gpu=f.per_gpu,
                repeat=f.repeat,
                each=f.each,
                max_time=f.max_time,
                also=list(f.also),
                ray_address=f.ray_address,
                out=f.out,
                observer=app.observer(),
            ),
        )

    from .render_triage import triage_result

    app.finish(job, as_json=f.as_json, render=triage_result)

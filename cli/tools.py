"""The commands that run no program: ``env`` (the environment, for a bug report) and
``merge`` (the results of one distributed job's nodes, as one report)."""

from __future__ import annotations

import json
from typing import Any

import click

from . import app
from .options import exit_codes, json_option


@click.command()
@json_option
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
            if not value:  # e.g. no torch-related environment variables set
                click.echo(f"{key.ljust(width)}  (none set)")
                continue
            click.echo(f"{key}:")
            for k, v in value.items():
                click.echo(f"  {k}={v}")
        else:
            click.echo(f"{key.ljust(width)}  {value}")


@click.command(epilog=exit_codes("merge"))
@json_option
@click.argument("dirs", nargs=-1, required=True, type=click.Path())
def merge(as_json: bool, dirs: tuple[str, ...]) -> None:
    """Combine the results of tcompile runs (one per node of a torchrun job, say) into
    one report: every rank's graphs and failures, and which ranks fail alike.

    Each DIR is a run's directory (holding result.json) or the --out of runs.
    """

    def job() -> Any:
        from tcompile.repro.jobs.merge import merge as merge_runs

        return merge_runs(list(dirs))

    from .render import run_result

    app.finish(job, as_json=as_json, render=run_result)

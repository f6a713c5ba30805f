"""The program level's start (program_job.py): what runs, and the target.

:class:`ProgramRun` is one program-level minify's settings; :func:`baseline` runs the
original program as candidates will run -- under a launched job's own launcher, or in
one process where its failure shows there too (rank 0 of a world of 1) -- and the
control runs (no torch.compile; backend="eager"), and says what every candidate must
show (a :class:`ProgramTarget`), or why it cannot be minified.
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler import layout
from tcompile.compiler.collect import fails_the_same_way
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.observer import Observer
from tcompile.compiler.program import (
    ProgramFailure,
    ProgramOracle,
    ProgramTarget,
    program_failure,
    with_prelude,
)
from tcompile.compiler.protocol import HookConfig
from tcompile.compiler.runner import ProcessResult, is_distributed_launch

if TYPE_CHECKING:
    from tcompile.repro.project import Entry

OPENED = layout.OPENED  # the files the baseline's runs opened (child/opened.py)


def launcher_of(command: list[str]) -> list[str] | None:
    """A launched job's launcher and its arguments, up to the script (torchrun ...)."""
    if not is_distributed_launch(command):
        return None
    for i, arg in enumerate(command[1:], start=1):
        if arg.endswith(".py") and os.path.isfile(arg):
            return command[:i]
    return None


def script_of(command: list[str]) -> tuple[Path, list[str], bool]:
    """(the script, its arguments, launched by torchrun) of a command (``-m pkg.mod``:
    the module's file; repro/project.py)."""
    from tcompile.repro.project import entry_of

    entry = entry_of(command)
    return entry.script, entry.argv, entry.distributed


@dataclasses.dataclass
class ProgramRun:
    command: list[str]
    script: Path
    argv: list[str]
    run_dir: Path
    backend: str | None
    timeout: float | None
    observer: Observer
    accuracy: str = "off"
    prelude: str = ""
    jobs: int = 1
    root: Path | None = None  # the program's own imports resolve from here first
    # data files the program read (repro/project.py): (the file, its path beside repro.py)
    files: list[tuple[Path, str]] = dataclasses.field(default_factory=list)
    entry: Entry | None = None  # the program's Entry (repro/project.py)
    # the record of what each candidate that failed the same way opened (its run and its
    # control run; the oracle's ``reads``): a smaller program carries only what it reads
    reads: dict[str, Path] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class NotMinifiable:
    """Why the program cannot be minified, with the exit code that says it: the program
    fails without torch.compile too (3, not a compiler bug), or the failure did not come
    back when the program ran again (5, flaky) -- never exit 1, which says a compiler
    failure was found."""

    exit_code: int
    message: str


def baseline(
    run: ProgramRun, source: str, work: Path
) -> tuple[ProgramTarget, float] | NotMinifiable | None:
    """The failure the original program shows when run as candidates are (its identity
    for the search), and how the control run must go; or why it cannot be minified.
    With ``--jobs`` above 1 the two control runs (no torch.compile; backend="eager")
    run side by side."""
    probe = ProgramTarget(
        failure=ProgramFailure("", "", ""),
        stage=run.backend,
        control="disable",
        timeout=run.timeout or 900.0,
        cwd=os.getcwd(),
        script_dir=str(run.root or run.script.parent),
        accuracy=run.accuracy,
        prelude=run.prelude,
        launcher=launcher_of(run.command),
        script_file=str(run.script),
    )
    path = work / "baseline" / run.script.name
    path.parent.mkdir(parents=True, exist_ok=True)
    layout.write_file(path, with_prelude(run.prelude, source, str(run.script)))

    ran: dict[str, ProcessResult] = {}

    def compiled(target: ProgramTarget, name: str) -> ProgramFailure | None:
        config = HookConfig(
            dir=str(work / "baseline" / name), stage=run.backend, record="off",
            accuracy=run.accuracy, opened=str(work / OPENED),
        )  # fmt: skip
        ran[name] = ProgramOracle(target, work / "baseline", run.script.name, run.argv).run(
            path, config
        )
        return program_failure(ran[name])

    t = time.monotonic()
    failure = compiled(probe, "c")
    seconds = time.monotonic() - t
    if failure is None:
        return None
    if probe.launcher:
        # a launched job: where the failure shows in one process too (rank 0 of a world
        # of 1: a bug on every rank), candidates run that way -- one process, no
        # launcher; else under the job's own launcher, as it ran (issue 37)
        one = dataclasses.replace(probe, launcher=None, one_process=True)
        t = time.monotonic()
        if failure.same(compiled(one, "c1")):
            probe, seconds = one, time.monotonic() - t
            ran["c"] = ran["c1"]  # the controls run as one process too
            run.observer.status(
                "the failure shows in one process (rank 0 of a world of 1): minifying that"
            )
        else:
            run.observer.status(
                f"the failure needs the job ({' '.join(probe.launcher)}): every candidate "
                "runs under it"
            )
    oracle = ProgramOracle(probe, work / "baseline", run.script.name, run.argv)
    # the control runs record what they open too: a program that fails under
    # torch.compile before it reads its validation split reads it without (issue 59)
    reads = str(work / OPENED)
    controls = [
        HookConfig(dir=str(work / "baseline" / "p"), disable=True, opened=reads),
        HookConfig(dir=str(work / "baseline" / "e"), stage="eager", record="off", opened=reads),
    ]
    with ThreadPoolExecutor(2 if run.jobs > 1 else 1) as ex:
        plain_run, eager_run = ex.map(lambda c: oracle.run(path, c), controls)
    plain, eager = program_failure(plain_run), program_failure(eager_run)
    if plain is not None:
        # the one rule `tcompile run` decides by (collect.fails_the_same_way): each
        # rank's own cause, never a launcher's ChildFailedError; a control that failed
        # by its own means is no evidence (issue 59: two commands, two verdicts)
        if fails_the_same_way(ran["c"], plain_run):
            return NotMinifiable(
                int(ExitCode.NOT_COMPILER),
                f"the program fails without torch.compile too ({plain.text}): not a compiler bug",
            )
        return NotMinifiable(
            int(ExitCode.COMPILER_FAILURE),
            f"the program fails without torch.compile too, otherwise ({plain.text}; under "
            f"torch.compile: {failure.text}): no candidate could pass without torch.compile, "
            "so the program level cannot minify it; `tcompile run` tells the two apart",
        )
    # a failure that shows with backend="eager" too is Dynamo's own: candidates must
    # pass without torch.compile; one below Dynamo must pass with backend="eager"
    control = "disable" if failure.same(eager) else "eager"
    # Dynamo's own failure: candidates compile with backend="eager" -- no inductor
    # compile to wait for, and a candidate must keep the failure where it was found (a
    # candidate that fails only under inductor, by a rounding difference where the
    # program compared exactly, is another bug: seen on pytorch#197859)
    stage = "eager" if control == "disable" and run.backend is None else run.backend
    limit = max(30.0, 3 * seconds)
    if run.timeout:
        limit = min(limit, run.timeout)
    target = dataclasses.replace(
        probe, failure=failure, control=control, timeout=limit, stage=stage
    )
    return target, seconds

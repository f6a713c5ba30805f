"""What a program-level repro is made of (program_job.py): its text, the files it
carries (the data the program read, where the minimal program still reads any: then
repro.py is a folder), how to run it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler import layout
from tcompile.compiler.program import ProgramTarget
from tcompile.repro.program_harness import program_repro
from tcompile.repro.project import data_files, installed_versions

from .program_baseline import ProgramRun

if TYPE_CHECKING:
    from .minify_types import ProgramSummary


def repro_text(program: str, target: ProgramTarget, run: ProgramRun) -> str:
    files = files_for(run, program)
    placed = {str(path): rel for path, rel in files}
    argv = [placed.get(str(Path(a).resolve()), a) if os.path.isabs(a) else a for a in run.argv]
    if not files and not any(w in program for w in ("argv", "argparse", "parse_args")):
        argv = []  # the minimal program reads no arguments: the repro sets none
    return program_repro(
        program,
        target.failure,
        target.prelude,
        argv,
        launcher=target.launcher,
        one_process=target.one_process,
        needs=installed_versions(program),
        files=[rel for _, rel in files],
    )


def carried(run: ProgramRun, best: str, repro: Path, target: ProgramTarget) -> ProgramSummary:
    """What the repro carries and needs, and how to run it (``program`` in --json)."""
    files = files_for(run, best)
    return {
        "files": [rel for _, rel in files],
        "repro_dir": str(repro.parent) if files else None,
        "command": (f"cd {repro.parent} && " if files else "")
        + (f"{' '.join(target.launcher)} " if target.launcher else "python ")
        + (layout.REPRO if files else str(repro)),
        "installed": installed_versions(best),
    }


def files_for(run: ProgramRun, program: str) -> list[tuple[Path, str]]:
    """The files a program carries: what its own runs opened -- the run that failed and
    its control run, recorded when the oracle judged it (compiler/child/opened.py) --
    or, for the program as it came, what the baseline's runs opened.  A file the
    minimal program no longer opens is dropped; one only its control run opens (a
    validation split read after the point where the compiled run failed) is kept."""
    record = run.reads.get(program)
    if record is not None and run.entry is not None:
        return data_files(record, run.entry, exclude=run.run_dir)
    return run.files


def repro_path(run: ProgramRun, program: str) -> Path:
    """repro.py; in a folder of its own when it carries the files the program read."""
    if files_for(run, program):
        return run.run_dir / "repro" / layout.REPRO
    return run.run_dir / layout.REPRO


def write_repro(run: ProgramRun, text: str, program: str) -> Path:
    repro = repro_path(run, program)
    for path, rel in files_for(run, program):
        dest = repro.parent / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    write(repro, text)
    return repro


def write(path: Path, text: str) -> None:
    compile(text, str(path), "exec")  # never a repro that does not parse
    layout.write_file(path, text, mode=0o755)

"""A failure outside any graph in a compiler subsystem's own words (issue 61).

CUDA graph trees raise their own errors where the program touches what a replay
overwrote: "accessing tensor output of CUDAGraphs that has been overwritten by a
subsequent run" (compiler/culprit.CUDAGRAPH_OPERATIONS: torch's words, each tied to an
operation of the tree).  The program raises it outside every graph -- it reads a
tensor -- so no graph holds the failure and nothing was captured; before this, the
run made a plain run and a locating run, and bisect then searched the program: 10-11
runs on the two tracker bugs of that shape (#122192, #169545).

The words name the subsystem, so the run asks that subsystem first: one run of the
program with its every application off (torch's own bisector switch, the subsystem
``cudagraphs`` of ``inductor``), in place of the plain run.  Where that run passes,
the failure is the compiler's -- the compiled program passes with one of inductor's
parts off -- and it is that part's: the failure records it (``passes_without``) and
bisect answers from it with no more runs (2 runs of the program in all).  Where it
still fails, the words misled (a program raising them itself, or the tree's error
is not the cause): the plain run decides, as before.  A verdict is always the one
the processes gave: a passing run with the part off, or the plain run's.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tcompile.compiler import layout
from tcompile.compiler.collect import collect, dying_exception
from tcompile.compiler.culprit import cudagraph_operation
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.failure import Failure
from tcompile.compiler.observer import NullObserver
from tcompile.compiler.protocol import HookConfig
from tcompile.compiler.runner import run_process

from .flaky import RunIO, passed

if TYPE_CHECKING:
    from collections.abc import Callable

    from tcompile.compiler.runner import ProcessResult

    from .bisect_report import BisectReport
    from .bisection import _Bisection

# a subsystem whose own errors are known by their words: subsystem -> (its stage, what
# it is, the operation of it an error's text names or None: compiler/culprit.py)
OWNERS: dict[str, tuple[str, str, Callable[[str | None], str | None]]] = {
    "cudagraphs": ("inductor", "CUDA graph trees", cudagraph_operation),
}


def owner(text: str | None) -> str | None:
    """The subsystem whose own error ``text`` is (``cudagraphs``); None: no one's."""
    return next((name for name, (_, _, named) in OWNERS.items() if named(text)), None)


def switch(subsystem: str) -> dict[str, Any]:
    """Every application of ``subsystem`` off, all else on (a run's bisect config)."""
    return {"limits": {subsystem: 0}, "toggles": {}}


def without_owner(result: ProcessResult, command: list[str], run_dir: str, io: RunIO) -> str | None:
    """The subsystem the program died in the words of, where the program passes with
    it off (one run, in ``run_dir/without``); None: no such words, or it still failed."""
    first = dying_exception(result)
    name = owner(str(first.get("message") or "") if first else None)
    if name is None:
        return None
    io["observer"].status(f"the command failed in {name}' own words: running it with {name} off")
    config = HookConfig(
        dir=os.path.join(run_dir, layout.WITHOUT), stage=io["stage"], bisect=switch(name)
    )
    off = run_process(
        command, config, timeout=io["timeout"], observer=NullObserver(),
        stdout=io["stdout"], stderr=io["stderr"],
    )  # fmt: skip
    return name if passed(off) and not collect(off)[1] else None


def owned_note(failure: Failure, name: str) -> None:
    """Say on the failure whose words it is and that the program passed without it."""
    _, words, operation = OWNERS[name]
    what = operation(failure.message or failure.signature.message)
    failure.passes_without = name
    failure.message += (
        f"\n(an error in {words}' own words" + (f" -- {what}" if what else "")
        + f"; the program passes with inductor's {name} off)"
    )  # fmt: skip


def owned_result(job: _Bisection, target: Failure) -> BisectReport:
    """Bisect's answer for a failure whose subsystem the baseline's classification
    already turned off with the program passing: that subsystem, no search."""
    name = target.passes_without or ""
    stage, _, operation = OWNERS[name]
    what = operation(target.message or target.signature.message)
    job.b.steps.append(
        {"run": 0, "what": f"{name} off (the baseline's classification)", "failed": False}
    )
    where = (
        f"stage {stage}, {name}" + (f": {what}" if what else "")
        + f"; the failure is outside any graph, in {name}' own words, and the whole "
        f"program passes with every {name} application off"
    )  # fmt: skip
    return job.done(
        ExitCode.COMPILER_FAILURE,
        where,
        next_command=job.next_command(None, stage, target.stage),
        stage=stage, graph=None, graph_kind=target.graph_kind, signature=target.text,
        subsystem=name, flaky=None,  # the record names the operation (culprit.py)
        switch=switch(name), confirmed="pass",
    )  # fmt: skip

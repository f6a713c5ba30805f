"""tcompile never changes whether or how the program fails (DESIGN.md mechanism 11).

The accuracy check watches the program's own calls (child/observe.py), so in most
runs the checked program *is* the program.  Where the check still had to change
something (random ops drawing eager's numbers in compiled code: inductor's
``fallback_random``, without which no random graph can be judged), the child says so
with a ``check_effect`` event, and a *passive* run -- the hooks only watch: no check,
no setting changed -- decides how the program ends.  Where the two disagree, the
report says so and the passive verdict stands.

The other way round: a program that fails outside any compiled graph (its own
assertion on a wrong value, say) is run once more with the check on, to tie the
failure to the graph that computed the wrong values; where that run passes, it is the
rerun that says the failure did not come back (repro/jobs/classify.py: flaky).
"""

from __future__ import annotations

import os
from typing import IO, Any

from . import layout
from .failure import Failure
from .observer import Observer
from .protocol import Event, HookConfig
from .runner import ProcessResult, run_process
from .signature import FailureKind

LOCATE_CALLS = 16  # calls of each graph the locating run checks


def effects(result: ProcessResult) -> list[dict[str, Any]]:
    """What the check changed in the checked run (check_effect events), once each."""
    seen, out = set(), []
    for e in result.events:
        if e.get("event") == Event.CHECK_EFFECT:
            key = (e.get("graph"), e.get("text"))
            if key not in seen:
                seen.add(key)
                out.append(e)
    return out


def outcome(result: ProcessResult) -> str:
    """How a run of the program ended, as people read it."""
    if result.timed_out:
        return "a timeout"
    if result.returncode is not None and result.returncode < 0:
        return f"death by signal {-result.returncode}"
    if result.returncode in (0, None):
        return "success (exit 0)"
    exc = [e for e in result.events if e.get("event") == Event.EXCEPTION]
    what = exc[-1].get("signature_text") if exc else None
    return f"exit {result.returncode}" + (f" ({what})" if what else "")


def passive_run(
    command: list[str],
    run_dir: str,
    *,
    stage: str | None,
    timeout: float | None,
    observer: Observer,
    stdout: IO[str] | None,
    stderr: IO[str] | None,
    folder: str = layout.PASSIVE,
) -> ProcessResult:
    observer.status("the check changed the program: running it once more, only watching")
    config = HookConfig(dir=os.path.join(run_dir, folder), stage=stage, accuracy="off")
    return run_process(
        command, config, timeout=timeout, observer=observer, stdout=stdout, stderr=stderr
    )


def reconcile(
    checked: ProcessResult,
    passive: ProcessResult,
    checked_failures: list[Failure],
    passive_failures: list[Failure],
    notes: list[dict[str, object]],
) -> tuple[ProcessResult, list[Failure]]:
    """The run that decides how the program ends (the passive one) and the failures to
    report: the passive run's own, and the values the check judged wrong."""
    said = [e.get("text") for e in effects(checked)]
    first, second = outcome(checked), outcome(passive)
    if first == second:
        return checked, checked_failures
    notes.append(
        {
            "graph": None,
            "text": f"the program left alone (a passive run: no check) ends in {second}; "
            f"under the accuracy check it ended in {first}.  The check changed the program "
            f"({'; '.join(str(s) for s in said)}); the passive verdict stands",
        }
    )
    accuracy = [f for f in checked_failures if f.kind == FailureKind.ACCURACY.value]
    return passive, passive_failures + accuracy


def locate(
    command: list[str],
    run_dir: str,
    *,
    stage: str | None,
    timeout: float | None,
    observer: Observer,
    stdout: IO[str] | None,
    stderr: IO[str] | None,
    capture: str | None = None,
) -> ProcessResult:
    """A run with the accuracy check on the first calls of every graph (to find the
    graphs whose values are wrong, for a failure that showed outside any graph);
    ``capture``: the graphs it finds wrong are saved there (HookConfig.capture)."""
    observer.status("the program failed outside any graph: checking the values each graph computes")
    config = HookConfig(
        dir=os.path.join(run_dir, layout.LOCATED),
        stage=stage,
        accuracy="loose",
        check_calls=LOCATE_CALLS,
        capture=capture,
    )
    return run_process(
        command, config, timeout=timeout, observer=observer, stdout=stdout, stderr=stderr
    )

"""A failure that does not come back (verdict ``flaky``, exit 5): what each run showed.

The command failed under torch.compile, then passed run again both without
torch.compile and with it; torchrun's "Root Cause" block names the rank and how it died
(``rank 0 died of SIGABRT (terminate called without an active exception)``)."""

from __future__ import annotations

import re
from typing import IO, TYPE_CHECKING, TypedDict

from tcompile.compiler import faithful
from tcompile.compiler.protocol import Event
from tcompile.compiler.runner import ProcessResult

if TYPE_CHECKING:
    from tcompile.compiler.observer import Observer


class RunIO(TypedDict):
    """How the runs after the first are made (classify's ``io``: the keywords of
    faithful.passive_run and faithful.locate)."""

    stage: str | None
    timeout: float | None
    observer: Observer
    stdout: IO[str] | None
    stderr: IO[str] | None


class Flaky(TypedDict):
    """A run's ``flaky``: what each run showed (:func:`flaky_outcome`)."""

    explanation: str
    first: str  # the compiled run's outcome (torchrun's root cause, where it names one)
    again: str  # the compiled run again
    plain: str  # without torch.compile
    at_teardown: bool  # every rank had destroyed its process group: it died at exit


def _root_cause(stderr: list[str]) -> str | None:
    """torchrun's "Root Cause" block, in a few words: 'rank 0 died of SIGABRT
    (terminate called without an active exception)'; None without one."""
    text = "\n".join(stderr)
    head = text.rfind("Root Cause")
    if head < 0:
        return None
    rank = re.search(r"rank\s*:\s*(\d+)", text[head:])
    code = re.search(r"exitcode\s*:\s*(-?\d+)[^\n]*?(?:\((SIG\w+)\))?\s*$", text[head:], re.M)
    if rank is None or code is None:
        return None
    how = f"died of {code.group(2)}" if code.group(2) else f"exited with {code.group(1)}"
    said = "terminate called without an active exception"
    return f"rank {rank.group(1)} {how}" + (f" ({said})" if said in text else "")


def passed(result: ProcessResult) -> bool:
    return not result.timed_out and result.returncode == 0


def flaky_outcome(result: ProcessResult, rerun: ProcessResult, plain: ProcessResult) -> Flaky:
    """The command failed under torch.compile, then passed run again both without
    torch.compile and with it: not shown to be the compiler's.  A distributed job whose
    ranks had all destroyed their process group died in its backend's teardown (gloo's
    destructor can abort at exit: "terminate called without an active exception")."""
    ranked = {e.get("pid") for e in result.events if e.get("rank") is not None}
    destroyed = {e.get("pid") for e in result.events if e.get("event") == Event.GROUP_DESTROYED}
    at_teardown = bool(ranked) and ranked <= destroyed
    first = _root_cause(result.stderr_tail) or faithful.outcome(result)
    explanation = (
        f"the command failed once under torch.compile ({first}) and passed when run "
        "again, without torch.compile and with it: a flaky failure, not shown to be the "
        "compiler's"
    )
    if at_teardown:
        explanation += (
            " (every rank had destroyed its process group: it died at exit, in the "
            "distributed backend's teardown)"
        )
    return {
        "explanation": explanation,
        "first": first,
        "again": faithful.outcome(rerun),
        "plain": faithful.outcome(plain),
        "at_teardown": at_teardown,
    }

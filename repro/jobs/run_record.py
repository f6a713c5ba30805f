"""What one classified run found (``tcompile run``'s record, classify.py), and that
record read back from its folder: ``report --baseline`` starts from a ``run --capture``
instead of running the program again (triage classifies each script with such a run,
then reports a representative from it: one baseline, not two; issue 62)."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

from tcompile.compiler import invariant, layout
from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.failure import Failure, group, rank_summary

from .flaky import Flaky


@dataclasses.dataclass
class RunReport:
    graphs: list[dict[str, Any]]
    failures: list[Failure]
    notes: list[dict[str, Any]]
    exit_code: int
    verdict: str  # "clean" | "compiler-failure" | "not-a-compiler-bug" | "flaky"
    explanation: str
    returncode: int | None
    seconds: float
    run_dir: str | None  # None: nothing was kept (a clean run in a temporary directory)
    command: list[str]
    stage: str | None
    accuracy: str
    debug_index: list[dict[str, Any]] | None = None
    # frames that failed in Dynamo, recorded for `tcompile replay` (child/frames.py)
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    next_command: str | None = None  # what to type next (next_step)
    trace: dict[str, Any] | None = None  # --trace: the trace, tlparse's pages (trace.py)
    interrupted: bool = False  # Ctrl-C / SIGTERM: what the run showed until then (exit 130)
    # how the program itself ended, as a plain run shows it: {returncode, exception,
    # last_line} (runner.program_outcome); the checked run's, not a passive one's
    program: dict[str, Any] | None = None
    # the command failed once and passed when run again, with torch.compile and without
    # (verdict "flaky", exit 5): {"first", "again", "plain", "at_teardown"}
    flaky: Flaky | None = None
    # a launched job: how each rank's code ended (invariant.rank_endings): returned,
    # raised ..., exit N, no exit seen
    ranks_ended: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    # ranks hung in their backend's teardown after every rank's code returned: tcompile
    # ended them (the one named exception that keeps a clean verdict; the notes say it)
    teardown_hang: bool = False
    # the CPU seconds the run used (its work: a busy machine stretches ``seconds``, not
    # this), where known; what decides "a long job" (capture_bisect.CONFIRM_WITHIN)
    cpu_seconds: float | None = None
    # run as report's baseline (``run --capture``): failing graphs saved, applications
    # counted; ``report --baseline`` starts from such a run
    captured: bool = False

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunReport:
        """A run's result.json back as its record (``report --baseline``)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kept = {k: v for k, v in data.items() if k in names and k != "failures"}
        return cls(**kept, failures=[Failure.from_json(f) for f in data.get("failures") or []])

    def contradiction(self) -> str | None:
        """Why this report's clean verdict would contradict how the program ended
        (invariant.py); None when it would not or the verdict is not clean."""
        if self.exit_code != ExitCode.OK or self.interrupted:
            return None
        if self.failures:
            return f"it says exit 0 with {len(self.failures)} failure(s)"
        program = self.program or {}
        passive = program.get("passive")  # a passive run decided: its ending stands
        returncode = (passive or program).get("returncode", self.returncode)
        return invariant.contradiction(returncode, False, self.teardown_hang, self.ranks_ended)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(dataclasses.replace(self, failures=[]))
        out["failures"] = [f.to_json() for f in self.failures]
        out["groups"] = group(self.failures)
        summary = rank_summary(self.failures)
        if summary is not None:  # a distributed job: all ranks alike, or some only
            out["ranks"] = summary
        return out


def given_baseline(folder: str, command: list[str], accuracy: str) -> RunReport:
    """``--baseline FOLDER``: the ``run --capture`` made there, of this command with this
    accuracy check (anything else: a usage error, one line)."""
    path = Path(folder) / layout.RESULT
    try:
        base = RunReport.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"--baseline {folder}: no run's result there ({exc})") from None
    if not base.captured:
        raise UsageError(f"--baseline {folder}: that run was not made with --capture")
    if base.command != command or base.accuracy != accuracy:
        raise UsageError(
            f"--baseline {folder}: that run was of {shlex.join(base.command)} with accuracy "
            f"{base.accuracy}, not of this command with {accuracy}"
        )
    if base.stage is not None:  # report runs the program with its own backends
        raise UsageError(
            f"--baseline {folder}: that run compiled every graph with --backend "
            f"{base.stage}; report's first run uses the program's own backends"
        )
    if base.interrupted:
        raise UsageError(f"--baseline {folder}: that run was interrupted")
    return base

"""Membership on the captured graph (issue 62): a triage check answered by
capture_check.py in a child interpreter -- the failing graph the script's own run saved
(``run --capture``), one compile with the culprit's switch off and, where it passed,
one as it is; the program not run again.  Where the capture gives no answer (the graph does not fail
alone, a judgement did not finish, the run's folder is on another Ray node), the check
runs the program (triage_one.check_one) and says why (``capture_why``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tcompile.compiler.exitcodes import ExitCode
from tcompile.repro.triage_records import Check, ScriptResult, Step

from .triage_one import _stepper, check_one


def capture_check_one(
    task: dict[str, Any], res: ScriptResult, without: str, budget: float, backend: str | None
) -> Check:
    """Membership on the captured graph (capture_check.py: the switch off, then as it is;
    the program not run); where the capture gives no answer (it does not fail alone, a
    judgement did not finish), by running (check_one), said."""
    t0 = time.monotonic()
    steps: list[Step] = []
    step = _stepper(task, steps, budget)
    words = [a for w in without.split() for a in ("--without", w)]
    argv = ["-m", "tcompile.repro.jobs.capture_check", str(res.baseline), *words]
    argv += ["--backend", backend] if backend else []
    if res.capture and Path(res.capture).is_dir():
        code, doc = step(f"captured graph without {without}", argv)
    else:  # run on another node (Ray): its folder is not here
        code, doc = None, {"why": "its run's folder is not on this machine"}
    answer = doc.get("answer") if code == 0 else None
    if answer not in ("member", "no"):
        got = check_one(task, without, max(30.0, budget - (time.monotonic() - t0)), backend)
        got.capture_why = str(doc.get("why") or f"its check ended {code}")[:300]
        got.steps = [*steps, *got.steps]
        got.seconds = round(time.monotonic() - t0, 2)
        return got
    member = answer == "member"
    return Check(
        without=without,
        backend=backend,
        off=ExitCode.OK if member else ExitCode.COMPILER_FAILURE,
        # the graph as it is: judged where the switch off passed (it failed), else not
        on=ExitCode.COMPILER_FAILURE if doc.get("unchanged") == "same_failure" else None,
        passes=member,
        seconds=round(time.monotonic() - t0, 2),
        steps=steps,
        on_capture=True,
    )

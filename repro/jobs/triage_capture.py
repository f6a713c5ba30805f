"""Membership on the captured graph (issue 62): a triage check answered by
capture_check.py in a child interpreter -- the failing graph the script's own run saved
(``run --capture``), one compile with the culprit's switch off and, where it passed,
one as it is; the program not run again.  Where the capture gives no answer (the graph does not fail
alone, a judgement did not finish, the run's folder is on another Ray node), the check
runs the program (triage_one.check_one) and says why (``capture_why``).

Several representatives' switches are asked on one worker, in order, up to the first
that answers ``member`` or gives no answer (a worker's start and first compile are most
of a check: capture_check.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tcompile.compiler.exitcodes import ExitCode
from tcompile.repro.triage_records import Check, ScriptResult, Step

from .triage_one import _stepper, check_one


def capture_checks_many(
    task: dict[str, Any], res: ScriptResult, asked: list[tuple[str, str, str | None]],
    budget: float,
) -> list[tuple[str, Check]]:  # fmt: skip
    """``asked``: (representative, its switch, its stage), most alike first.  A Check for
    each asked before the first member (included) or the first the capture could not
    answer -- that one by running (check_one), said; the rest are not asked (None of
    them in the answer)."""
    t0 = time.monotonic()
    steps: list[Step] = []
    step = _stepper(task, steps, budget)
    tries = [f"{off}@{backend}" if backend else off for _, off, backend in asked]
    argv = ["-m", "tcompile.repro.jobs.capture_check", str(res.baseline)]
    argv += [a for t in tries for a in ("--try", t)]
    what = f"captured graph without {asked[0][1]}"
    if len(asked) > 1:
        what = f"captured graph without {', '.join(o for _, o, _ in asked)}, one at a time"
    if res.capture and Path(res.capture).is_dir():
        code, doc = step(what, argv)
    else:  # run on another node (Ray): its folder is not here
        code, doc = None, {"why": "its run's folder is not on this machine"}
    answers = (doc.get("answers") or []) if code == 0 else []
    out: list[tuple[str, Check]] = []
    for (rep, off, backend), a in zip(asked, answers):
        if a.get("answer") not in ("member", "no"):
            break
        member = a["answer"] == "member"
        out.append((rep, Check(
            without=off, backend=backend,
            off=ExitCode.OK if member else ExitCode.COMPILER_FAILURE,
            on=ExitCode.COMPILER_FAILURE if member else None,
            passes=member, seconds=float(a.get("seconds") or 0.0), on_capture=True,
        )))  # fmt: skip
    if len(out) < len(asked) and not (out and out[-1][1].passes):
        rep, off, backend = asked[len(out)]  # no answer on the capture: by running
        why = next((a.get("why") for a in answers[len(out) :]), None) or doc.get("why")
        left = max(30.0, budget - (time.monotonic() - t0))
        got = check_one(task, off, left, backend)
        got.capture_why = str(why or f"its check ended {code}")[:300]
        out.append((rep, got))
    # the one process's steps and seconds: the first answer carries its step, the
    # answers' seconds add up to the whole
    if out:
        first = out[0][1]
        first.steps = [*steps, *first.steps]
        spent = sum(c.seconds for _, c in out)
        first.seconds = round(first.seconds + max(0.0, time.monotonic() - t0 - spent), 2)
    return out

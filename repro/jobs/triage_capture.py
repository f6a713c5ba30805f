"""Membership on the captured graph (issue 62): a triage check answered by
capture_check.py in a child interpreter -- the failing graph the script's own run saved
(``run --capture``), one compile with the culprit's switch off and, where it passed,
one as it is; the program not run again.  Where the capture gives no answer (the graph
does not fail alone, a judgement did not finish, the run's folder is on another Ray
node), the check runs the program (triage_one.check_one) and says why (``capture_why``).

Several representatives' switches are asked on one worker, in order, up to the first
that answers ``member`` or gives no answer (a worker's start and first compile are most
of a check: capture_check.py).  On triage's local slots the checks go to check servers
(``capture_check --serve``, one check at a time each, kept idle in between) whose
worker judges one script's capture after another: a check then costs its judgements,
about 1-3 s, not the 8 s of an interpreter, a worker and a first compile (under Ray: a
process per check, as before)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tcompile.compiler.exitcodes import ExitCode
from tcompile.repro.triage_records import Check, ScriptResult, Step

from .triage_one import _LIVE, _LOCK, _STOPPING, Interrupted, _die_with_parent, _stepper, check_one

_IDLE: list[_Server] = []  # check servers no check is using now
_MADE = [0]  # servers started (each in its own folder)


class _Server:
    """A ``capture_check --serve`` child: a check a line in, its answer a line out."""

    def __init__(self, key: tuple[Any, ...], python: str, env: dict[str, str], work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.key = key
        with open(work / "server.log", "ab") as log, _LOCK:
            if _STOPPING.is_set():
                raise Interrupted
            self.proc = subprocess.Popen(
                [python, "-m", "tcompile.repro.jobs.capture_check", "--serve", str(work)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=str(work),
                env={**os.environ, **env}, preexec_fn=_die_with_parent,
            )  # fmt: skip
            _LIVE.add(self.proc)

    def ask(self, run_dir: str, tries: list[list[Any]], budget: float) -> dict[str, Any] | None:
        """Its answer, or None (no answer within ``budget`` seconds, or it died: then
        it is stopped, and the next check starts another)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(
                (json.dumps({"run_dir": run_dir, "tries": tries}) + "\n").encode()
            )
            self.proc.stdin.flush()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(1.0, budget))
            line = self.proc.stdout.readline() if ready else b""
            doc = json.loads(line) if line else None
        except (OSError, ValueError):
            doc = None
        if doc is None:
            self.close()
        return doc

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        with _LOCK:
            _LIVE.discard(self.proc)


def _take_server(task: dict[str, Any]) -> _Server | None:
    """An idle check server for this interpreter and environment (started where none
    waits); None where the engine keeps none (Ray).  Shared by the slots: a server's
    worker is warm for whichever slot checks next."""
    if not task.get("check_servers"):
        return None
    python, env = task.get("python") or sys.executable, dict(task.get("env") or {})
    key = (python, tuple(sorted(env.items())))
    with _LOCK:
        _IDLE[:] = [s for s in _IDLE if s.proc.poll() is None]  # not those that died
        idle = next((s for s in _IDLE if s.key == key), None)
        if idle is not None:
            _IDLE.remove(idle)
            return idle
        _MADE[0] += 1
        n = _MADE[0]
    return _Server(key, python, env, Path(task["check_servers"]) / f"server-{n}")


def _give_back(s: _Server) -> None:
    with _LOCK:
        if s.proc.poll() is None:
            _IDLE.append(s)


def close_servers() -> None:
    """Every idle server stopped (a triage's end): its worker with it."""
    with _LOCK:
        idle = list(_IDLE)
        _IDLE.clear()
    for s in idle:
        s.close()


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
    server = _take_server(task) if res.capture and Path(res.capture).is_dir() else None
    if server is not None:
        t1 = time.monotonic()
        try:
            got = server.ask(str(res.baseline), [[o, b] for _, o, b in asked], budget)
        finally:
            _give_back(server)
        code = None if got is None else ExitCode.INTERNAL if "traceback" in got else 0
        doc = got or {"why": f"its check server gave no answer in {budget:.0f} s"}
        steps.append(Step(what, code, round(time.monotonic() - t1, 2)))
    elif res.capture and Path(res.capture).is_dir():
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
        ran = check_one(task, off, left, backend)
        ran.capture_why = str(why or f"its check ended {code}")[:300]
        out.append((rep, ran))
    # the one process's steps and seconds: the first answer carries its step, the
    # answers' seconds add up to the whole
    if out:
        first = out[0][1]
        first.steps = [*steps, *first.steps]
        spent = sum(c.seconds for _, c in out)
        first.seconds = round(first.seconds + max(0.0, time.monotonic() - t0 - spent), 2)
    return out

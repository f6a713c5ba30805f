"""One script of ``tcompile triage``: its verdict, culprit and verified repro.

The unit of work the local pool and Ray both run (a plain function of a JSON-able
task, returning its record: repro/triage_records.py), so a cluster node needs only
tcompile and torch.
Each step is tcompile's own command line in a child interpreter, read through its
``--json`` document (a public interface): ``run`` first (cheap: clean, not a compiler
bug, needs a GPU), then ``report`` (bisect + minify, with the run it starts as the
second sample: a failure that does not come back is *flaky*).  Each child dies with
this process (PR_SET_PDEATHSIG) and gets what is left of the script's time budget;
past it, the child is stopped with SIGTERM (it keeps and reports what it found).

Verdicts: ``bug``, ``clean``, ``not_compiler``, ``flaky``, ``timeout``, ``needs_gpu``,
and ``error`` -- tcompile itself failed on this script, never read as "no failure".
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.exitcodes import ExitCode
from tcompile.repro.triage_records import Check, Flaky, ScriptResult, Step
from tcompile.repro.triage_verdict import TriageVerdict as Verdict

ERROR_DIR_ENV = "TCOMPILE_ERROR_DIR"  # cli/app.py keeps an internal error's traceback there


# the failure of a script that needs a GPU this machine lacks (CUDA, or Triton for it)
_NEEDS_GPU = re.compile(
    r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available"
    r"|CUDA driver initialization failed|cuda(?:\.is_available\(\))? is not available"
    r"|Cannot find a working triton installation|requires a GPU|needs a GPU|no GPU",
    re.IGNORECASE,
)
_GRACE = 20.0  # seconds between SIGTERM and SIGKILL for a child past its budget
_MARGIN = 45.0  # seconds a report keeps for verifying and writing before its budget ends


class Interrupted(Exception):
    """A child was interrupted (Ctrl-C): this script's result is not kept."""


_LIVE: set[subprocess.Popen[bytes]] = set()  # the children running now, for stop_all
_LOCK = threading.Lock()
# set by stop_all: no child starts after it (a pool thread that finished its script
# would otherwise start the next queued one while the running ones are being stopped:
# the first Ctrl-C did not stop triage)
_STOPPING = threading.Event()


def start() -> None:
    """A new triage: children may start again."""
    _STOPPING.clear()


def stop_all(grace: float = _GRACE) -> None:
    """Ctrl-C: no child starts from now on; every running child gets SIGTERM (each keeps
    what it found and stops its own processes), SIGKILL after ``grace`` seconds, so the
    pool's threads come back."""
    with _LOCK:
        _STOPPING.set()
        procs = [p for p in _LIVE if p.poll() is None]
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    end = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()


def _die_with_parent() -> None:
    # Linux: the child gets SIGTERM when the thread that started it goes away
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _tcompile(
    python: str, argv: list[str], budget: float, log: Path, cwd: str, env: dict[str, str]
) -> tuple[int | None, dict[str, Any], float]:
    """``python -m tcompile ARGV --json`` (``-m MODULE ARGS``: another of tcompile's
    entry points): (exit code or None past the budget, its document, seconds)."""
    t0 = time.monotonic()
    with open(log, "ab") as err, _LOCK:
        if _STOPPING.is_set():
            raise Interrupted
        proc = subprocess.Popen(
            [python, *(argv if argv[0] == "-m" else ["-m", "tcompile", *argv])],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=cwd,
            # tcompile's own traceback, if it fails, stays with the script's results
            env={**os.environ, ERROR_DIR_ENV: str(log.parent), **env},
            preexec_fn=_die_with_parent,
        )
        _LIVE.add(proc)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=max(1.0, budget))
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.send_signal(signal.SIGTERM)  # the child keeps what it found, kills its own
        try:
            out, _ = proc.communicate(timeout=_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    finally:
        with _LOCK:
            _LIVE.discard(proc)
    try:
        doc = json.loads(out.decode(errors="replace") or "{}")
    except ValueError:
        doc = {"message": out.decode(errors="replace")[-500:]}
    code = None if timed_out else proc.returncode
    if code == ExitCode.INTERRUPTED or (code is not None and code < 0):
        raise Interrupted
    return code, doc, time.monotonic() - t0


def _accuracy_flags(accuracy: str) -> list[str]:
    mode = AccuracyMode(accuracy)
    if mode is AccuracyMode.OFF:
        return []
    return ["--strict-accuracy"] if mode is AccuracyMode.STRICT else ["--accuracy"]


def triage_one(task: dict[str, Any]) -> ScriptResult:
    """The whole triage of one script (see the module's docstring): its runs, then its
    own report.  ``task``: path, args, work_dir, accuracy, timeout, repeat, python."""
    res = classify_one(task)
    if res.verdict != Verdict.BUG:
        return res
    return report_one(task, res)


def _stepper(task: dict[str, Any], steps: list[Step], budget: float) -> Any:
    """``step(what, argv)``: one tcompile command of this script, within ``budget``
    seconds from now; each step is kept in ``steps``."""
    deadline = time.monotonic() + budget
    log = Path(task["work_dir"]) / "tcompile.log"
    python = task.get("python") or sys.executable

    def step(what: str, argv: list[str]) -> tuple[int | None, dict[str, Any]]:
        left = deadline - time.monotonic()
        if left <= 1:
            steps.append(Step(what, None, 0.0))
            return None, {}
        code, doc, secs = _tcompile(
            python, argv, left, log, str(Path(task["path"]).parent), task.get("env") or {}
        )
        steps.append(Step(what, code, round(secs, 2)))
        return code, doc

    return step


def _finish(res: ScriptResult, verdict: Verdict, message: str, t0: float) -> ScriptResult:
    res.verdict, res.message = verdict, message.strip()[:500]
    res.seconds = round(res.seconds + time.monotonic() - t0, 2)
    return res


def classify_one(task: dict[str, Any]) -> ScriptResult:
    """A script's runs (``repeat`` of them): its verdict, and for a ``bug`` what the run
    said of it (signature, kind, stage, device, the wrong node's op).  A bug's report
    (bisect + minify) is report_one's: once per cluster (triage_loop.py)."""
    t0 = time.monotonic()
    work = Path(task["work_dir"])
    work.mkdir(parents=True, exist_ok=True)
    acc = _accuracy_flags(task.get("accuracy", AccuracyMode.LOOSE.value))
    res = ScriptResult()
    step = _stepper(task, res.steps, float(task["timeout"]))
    script = task["path"]

    def finish(verdict: Verdict, message: str) -> ScriptResult:
        return _finish(res, verdict, message, t0)

    # the program's own limit inside a run: below the budget, so a hang is the run's finding
    run_argv = ["run", "--json", *acc, "--timeout", str(max(10, int(task["timeout"] * 0.8)))]
    run_argv.append("--capture")  # as report's baseline: report_one and checks start from it
    failed = 0
    for k in range(max(1, int(task.get("repeat") or 2))):
        code, doc = step(
            f"run {k + 1}", [*run_argv, "--out", str(work / f"run{k + 1}"), script, *task["args"]]
        )
        if code is None:
            return finish(Verdict.TIMEOUT, f"the run did not finish in {task['timeout']:.0f} s")
        text = json.dumps(doc)
        if (
            code in (ExitCode.COMPILER_FAILURE, ExitCode.NOT_COMPILER)
            and _NEEDS_GPU.search(text)
            and not _has_cuda()
        ):
            return finish(Verdict.NEEDS_GPU, "needs a GPU: " + _first_line(doc))
        if code in (ExitCode.NOT_COMPILER, ExitCode.USAGE):
            return finish(Verdict.NOT_COMPILER, _first_line(doc))
        if code == ExitCode.INTERNAL:
            res.traceback = doc.get("traceback")
            return finish(Verdict.ERROR, "tcompile failed: " + _first_line(doc))
        if code == ExitCode.FLAKY:  # it failed, and passed when the run tried it again
            res.flaky = Flaky(failed + 1, k + 2)
            return finish(Verdict.FLAKY, _first_line(doc))
        if code == ExitCode.COMPILER_FAILURE and all(
            f.get("kind") == "timeout" for f in doc.get("failures") or [{}]
        ):
            return finish(
                Verdict.TIMEOUT,
                "the program did not finish under torch.compile: " + _first_line(doc),
            )
        if code == ExitCode.COMPILER_FAILURE:
            failed += 1
            _from_run(res, doc)
            if k == 0:
                _captured(res, doc)
        elif code != ExitCode.OK:  # no code tcompile gives: never read as a clean run
            return finish(
                Verdict.ERROR, f"tcompile ended with exit code {code}: " + _first_line(doc)
            )
    runs = k + 1
    res.runs = runs
    if not failed:
        return finish(Verdict.CLEAN, f"no compiler failure in {runs} run(s)")
    if failed < runs:  # a failure that does not come back every time
        res.flaky = Flaky(failed, runs)
        return finish(Verdict.FLAKY, f"failed {failed} of {runs} runs: {res.signature or ''}")
    return finish(Verdict.BUG, res.signature or "")


def report_one(task: dict[str, Any], res: ScriptResult) -> ScriptResult:
    """``tcompile report`` of a script classify_one called a bug: bisect and minify, with
    the run it starts as one more sample (a failure that does not come back is
    *flaky*).  Its budget: the script's timeout less what its runs took."""
    t0 = time.monotonic()
    res = dataclasses.replace(res, steps=list(res.steps))
    runs = int(res.runs or 1)
    left = float(task["timeout"]) - res.seconds
    step = _stepper(task, res.steps, max(left, 2.0))
    acc = _accuracy_flags(task.get("accuracy", AccuracyMode.LOOSE.value))
    said = res.signature or ""

    def finish(verdict: Verdict, message: str) -> ScriptResult:
        return _finish(res, verdict, message, t0)

    # its classification's run is the report's first (no second baseline)
    base = ["--baseline", res.baseline] if res.baseline and Path(res.baseline).is_dir() else []
    code, doc = step(
        "report",
        [
            "report",
            "--json",
            *acc,
            *base,
            "--max-bugs",
            "1",
            "--timeout",
            str(int(task["timeout"])),
            # a program-level minify ends itself in time and keeps its best program (past
            # the budget the report is killed and its minify leaves no repro)
            "--max-time",
            str(int(max(30.0, min(float(task.get("max_time") or left), left - _MARGIN)))),
            "--out",
            str(Path(task["work_dir"]) / "report"),
            task["path"],
            *task["args"],
        ],
    )
    if code == ExitCode.OK:  # the report's own run is one more sample
        res.flaky = Flaky(runs, runs + 1)
        return finish(Verdict.FLAKY, f"failed {runs} of {runs + 1} runs: {said}")
    if code == ExitCode.NOT_COMPILER:  # its control run failed so without torch.compile
        return finish(Verdict.NOT_COMPILER, _first_line(doc))
    bugs = doc.get("bugs") or []
    if code is None and not bugs:
        res.no_repro = f"bisect and minify did not finish in its budget ({left:.0f} s)"
        return finish(Verdict.BUG, f"{said} (bisect and minify did not finish in time)")
    if code == ExitCode.INTERNAL:  # tcompile's own failure: never shown as a result
        res.traceback = doc.get("traceback")
        return finish(
            Verdict.ERROR,
            f"tcompile failed in its report step: {_first_line(doc)}"
            + (f" (run had found: {said})" if said else ""),
        )
    if bugs:
        _take_bug(res, bugs[0])
    return finish(Verdict.BUG, res.signature or "")


def check_one(
    task: dict[str, Any], without: str, budget: float, backend: str | None = None
) -> Check:
    """Membership by running (issue 52): the script with ``without`` off (``tcompile run
    --without``) and, when that passes, once more as it is -- it must fail again, or the
    pass says nothing of the switch.  At a culprit's stage below inductor (``backend``)
    the run as it is comes first: it must fail there, then pass with the switch off.
    ``passes`` when it passed off and failed on."""
    t0 = time.monotonic()
    steps: list[Step] = []
    step = _stepper(task, steps, budget)
    limit = str(max(10, int(budget * 0.8)))
    out = str(Path(task["work_dir"]) / "checks")
    argv = ["run", "--json", *_accuracy_flags(task.get("accuracy", AccuracyMode.LOOSE.value))]
    # a culprit below inductor (a decomposition at aot_eager_decomp_partition) is checked
    # at its stage: inductor decomposes the same op again its own way, so the switch off
    # at inductor left #181693's failure in place where bisect's stage had it gone
    argv += ["--backend", backend] if backend else []
    switches = [a for w in without.split() for a in ("--without", w)]  # a family: several
    rest = ["--timeout", limit, "--out", out, task["path"], *task["args"]]
    plain = [*argv, *rest]
    off = on = None
    if backend:
        # at the culprit's stage, first as it is: a script that passes there is not this
        # bug (its own failure is inductor's), and that pass says nothing of flakiness --
        # five inductor bugs of the main corpus read as flaky when asked the other way
        on, _ = step(f"run at {backend}", plain)
    if not backend or on == ExitCode.COMPILER_FAILURE:
        off, _ = step(f"without {without}", [*argv, *switches, *rest])
    if off == ExitCode.OK and not backend:
        on, _ = step("run again", plain)
    return Check(
        without=without,
        backend=backend,
        off=off,
        on=on,
        passes=off == ExitCode.OK and on == ExitCode.COMPILER_FAILURE,
        # the script's own configuration passed as it is, after failing: flaky
        flaky=off == ExitCode.OK and on == ExitCode.OK and not backend,
        seconds=round(time.monotonic() - t0, 2),
        steps=steps,
    )


def _captured(res: ScriptResult, doc: dict[str, Any]) -> None:
    """Its run's folder (``run --capture``: report_one's ``--baseline``) and, where that
    run saved the failing graph, its folder (triage_capture.py checks membership on it)."""
    from .capture_check import captured_failure

    run_dir = doc.get("run_dir")
    if not (run_dir and doc.get("captured")):
        return
    res.baseline = run_dir
    try:
        cap = captured_failure(run_dir)[2]
    except (OSError, ValueError, KeyError):
        return
    res.capture = str(cap) if cap else None


def _take_bug(res: ScriptResult, bug: dict[str, Any]) -> None:
    """The report's bug: kept whole (the driver derives culprit and minimal graph from
    it), and the repro's text where it was verified."""
    res.raw_bug = bug  # the driver derives culprit and minimal graph from it
    res.title = bug.get("title")
    mini = bug.get("minify") or {}
    res.bisect = _counts(bug.get("bisect"), "runs")
    res.minify = _counts(mini, "calls")
    if (bug.get("bisect") or {}).get("flaky"):
        res.flaky = Flaky(None, None, bug["bisect"].get("flaky_detail"))
    repro = mini.get("repro")
    if repro and mini.get("verified") and Path(repro).is_file():
        res.repro_text = Path(repro).read_text()
        res.repro_lines = len(res.repro_text.splitlines())
        res.repro_level = mini.get("level")
        res.repro_path = repro
    else:  # why not, for the pages (issue 62: a cluster without a repro says why)
        res.no_repro = _no_repro(mini)


def _no_repro(mini: dict[str, Any]) -> str:
    """Why a report's bug has no verified repro, in one line."""
    if not mini:
        return "the report minified nothing (no graph, no record, no program to minify)"
    if mini.get("not_verified"):
        return f"repro.py NOT verified: {mini['not_verified']}"[:300]
    if mini.get("interrupted"):
        return "its minify was interrupted"
    return (_first_line(mini) or "its minify wrote no repro")[:300]


def _from_run(res: ScriptResult, doc: dict[str, Any]) -> None:
    """What a failing run's ``--json`` says of its failure, into ``res``."""
    groups = doc.get("groups") or []
    g = groups[0] if groups else {}
    fail = (doc.get("failures") or [{}])[0]
    graphs = doc.get("graphs") or []
    where = next((x for x in graphs if x.get("index") == fail.get("graph")), None)
    res.signature = g.get("signature") or fail.get("signature") or ""
    res.kind = g.get("kind") or fail.get("kind")
    res.stage = g.get("stage") or fail.get("stage")
    res.exc_type = (fail.get("signature_fields") or {}).get("exc_type")
    res.graphs = len(graphs)
    # what proposes a cluster to check (triage_loop.py): the failing graph's device
    # (the program's first graph's for a failure outside any), the wrong node's op
    res.device = (where or (graphs[0] if graphs else {})).get("device")
    res.wrong_op = (fail.get("divergence") or {}).get("op")
    # the inductor pattern its compile failed in (child/patterns.py): a representative
    # whose switch is that pattern is checked first, before any report of its own
    res.pattern = fail.get("pattern")


def _counts(part: dict[str, Any] | None, unit: str) -> dict[str, Any] | None:
    if not part:
        return None
    return {unit: part.get(unit), "seconds": round(float(part.get("seconds") or 0.0), 2)}


def _first_line(doc: dict[str, Any]) -> str:
    for key in ("explanation", "message", "error"):
        if doc.get(key):
            return str(doc[key]).strip().splitlines()[0][:300]
    return ""


def _has_cuda() -> bool:
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 -- no torch, no CUDA
        return False


def also(python: str, repro: str, timeout: float) -> dict[str, Any]:
    """The verified repro under another interpreter (another torch): fixed or not."""
    deadline = time.monotonic() + timeout
    try:
        version = (
            subprocess.run(
                [python, "-c", "import torch; print(torch.__version__)"],
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout.strip()
            or "?"
        )
        proc = subprocess.run(
            [python, repro],
            capture_output=True,
            text=True,
            cwd=str(Path(repro).parent),
            timeout=max(30.0, deadline - time.monotonic()),
            preexec_fn=_die_with_parent,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"python": python, "torch": None, "result": "error", "detail": str(exc)[:200]}
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    if proc.returncode == 1 and "REPRODUCED" in proc.stdout and "NOT REPRODUCED" not in proc.stdout:
        result = "still fails"
    elif proc.returncode == 0:
        result = f"fixed in {version}"
    else:
        result = "error"
    return {
        "python": python,
        "torch": version,
        "result": result,
        "exit_code": proc.returncode,
        "detail": tail[0][:200],
    }

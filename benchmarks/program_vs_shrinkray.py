"""Program-level minify against a general-purpose reducer: tcompile's
``minify --level program`` and shrinkray, on the same fixtures, with the same oracle and
the same parallelism.

    python3 benchmarks/program_vs_shrinkray.py [--only NAME] [--jobs 2]
                                               [--shrinkray-limit SECONDS]
                                               [--shrinkray PATH] [--out FILE] [--keep]

For each fixture of fixtures/program/MANIFEST.json:

1. ``tcompile minify --level program --jobs N --json --out DIR FIXTURE``: wall-clock
   seconds, lines before (the fixture) and after (best.py), oracle runs
   (``program.runs``), and whether repro.py was verified.
2. shrinkray (``scripts/shrinkray_venv.sh`` installs it in a Python >= 3.12 venv of its
   own) on a copy of the fixture, with ``--parallelism N --ui basic --no-llm
   --input-type arg``; its interestingness test is ``benchmarks/program_oracle.py``
   with the target.json that tcompile's own baseline run wrote (so both reducers judge
   candidates by the same oracle).  Each oracle call is counted in a file.  shrinkray
   has no time limit of its own: at ``--shrinkray-limit`` seconds (default: twice
   tcompile's time on the fixture, at least 300) it is interrupted, then killed with
   everything it started; the file it reduces in place holds its best so far.
3. One more oracle call on shrinkray's result: still interesting?

Lines are non-blank lines, for every column.  Seconds are wall-clock seconds of the
whole command (start-up, baseline runs and verification included).  The runs run one
after the other, never together.  Writes a Markdown table to --out (default
benchmarks/results/program-vs-shrinkray.md) and prints it.  Slow: minutes per fixture.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "program"
ORACLE = ROOT / "benchmarks" / "program_oracle.py"
VENV_SCRIPT = ROOT / "scripts" / "shrinkray_venv.sh"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "program-vs-shrinkray.md"
TCOMPILE_LIMIT = 3600  # seconds for tcompile's minify on one fixture
MIN_SHRINKRAY_LIMIT = 300
MARK_ENV = "TCOMPILE_BENCH_SHRINKRAY"  # every process of a shrinkray run carries it
GRACE = 15  # seconds shrinkray gets to stop after SIGINT before SIGKILL


def _tcompile() -> list[str]:
    exe = shutil.which("tcompile")
    return [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]


def nonblank(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "?"


def shrinkray_exe(given: str | None) -> str:
    if given:
        return given
    proc = subprocess.run(
        ["bash", str(VENV_SCRIPT)], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        sys.exit(f"scripts/shrinkray_venv.sh failed: {_last_line(proc.stderr)}")
    return _last_line(proc.stdout)


def ours(fixture: Path, jobs: int, out: Path) -> dict:
    """tcompile's program-level minify, as the user runs it."""
    cmd = [*_tcompile(), "minify", "--level", "program", "--jobs", str(jobs), "--json"]
    cmd += ["--out", str(out), str(fixture)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=TCOMPILE_LIMIT,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"tcompile timed out after {TCOMPILE_LIMIT} s"}
    wall = time.monotonic() - t0
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": f"tcompile exited {proc.returncode}: {_last_line(proc.stderr)}"}
    run_dir = Path(doc.get("run_dir") or "")
    target, best = run_dir / "target.json", run_dir / "best.py"
    if not target.is_file():
        return {"error": f"no target.json ({doc.get('message') or _last_line(proc.stderr)})"}
    prog = doc.get("program") or {}
    return {
        "seconds": wall,
        "json_seconds": doc.get("seconds"),
        "lines_after": nonblank(best.read_text()) if best.is_file() else None,
        "runs": prog.get("runs"),
        "calls": doc.get("calls"),
        "verified": bool(doc.get("verified")),
        "target": str(target),
        "run_dir": str(run_dir),
    }


INTERESTING = """#!/bin/sh
# shrinkray's interestingness test: tcompile's program oracle on the candidate "$1".
# Each call appends its verdict (0: interesting) to the counter file.
{python} {oracle} {target} "$1" >/dev/null 2>&1
rc=$?
echo "$rc" >> {counter}
exit $rc
"""


def _marked_pids(token: str) -> list[int]:
    """Live processes whose environment holds MARK_ENV=token (tests lead sessions of
    their own, and so do the oracle's candidate runs: no process group holds them all)."""
    needle = f"{MARK_ENV}={token}\0".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def _stop(proc: subprocess.Popen, token: str) -> None:
    """Interrupt shrinkray, then kill its process group and everything it started."""
    for sig, wait in ((signal.SIGINT, GRACE), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            pass
    for _ in range(3):
        pids = _marked_pids(token)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)
    proc.wait()


def oracle(target: str, candidate: Path) -> bool:
    proc = subprocess.run(
        [sys.executable, str(ORACLE), target, str(candidate)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=TCOMPILE_LIMIT,
    )
    return proc.returncode == 0


def _latest_reduction(work: Path, name: str) -> Path | None:
    found = sorted(work.glob(f".shrinkray/*/reductions/*/{name}"), key=lambda p: p.parent.name)
    return found[-1] if found else None


def theirs(
    exe: str, fixture: Path, target: str, jobs: int, limit: float, work: Path, extra: list[str]
) -> dict:
    """shrinkray on a copy of the fixture, judged by the same oracle, stopped at limit."""
    case = work / fixture.name
    shutil.copyfile(fixture, case)
    counter = work / "oracle-calls.txt"
    counter.touch()
    test = work / "interesting.sh"
    test.write_text(
        INTERESTING.format(
            python=shlex.quote(sys.executable),
            oracle=shlex.quote(str(ORACLE)),
            target=shlex.quote(target),
            counter=shlex.quote(str(counter)),
        )
    )
    test.chmod(0o755)
    cmd = [exe, "--ui", "basic", "--parallelism", str(jobs), "--no-llm"]
    cmd += ["--input-type", "arg", *extra, str(test), str(case)]
    token = uuid.uuid4().hex
    env = dict(os.environ, **{MARK_ENV: token, "SHRINKRAY_LLM": "0"})
    log = work / "shrinkray.log"
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        stopped = False
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            stopped = True
        except BaseException:
            _stop(proc, token)
            raise
        _stop(proc, token)  # a finished run may still leave a test behind
    seconds = time.monotonic() - t0
    said = log.read_text(errors="replace")
    verdicts = counter.read_text().split()
    result = case
    interesting = oracle(target, case)
    note = ""
    if not interesting:  # a write cut short by the kill? the last recorded reduction
        latest = _latest_reduction(work, fixture.name)
        if latest is not None and oracle(target, latest):
            result, interesting, note = latest, True, "last recorded reduction"
    return {
        "seconds": seconds,
        "stopped": stopped,
        "returncode": proc.returncode,
        "lines_after": nonblank(result.read_text()),
        "runs": len(verdicts),
        "interesting_runs": verdicts.count("0"),
        "interesting": interesting,
        "note": note,
        "log_tail": _last_line(said),
        "warnings": [ln.strip() for ln in said.splitlines() if ln.lower().startswith("warning")],
    }


def _ratio(a: float | None, b: float | None, bound: bool = False) -> str:
    if not a or not b:
        return "-"
    return ("≤ " if bound else "") + f"{a / b:.2f}"


def row(name: str, before: int, t: dict, s: dict | None, limit: float) -> str:
    if "error" in t:
        return f"| `{name}` | {before} | error: {t['error']} | | | | | | | | |"
    t_cells = [
        str(t["lines_after"]),
        str(t["runs"]),
        f"{t['seconds']:.0f}",
    ]
    if s is None or "error" in s:
        err = "not run" if s is None else f"error: {s['error']}"
        return f"| `{name}` | {before} | {' | '.join(t_cells)} | {err} | | | | | |"
    secs = f"stopped at {limit:.0f} s" if s["stopped"] else f"{s['seconds']:.0f}"
    if not s["stopped"] and s["returncode"] not in (0, None):
        secs += f" (exit {s['returncode']})"
    verified = ("yes" if t["verified"] else "NO") + " / " + ("yes" if s["interesting"] else "NO")
    if s["note"]:
        verified += f" ({s['note']})"
    return (
        f"| `{name}` | {before} | {' | '.join(t_cells)} | {s['lines_after']} | {s['runs']} | "
        f"{secs} | {_ratio(t['seconds'], s['seconds'], bound=s['stopped'])} | "
        f"{_ratio(t['lines_after'], s['lines_after'])} | {verified} |"
    )


def header(jobs: int, exe: str) -> str:
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "?"
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    command = shlex.join(["python3", "benchmarks/program_vs_shrinkray.py", *sys.argv[1:]])
    return "\n".join(
        [
            "# Program-level minify: tcompile vs shrinkray",
            "",
            f"- date: {datetime.date.today().isoformat()}",
            f"- torch {torch_version}; {version or 'shrinkray ?'}; "
            f"machine: {os.cpu_count()} CPUs (nproc)",
            f"- command: `{command}`",
            f"- both reducers: {jobs} candidate(s) at a time, judged by "
            "`benchmarks/program_oracle.py` with the target of tcompile's baseline run; "
            "shrinkray with `--ui basic --no-llm --input-type arg`, otherwise its defaults",
            "- lines: non-blank lines; seconds: wall-clock of the whole command; runs: "
            "oracle calls; time ratio and size ratio: tcompile / shrinkray (≤: shrinkray "
            "was stopped at its limit); verified: tcompile's repro.py verified / "
            "shrinkray's result still interesting (one more oracle call)",
            "",
        ]
    )


TABLE_HEAD = [
    "| fixture | lines before | tcompile lines after | tcompile runs | tcompile seconds "
    "| shrinkray lines after | shrinkray runs | shrinkray seconds | time ratio | size ratio "
    "| verified (tcompile / shrinkray) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="fixtures whose name holds this")
    ap.add_argument("--jobs", type=int, default=2, help="candidates judged at a time (both)")
    ap.add_argument(
        "--shrinkray-limit",
        type=float,
        default=None,
        help="seconds shrinkray may run (default: 2x tcompile's time, at least 300)",
    )
    ap.add_argument("--shrinkray", default=None, help="the shrinkray executable")
    ap.add_argument(
        "--shrinkray-arg",
        action="append",
        default=[],
        help="one more argument for shrinkray (repeatable), e.g. --assume-deterministic",
    )
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--keep", action="store_true", help="keep each fixture's work directory")
    a = ap.parse_args()

    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text())
    names = [m["file"] for m in manifest if a.only is None or a.only in m["file"]]
    if not names:
        sys.exit(f"no fixture matches {a.only!r}")
    exe = shrinkray_exe(a.shrinkray)
    head = header(a.jobs, exe)
    rows: list[str] = []
    notes: list[str] = []
    for name in names:
        fixture = FIXTURES / name
        before = nonblank(fixture.read_text())
        work = Path(tempfile.mkdtemp(prefix=f"program-vs-shrinkray-{fixture.stem}-"))
        print(f"{name}: tcompile minify --level program ...", file=sys.stderr, flush=True)
        t = ours(fixture, a.jobs, work / "tcompile")
        print(f"  tcompile: {json.dumps(t)}", file=sys.stderr, flush=True)
        s = None
        limit = a.shrinkray_limit or 0.0
        if "error" not in t:
            limit = a.shrinkray_limit or max(MIN_SHRINKRAY_LIMIT, 2 * t["seconds"])
            print(f"{name}: shrinkray (limit {limit:.0f} s) ...", file=sys.stderr, flush=True)
            shrink = work / "shrinkray"
            shrink.mkdir()
            s = theirs(exe, fixture, t["target"], a.jobs, limit, shrink, a.shrinkray_arg)
            print(f"  shrinkray: {json.dumps(s)}", file=sys.stderr, flush=True)
        rows.append(row(name, before, t, s, limit))
        for warning in (s or {}).get("warnings", []):
            if f"- shrinkray: {warning}" not in notes:
                notes.append(f"- shrinkray: {warning}")
        if a.keep:
            print(f"  kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
        tail = ["", "Notes:", "", *notes] if notes else []
        doc = "\n".join([head, *TABLE_HEAD, *rows, *tail]) + "\n"
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(doc)  # after every fixture: a partial table survives
    print(doc, end="")


if __name__ == "__main__":
    main()

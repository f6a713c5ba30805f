"""Issue 51's long job: a training script that works for minutes and fails at its end
(fixtures/long_job/train_late.py: a new, short batch compiles a new graph that hits
#197080).  One plain run of it, then ``tcompile report`` (run + bisect + minify +
report.md) under this checkout -- by default, and with ``--confirm`` (the culprit
confirmed by a second run of the program) -- and under an earlier commit, each as
a ratio to the plain run, in one sitting on the same machine.

    python benchmarks/long_job.py [--steps 20000] [--old aa9062d] [--skip-old]
                                  [--script train_check.py]

``--script train_check.py`` (issue 61): the job fails its own final check instead (a
compiled checksum hits #187018 and the program asserts it equals eager's); its report
is located from the baseline, no plain run and no locating run.

The earlier commit is checked out in a git worktree and imported from a package folder
of symlinks (benchmarks/verdicts_before_after.py).  Whole-program runs are counted from
the run folders each report left (the baseline, the bisect's probes, the minify's
workers, which run the program up to the failing graph).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "fixtures" / "long_job" / "train_late.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

from verdicts_before_after import package_folder  # noqa: E402

MAIN = "import sys; from tcompile.cli.main import main; sys.argv[0] = 'tcompile'; main()"


def timed(
    cmd: list[str], env: dict[str, str], cwd: Path
) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    done = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL
    )
    return time.monotonic() - t0, done


def report(
    site: Path | None, steps: int, out: Path, extra: list[str], keep_mb: str | None = None
) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TCOMPILE")}
    if keep_mb is not None:  # TCOMPILE_KEEP_MB=0: no last call kept (the two runs decide)
        env["TCOMPILE_KEEP_MB"] = keep_mb
    if site is not None:
        env["PYTHONPATH"] = f"{site}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep)
    cmd = [sys.executable, "-c", MAIN, "report", "--json", "--out", str(out), *extra]
    seconds, done = timed([*cmd, str(SCRIPT), "--steps", str(steps)], env, SCRIPT.parent)
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        return {"seconds": seconds, "error": done.stderr[-800:]}
    bug = (doc.get("bugs") or [{}])[0]
    bis, mini = bug.get("bisect") or {}, bug.get("minify") or {}
    return {
        "seconds": seconds,
        "program_runs": program_runs(bis, mini),
        "culprit": " ".join(str(bis.get(k)) for k in ("stage", "graph", "subsystem", "detail")),
        "bisect_runs": bis.get("runs"),
        "from_capture": bis.get("from_capture", False),
        "confirmed": bis.get("confirmed"),
        "verified": mini.get("verified"),
        "nodes": f"{mini.get('nodes_before')} -> {mini.get('nodes_after')}",
    }


def program_runs(bis: dict, mini: dict) -> int:
    """The program's runs a report made: its baseline, the bisect's runs after it, and
    the minify's workers (each runs the program up to the failing graph) unless it
    started from the capture."""
    workers = 0 if mini.get("from_capture") else 1 + int(mini.get("worker_restarts") or 0)
    return 1 + int(bis.get("runs") or 0) + workers


def main() -> int:
    global SCRIPT
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--old", default="aa9062d")
    ap.add_argument("--skip-old", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--script", default=SCRIPT.name, help="a script of fixtures/long_job")
    ap.add_argument(
        "--keep0",
        action="store_true",
        help="also report with TCOMPILE_KEEP_MB=0 (issue 61's before)",
    )
    ap.add_argument("--skip-confirm", action="store_true")
    a = ap.parse_args()
    SCRIPT = SCRIPT.parent / a.script
    base = Path(tempfile.mkdtemp(prefix="long-job-"))
    rows: dict[str, dict] = {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TCOMPILE")}
    plain, done = timed([sys.executable, str(SCRIPT), "--steps", str(a.steps)], env, SCRIPT.parent)
    rows["plain run"] = {"seconds": plain, "exit": done.returncode}
    print(f"plain run: {plain:.0f} s (exit {done.returncode})", flush=True)
    rows["report (this checkout)"] = report(None, a.steps, base / "after", [])
    print(rows["report (this checkout)"], flush=True)
    if a.keep0:
        rows["report, no last call kept"] = report(None, a.steps, base / "keep0", [], "0")
        print(rows["report, no last call kept"], flush=True)
    if not a.skip_confirm:
        rows["report --confirm (this checkout)"] = report(
            None, a.steps, base / "confirm", ["--confirm"]
        )
        print(rows["report --confirm (this checkout)"], flush=True)
    if not a.skip_old:
        worktree = base / "old"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(worktree), a.old], cwd=ROOT, check=True
        )
        try:
            site = package_folder(worktree, base / "site-old")
            rows[f"report ({a.old}, before)"] = report(site, a.steps, base / "before", [])
            print(rows[f"report ({a.old}, before)"], flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT)
    print(f"\n{a.script} --steps {a.steps}\n")
    print("| | seconds | x plain run | program runs | culprit | confirmed | repro verified |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['seconds']:.0f} | {r['seconds'] / plain:.2f} | "
            f"{r.get('program_runs', 1)} | {r.get('culprit', '')} | {r.get('confirmed', '')} | "
            f"{r.get('verified', '')} |"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

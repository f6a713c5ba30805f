"""Runs `tcompile bisect` needs per fixture (the goal: at most 8 for a single culprit,
9 with the confirmation run), and the culprit it names.

    python benchmarks/bisect_runs.py [--repeat 1] [--jobs 1]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = [
    ("cpp_relu_accuracy.py", ["--accuracy"]),
    ("cpp_relu_compile_error.py", []),
    ("cpp_relu_runtime_error.py", []),
    ("multi_graph.py", ["--accuracy"]),
    ("post_grad_pass_bug.py", ["--accuracy"]),
    ("bad_decomposition.py", ["--accuracy"]),
    ("two_bugs.py", ["--accuracy"]),
    ("cpp_throw_crash.py", []),
]


def one(fixture: str, flags: list[str], jobs: int) -> dict:
    exe = shutil.which("tcompile")
    cmd = [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]
    out = tempfile.mkdtemp(prefix="bisect-runs-")
    proc = subprocess.run(
        [
            *cmd,
            "bisect",
            "--json",
            "--jobs",
            str(jobs),
            "--out",
            out,
            *flags,
            str(ROOT / "fixtures" / fixture),
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    shutil.rmtree(out, ignore_errors=True)
    doc = json.loads(proc.stdout)
    return {
        "runs": doc["runs"],
        "seconds": doc["seconds"],
        "culprit": " ".join(str(x) for x in (doc["stage"], doc["subsystem"], doc["detail"]) if x),
        "flaky": doc["flaky"],
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ns = ap.parse_args()
    print("| fixture | runs | seconds (median) | culprit |\n|---|---|---|---|")
    for fixture, flags in FIXTURES:
        rs = [one(fixture, flags, ns.jobs) for _ in range(ns.repeat)]
        runs = sorted({r["runs"] for r in rs})
        secs = statistics.median(r["seconds"] for r in rs)
        print(
            f"| {fixture} {' '.join(flags)} | {'/'.join(map(str, runs))} | {secs:.1f} | {rs[0]['culprit'][:70]} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

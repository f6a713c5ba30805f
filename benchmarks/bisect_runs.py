"""Runs `tcompile bisect` needs per fixture (the goal: at most 8 for a single culprit),
guided by the first divergent op (the default) and with the binary search alone
(`--no-guided`, what bisect did before), and the culprit each names.

    python benchmarks/bisect_runs.py [--repeat 1] [--jobs 1] [--only SUBSTRING]
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
    ("ten_graphs.py", ["--accuracy"]),
    ("post_grad_pass_bug.py", ["--accuracy"]),
    ("bad_decomposition.py", ["--accuracy"]),
    ("two_bugs.py", ["--accuracy"]),
    ("cpp_throw_crash.py", []),
]


def one(fixture: str, flags: list[str], jobs: int, extra: tuple[str, ...] = ()) -> dict:
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
            *extra,
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
    ap.add_argument("--only", default=None)
    ns = ap.parse_args()
    print(
        "| fixture | runs (guided) | runs (--no-guided) | seconds (guided, median) "
        "| seconds (--no-guided, median) | culprit (guided / --no-guided) |"
    )
    print("|---|---|---|---|---|---|")
    for fixture, flags in FIXTURES:
        if ns.only and ns.only not in fixture:
            continue
        cols = []
        for extra in ((), ("--no-guided",)):
            rs = [one(fixture, flags, ns.jobs, extra) for _ in range(ns.repeat)]
            runs = "/".join(map(str, sorted({r["runs"] for r in rs})))
            cols.append((runs, statistics.median(r["seconds"] for r in rs), rs[0]["culprit"]))
        (rg, sg, cg), (rb, sb, cb) = cols
        culprit = cg[:60] if cg == cb else f"{cg[:40]} / {cb[:40]}"
        print(
            f"| {fixture} {' '.join(flags)} | {rg} | {rb} | {sg:.1f} | {sb:.1f} | {culprit} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

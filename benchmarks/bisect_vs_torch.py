"""`tcompile bisect --accuracy` against torch's own compiler bisector, same bug.

    python benchmarks/bisect_vs_torch.py [--repeat 1]

torch: `python -m torch._inductor.compiler_bisector run python benchmarks/bisect_checker.py`
(a hand-written checker, counted run by run).  tcompile: `tcompile bisect --accuracy
fixtures/cpp_relu_accuracy.py` (no checker: tcompile judges accuracy itself).  Both
must name the same culprit (inductor, lowerings, relu).  Prints runs, wall time
(median over --repeat, interleaved) and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_torch() -> dict:
    d = tempfile.mkdtemp(prefix="torch-bisect-")
    log = Path(d) / "runs.log"
    env = {**os.environ, "CHECKER_LOG": str(log), "TORCHINDUCTOR_CACHE_DIR": str(Path(d) / "cache")}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch._inductor.compiler_bisector",
            "run",
            sys.executable,
            str(ROOT / "benchmarks" / "bisect_checker.py"),
        ],
        cwd=d,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - t0
    result = [
        ln for ln in proc.stdout.splitlines() if "Bisection complete" in ln or "Bisection" in ln
    ]
    runs = len(log.read_text().splitlines()) if log.exists() else 0
    return {
        "seconds": seconds,
        "runs": runs,
        "result": result[-1] if result else proc.stdout[-300:],
    }


def run_ours() -> dict:
    d = tempfile.mkdtemp(prefix="tcompile-bisect-")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            "tcompile",
            "bisect",
            "--accuracy",
            "--json",
            "--out",
            d,
            str(ROOT / "fixtures" / "cpp_relu_accuracy.py"),
        ],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - t0
    doc = json.loads(proc.stdout)
    return {
        "seconds": seconds,
        "runs": doc["runs"],
        "result": f"{doc['stage']} / {doc['subsystem']} #{doc['application']} {doc['detail']}",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    theirs, ours = [], []
    for _ in range(args.repeat):
        theirs.append(run_torch())
        ours.append(run_ours())
    for r in theirs:
        print(f"torch    {r['seconds']:6.1f}s {r['runs']:3d} runs   {r['result']}")
    for r in ours:
        print(f"tcompile {r['seconds']:6.1f}s {r['runs']:3d} runs   {r['result']}")
    t = statistics.median(r["seconds"] for r in theirs)
    o = statistics.median(r["seconds"] for r in ours)
    tr = statistics.median(r["runs"] for r in theirs)
    orr = statistics.median(r["runs"] for r in ours)
    print(
        f"median: torch {tr:.0f} runs {t:.1f}s, tcompile {orr:.0f} runs {o:.1f}s; "
        f"runs ratio {orr / tr:.2f}, time ratio {o / t:.2f}"
    )


if __name__ == "__main__":
    main()

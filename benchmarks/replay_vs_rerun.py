"""`tcompile replay` of a recorded frame against re-running the program, and what
torch's own TORCH_COMPILE_REPLAY_RECORD=1 records for the same failure.

    python benchmarks/replay_vs_rerun.py [--repeat 5] [--script fixtures/capture_module_slow.py]

1. `tcompile run SCRIPT` once, which writes record.pkl for the capture failure.
2. `python SCRIPT` with TORCH_COMPILE_REPLAY_RECORD=1: does torch write a record?
3. Interleaved, `repeat` times each, wall time of:
     rerun    python SCRIPT                      (what debugging without a record costs)
     replay   tcompile replay record.pkl         (only the failing frame, classified)
   and checks that each replay reproduces the signature.  Prints medians and the ratio.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tcompile(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("tcompile")
    cmd = [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--script", default=str(ROOT / "fixtures" / "capture_module_slow.py"))
    ns = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tcompile-replay-bench-"))
    r = tcompile("run", "--json", "--out", str(work / "run"), ns.script)
    report = json.loads(r.stdout)
    [failure] = [f for f in report["failures"] if f["kind"] == "capture"]
    record = failure["record"]
    print(f"run: exit {r.returncode}, {failure['signature']}; record {record}")

    torch_dir = work / "torch"
    torch_dir.mkdir()
    env = {**os.environ, "TORCH_COMPILE_REPLAY_RECORD": "1"}
    subprocess.run(
        [sys.executable, ns.script], cwd=torch_dir, env=env, capture_output=True, check=False
    )
    recs = glob.glob(str(torch_dir / "**" / "*.rec"), recursive=True)
    print(f"torch TORCH_COMPILE_REPLAY_RECORD=1: {len(recs)} record(s) written {recs}")

    times: dict[str, list[float]] = {"rerun": [], "replay": []}
    for i in range(ns.repeat):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, ns.script], capture_output=True, check=False)
        times["rerun"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        r = tcompile("replay", "--json", "--out", str(work / f"replay-{i}"), record)
        times["replay"].append(time.perf_counter() - t0)
        rep = json.loads(r.stdout)
        assert rep["outcome"] == "reproduced" and rep["signature"] == failure["signature"], rep
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:7s} median {med[k]:6.2f}s  ({', '.join(f'{x:.2f}' for x in v)})")
    print(f"replay / rerun = {med['replay'] / med['rerun']:.2f}  (every replay reproduced)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

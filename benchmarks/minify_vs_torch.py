"""Whole-job comparison: `tcompile minify` against torch's own accuracy minifier.

    python benchmarks/minify_vs_torch.py [--repeat 1] [--script fixtures/block_accuracy.py]

torch: `TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4 python SCRIPT` (writes a
minifier_launcher.py), then `python minifier_launcher.py` (minifies, writes repro.py);
both timed, in a fresh temporary directory.  tcompile: `tcompile minify --accuracy
SCRIPT` (classification run, capture, minification, repro.py written and verified).
Prints wall times (median over --repeat, interleaved), compiles/oracle calls, the
final repro's compute nodes, and the ratio.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def count_repro_nodes(path: Path) -> int:
    """Compute nodes in a repro's forward (lines assigning a call)."""
    text = path.read_text()
    body = text[text.index("def forward") :].split("\n\n", 1)[0]
    return sum(1 for ln in body.splitlines()[1:] if re.match(r"\s+\w+ = ", ln))


def run_torch(script: str) -> dict:
    d = tempfile.mkdtemp(prefix="torch-minify-")
    env = {**os.environ, "TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": "4"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, script], cwd=d, env=env, capture_output=True, text=True)
    t1 = time.perf_counter()
    (launcher,) = glob.glob(f"{d}/torch_compile_debug/run_*/minifier/minifier_launcher.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    proc = subprocess.run(
        [sys.executable, launcher], cwd=d, env=env, capture_output=True, text=True
    )
    t2 = time.perf_counter()
    queries = re.findall(r"Made (\d+) queries", proc.stdout + proc.stderr)
    out = {
        "seconds": t2 - t0,
        "first_run": t1 - t0,
        "launcher": t2 - t1,
        "calls": int(queries[-1]) if queries else None,
        "nodes": count_repro_nodes(Path(d) / "repro.py"),
    }
    shutil.rmtree(d, ignore_errors=True)
    return out


def run_ours(script: str) -> dict:
    d = tempfile.mkdtemp(prefix="tcompile-minify-")
    t0 = time.perf_counter()
    proc = subprocess.run(
        ["tcompile", "minify", "--accuracy", "--json", "--out", d, script],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - t0
    doc = json.loads(proc.stdout)
    out = {
        "seconds": seconds,
        "calls": doc["calls"],
        "nodes": count_repro_nodes(Path(doc["repro"])),
        "verified": doc["verified"],
        "nodes_before": doc["nodes_before"],
    }
    shutil.rmtree(d, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--script", default=str(ROOT / "fixtures" / "block_accuracy.py"))
    args = ap.parse_args()
    torch_runs, our_runs = [], []
    for _ in range(args.repeat):
        torch_runs.append(run_torch(args.script))
        our_runs.append(run_ours(args.script))
    t = statistics.median(r["seconds"] for r in torch_runs)
    o = statistics.median(r["seconds"] for r in our_runs)
    print(f"script: {os.path.relpath(args.script, ROOT)}   repeat: {args.repeat}")
    for r in torch_runs:
        print(
            f"torch    {r['seconds']:7.1f}s (first run {r['first_run']:.1f}s + launcher {r['launcher']:.1f}s), "
            f"{r['calls']} minifier queries, repro: {r['nodes']} compute node(s)"
        )
    for r in our_runs:
        print(
            f"tcompile {r['seconds']:7.1f}s, {r['calls']} oracle calls ({r['nodes_before']} Dynamo-graph nodes "
            f"before), repro: {r['nodes']} compute node(s), verified: {r['verified']}"
        )
    print(f"median wall time: torch {t:.1f}s, tcompile {o:.1f}s, ratio {o / t:.2f}")


if __name__ == "__main__":
    main()

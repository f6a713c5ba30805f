"""`tcompile minify` on a 2-layer and a 24-layer GPT-2 with the same planted bug in one
layer (fixtures/gpt2_layer_bug.py): the time ratio (the goal: at most 2x) and memory.

    python benchmarks/scale.py [--repeat 3]

Each minify runs in a helper process that reports the peak RSS of its descendants
(getrusage: the largest of tcompile, the program's runs and the workers).  Medians of
the repeats, interleaved.  Needs the `models` extra (transformers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELPER = r"""
import json, resource, shutil, subprocess, sys, time
exe = shutil.which("tcompile")
cmd = ([exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]) + sys.argv[1:]
t0 = time.monotonic()
proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
doc = json.loads(proc.stdout)
doc["wall"] = time.monotonic() - t0
doc["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({k: doc[k] for k in ("wall", "seconds", "calls", "nodes_before", "nodes_after", "verified", "peak_rss_mb")}))
"""


def one(layers: int) -> dict:
    out = tempfile.mkdtemp(prefix=f"scale-{layers}-")
    args = [
        "minify",
        "--accuracy",
        "--json",
        "--out",
        out,
        str(ROOT / "fixtures" / "gpt2_layer_bug.py"),
        str(layers),
    ]
    proc = subprocess.run([sys.executable, "-c", HELPER, *args], capture_output=True, text=True)
    return json.loads(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ns = ap.parse_args()
    runs: dict[int, list[dict]] = {2: [], 24: []}
    for _ in range(ns.repeat):
        for layers in runs:
            runs[layers].append(one(layers))
            print(layers, json.dumps(runs[layers][-1]), file=sys.stderr, flush=True)
    med = {
        layers: {
            k: statistics.median(r[k] for r in rs) for k in ("seconds", "calls", "peak_rss_mb")
        }
        for layers, rs in runs.items()
    }
    print(
        "| layers | graph nodes | oracle calls | minify seconds (median) | peak RSS MB (median) | verified |"
    )
    print("|---|---|---|---|---|---|")
    for layers, rs in runs.items():
        m = med[layers]
        print(
            f"| {layers} | {rs[0]['nodes_before']} → {rs[0]['nodes_after']} | {m['calls']:.0f} | "
            f"{m['seconds']:.1f} | {m['peak_rss_mb']:.0f} | {all(r['verified'] for r in rs)} |"
        )
    ratio = med[24]["seconds"] / med[2]["seconds"]
    print(f"\ntime 24 layers / 2 layers: {ratio:.2f} (goal: at most 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""torchrun under tcompile: the overhead of ``tcompile run`` on a two-rank gloo DDP job
against plain torchrun, and the time of ``bisect`` (and ``bisect --minify``) on a bug
that shows on rank 1 only.

    python benchmarks/distributed.py [--repeat 5] [--out benchmarks/results/distributed.md]

Runs are interleaved (plain, tcompile, plain, ...) so that load on the machine falls on
both alike; medians and their ratio.  torchrun's own start-up (rendezvous, two
interpreters importing torch) is part of both.
"""

from __future__ import annotations

import argparse
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
TORCHRUN = ["torchrun", "--nproc-per-node", "2"]


def tcompile() -> list[str]:
    exe = shutil.which("tcompile")
    return [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]


def timed(cmd: list[str]) -> tuple[float, int, str]:
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return time.monotonic() - t0, p.returncode, p.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bisect-repeat", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    clean = str(ROOT / "fixtures" / "ddp_buckets.py")
    plain, ours = [], []
    for _ in range(a.repeat):
        out = tempfile.mkdtemp(prefix="dist-bench-")
        plain.append(timed([*TORCHRUN, clean])[0])
        ours.append(timed([*tcompile(), "run", "--out", out, "--", *TORCHRUN, clean])[0])
        shutil.rmtree(out, ignore_errors=True)
    bug = str(ROOT / "fixtures" / "ddp_rank1_bug.py")
    bisects = []
    for _ in range(a.bisect_repeat):
        out = tempfile.mkdtemp(prefix="dist-bisect-")
        cmd = [*tcompile(), "bisect", "--accuracy", "--minify", "--json", "--out", out, "--"]
        seconds, code, stdout = timed([*cmd, *TORCHRUN, bug])
        doc = json.loads(stdout)
        bisects.append((seconds, doc))
        shutil.rmtree(out, ignore_errors=True)
    p, o = statistics.median(plain), statistics.median(ours)
    rows = [
        "| what | median seconds | runs |",
        "|---|---|---|",
        f"| plain `torchrun --nproc-per-node 2 fixtures/ddp_buckets.py` | {p:.2f} | {a.repeat} |",
        f"| `tcompile run -- torchrun ...` (same job) | {o:.2f} | {a.repeat} |",
        f"| **ratio** | **{o / p:.2f}** | |",
    ]
    secs = statistics.median(s for s, _ in bisects)
    d = bisects[0][1]
    m = d.get("minify") or {}
    bisect_seconds = secs - (m.get("seconds") or 0.0)
    rows += [
        "",
        "| `bisect --accuracy --minify` on `ddp_rank1_bug.py` (bug on rank 1 only) | |",
        "|---|---|",
        f"| culprit | rank {d.get('rank')}, {d.get('message')} |",
        f"| bisect runs (whole two-rank jobs) | {d.get('runs')} |",
        f"| bisect seconds | {bisect_seconds:.1f} |",
        f"| minify | {m.get('nodes_before')} -> {m.get('nodes_after')} nodes "
        f"({', '.join(m.get('ops') or [])}), verified: {m.get('verified')}, "
        f"{m.get('seconds', 0):.1f} s |",
        f"| total seconds (median of {a.bisect_repeat}) | {secs:.1f} |",
        f"| machine | {os.cpu_count()} cores, torch {torch_version()} |",
    ]
    text = "\n".join(rows)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


def torch_version() -> str:
    from importlib import metadata

    return metadata.version("torch")


if __name__ == "__main__":
    main()

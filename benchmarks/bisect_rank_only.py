"""Bisect on a two-rank job, the failure on rank 1: wall and CPU seconds of the whole
job (tcompile and every process under it), two tcompile installs interleaved.

    python benchmarks/bisect_rank_only.py --before OLD/.venv/bin/tcompile [--repeat 2]
        [--fixture fixtures/ddp_rank1_bug.py]

``--before``: a tcompile from another checkout (e.g. a clone of the commit before the
rank-only probes, installed in its own venv); the other is the ``tcompile`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(exe: str, fixture: str) -> dict:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as out:
        cmd = [exe, "bisect", "--accuracy", "--json", "--out", out, "--", "torchrun",
               "--nproc-per-node", "2", fixture]  # fmt: skip
        doc = json.loads(subprocess.run(cmd, capture_output=True, text=True).stdout)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"wall": time.monotonic() - t0, "cpu": cpu, **doc}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--fixture", default=str(ROOT / "fixtures" / "ddp_rank1_bug.py"))
    args = ap.parse_args()
    for i in range(args.repeat):
        for who, exe in (("before", args.before), ("after", "tcompile")):
            d = one(exe, args.fixture)
            print(
                f"{who} {i}: wall {d['wall']:.1f} s, cpu {d['cpu']:.1f} s, runs {d['runs']}, "
                f"{d['stage']}/{d.get('subsystem')}/{d.get('detail')}, rank {d['rank']}, "
                f"rank_only {d.get('rank_only')}",
                flush=True,
            )


if __name__ == "__main__":
    main()

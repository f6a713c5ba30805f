"""Overhead of `tcompile run` (no --accuracy) over running the script directly.

    python benchmarks/run_overhead.py [--repeat 5] [--script fixtures/clean.py]

Runs, interleaved, `repeat` times each:
  startup   python -c pass                      (interpreter start-up)
  tc-help   tcompile --help                     (tcompile's own start-up)
  plain     python SCRIPT, with inductor's FX-graph/AOT caches off as tcompile runs it
  plain-warm python SCRIPT, default caches (warm after the first run)
  tcompile  tcompile run SCRIPT

and prints medians and ratios.  The overhead figure is
    (tcompile - tc-help - plain) / (plain - startup)
i.e. what tcompile adds, beyond its own interpreter start-up, relative to the
script's own wall time beyond interpreter start-up, under the same cache policy.
`plain-warm` shows what forcing the FX-graph cache off costs against a warm cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--script", default=str(ROOT / "fixtures" / "clean.py"))
    args = ap.parse_args()
    from tcompile.compiler.runner import SAFE_CACHE_ENV

    # a cold FX-graph / AOTAutograd cache, as tcompile's private directory per run is
    cold = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    tc = shutil.which("tcompile") or "tcompile"
    out = tempfile.mkdtemp(prefix="tcompile-bench-")
    base = dict(os.environ)
    safe = {**base, **SAFE_CACHE_ENV, **cold}
    variants = {
        "startup": ([sys.executable, "-c", "pass"], base),
        "tc-help": ([tc, "--help"], base),
        "plain": ([sys.executable, args.script], safe),
        "plain-warm": ([sys.executable, args.script], base),
        "tcompile": ([tc, "run", "--out", out, args.script], base),
    }
    for cmd, env in variants.values():  # warm the kernel code cache and the OS page cache
        timed(cmd, env)
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.repeat):
        for name, (cmd, env) in variants.items():
            times[name].append(timed(cmd, env))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"script: {os.path.relpath(args.script, ROOT)}   repeat: {args.repeat}")
    print(f"{'variant':<11} {'median s':>9}   all")
    for k, v in times.items():
        print(f"{k:<11} {med[k]:>9.3f}   " + " ".join(f"{x:.2f}" for x in v))
    own = med["plain"] - med["startup"]
    added = med["tcompile"] - med["tc-help"] - med["plain"]
    print(
        f"overhead (same cache policy): {added:+.3f}s = {100 * added / own:+.1f}% of the script's own time"
    )
    added_warm = med["tcompile"] - med["tc-help"] - med["plain-warm"]
    own_warm = med["plain-warm"] - med["startup"]
    print(
        f"against a warm FX-graph cache: {added_warm:+.3f}s = {100 * added_warm / own_warm:+.1f}%"
    )
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()

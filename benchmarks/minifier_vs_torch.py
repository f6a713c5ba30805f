"""tcompile's minifier engine against torch's own fx_minifier, same oracle, same graphs.

    python benchmarks/minifier_vs_torch.py [--sizes 64 256 1024] [--jobs-check]

For every synthetic case (benchmarks/synthetic.py) and size it prints the nodes
before, and the oracle calls and final nodes of both engines, and the ratio of calls.
--jobs-check also times the 1024-node chain with an oracle that sleeps 0.2 s per call,
with jobs=1 and jobs=4.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from torch._functorch.fx_minifier import minifier as torch_minifier  # noqa: E402

import synthetic  # noqa: E402
from tcompile.minifier import minify  # noqa: E402
from tcompile.minifier.graph import count_compute  # noqa: E402


def run_torch(gm, inps):
    calls = 0

    def fails(g, i):
        nonlocal calls
        calls += 1
        return synthetic.oracle(g, list(i))

    with tempfile.TemporaryDirectory() as d:
        cwd = os.getcwd()
        os.chdir(d)  # torch's minifier writes repro.py into the working directory
        try:
            with (
                contextlib.redirect_stderr(io.StringIO()),
                contextlib.redirect_stdout(io.StringIO()),
            ):
                out_gm, _ = torch_minifier(gm, inps, fails)
        finally:
            os.chdir(cwd)
    return calls, count_compute(out_gm)


def run_ours(gm, inps, jobs=1, oracle=synthetic.oracle):
    r = minify(gm, inps, oracle, jobs=jobs)
    assert r.verified
    return r.calls, r.nodes_after, r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--jobs-check", action="store_true")
    ap.add_argument("--only", nargs="+", default=[], help="cases whose name holds one of these")
    ap.add_argument("--repeat", type=int, default=3, help="runs per setting in --jobs-check")
    args = ap.parse_args()
    print(
        f"{'case':<27} {'n':>5} | {'torch calls':>11} {'nodes':>5} | {'ours calls':>10} {'nodes':>5} | {'ratio':>5}"
    )
    total_t = total_o = 0
    ok = True
    for name, build in synthetic.CASES.items():
        if args.only and not any(o in name for o in args.only):
            continue
        for n in args.sizes:
            gm = build(n)
            before = count_compute(gm)
            assert synthetic.oracle(gm, synthetic.inputs()), (name, n)
            tc, tn = run_torch(gm, synthetic.inputs())
            oc, on, _ = run_ours(gm, synthetic.inputs())
            total_t += tc
            total_o += oc
            ratio = oc / tc
            flag = ""
            if on > tn or ratio > 0.4:
                ok, flag = False, "  <-- worse than required"
            if name == "chain, one culprit" and oc > 2 * math.log2(before) + 6:
                ok, flag = False, f"  <-- over 2log2(n)+6 = {2 * math.log2(before) + 6:.0f}"
            print(
                f"{name:<27} {before:>5} | {tc:>11} {tn:>5} | {oc:>10} {on:>5} | {ratio:>5.2f}{flag}"
            )
    print(
        f"{'total':<27} {'':>5} | {total_t:>11} {'':>5} | {total_o:>10} {'':>5} | {total_o / total_t:>5.2f}"
    )
    if args.jobs_check:
        # A compile oracle waits on a worker process: the engine's thread holds no GIL
        # while it waits.  "sleep + structural" models that (0.2 s, then a cheap look at
        # the graph); "sleep + interpreter" also runs the synthetic oracle's two FX
        # interpretations under the GIL in the engine's own threads.
        def structural(g, i):
            time.sleep(0.2)
            return any(n.target is synthetic.torch.relu for n in g.graph.nodes)

        def interpreted(g, i):
            time.sleep(0.2)
            return synthetic.oracle(g, i)

        gm = synthetic.CASES["chain, one culprit"](1024)
        info: dict[int, tuple[int, int]] = {}
        for label, oracle in (
            ("sleep + structural", structural),
            ("sleep + interpreter", interpreted),
        ):
            runs: dict[int, list[float]] = {1: [], 4: []}
            codes = {}
            for _ in range(args.repeat):  # interleaved; medians quoted
                for jobs in (1, 4):
                    t0 = time.perf_counter()
                    calls, nodes, r = run_ours(gm, synthetic.inputs(), jobs=jobs, oracle=oracle)
                    runs[jobs].append(time.perf_counter() - t0)
                    codes[jobs] = r.gm.code
                    info[jobs] = (calls, nodes)
            times = {j: statistics.median(v) for j, v in runs.items()}
            for jobs in (1, 4):
                all_runs = " ".join(f"{t:.2f}" for t in runs[jobs])
                print(
                    f"{label}, jobs={jobs}: median {times[jobs]:.2f}s ({all_runs}), "
                    f"{info[jobs][0]} calls, {info[jobs][1]} nodes"
                )
            same = codes[1] == codes[4]
            print(
                f"{label}: wall time jobs=4 / jobs=1 = {times[4] / times[1]:.2f}; same result: {same}"
            )
            if label == "sleep + structural":
                ok = ok and times[4] <= 0.6 * times[1] and same
    print("all criteria met" if ok else "SOME CRITERIA NOT MET")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

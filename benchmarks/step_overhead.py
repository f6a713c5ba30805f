"""What `tcompile run` adds to each step of a training loop (issue 61, item 4): the
baseline of `report` watches every call of every compiled graph and keeps each graph's
last call (its inputs copied) for a post-mortem judgement.  A small MLP trained for
``--steps`` steps on the CPU, the loop's own seconds (compile excluded: the script
times its steps after a warm-up), plain and under `tcompile run`, interleaved
``--repeat`` times; with ``TCOMPILE_KEEP_MB=0`` too (no call kept: the bookkeeping
alone); and the same under an earlier commit (``--old``), each as microseconds per step.

    python benchmarks/step_overhead.py [--steps 3000] [--repeat 3] [--old COMMIT] [--device cuda]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from verdicts_before_after import package_folder  # noqa: E402

LOOP = """
import sys, time, torch
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
dev = sys.argv[2]
net = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 10))
net = net.to(dev)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
model = torch.compile(net)
def step():
    x, y = torch.randn(64, 64, device=dev), torch.randint(0, 10, (64,), device=dev)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
for _ in range(20):
    step()
sync()
t0 = time.perf_counter()
for _ in range(int(sys.argv[1])):
    step()
sync()
print(f"LOOP {time.perf_counter() - t0:.6f}")
"""
MAIN = "import sys; from tcompile.cli.main import main; sys.argv[0] = 'tcompile'; main()"


def loop_seconds(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=1800)
    for line in out.stdout.splitlines():
        if line.startswith("LOOP "):
            return float(line.split()[1])
    raise SystemExit(f"no LOOP line from {cmd[:4]}: {out.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old", help="an earlier commit, measured the same way")
    ap.add_argument("--device", default="cpu", help="where the MLP trains (cuda: the GPU)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="step-overhead-"))
    script = work / "loop.py"
    script.write_text(LOOP)
    base = {k: v for k, v in os.environ.items() if not k.startswith("TCOMPILE")}
    sites = {"new": package_folder(ROOT, work / "site-new")}
    if args.old:
        tree = work / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                        args.old], check=True, capture_output=True)  # fmt: skip
        sites["old"] = package_folder(tree, work / "site-old")
    variants: dict[str, tuple[list[str], dict[str, str]]] = {
        "plain": ([sys.executable, str(script), str(args.steps), args.device], base)
    }
    for name, site in sites.items():
        env = {**base, "PYTHONPATH": str(site)}
        run = [sys.executable, "-c", MAIN, "run", "--out", str(work / f"out-{name}"),
               str(script), str(args.steps), args.device]  # fmt: skip
        variants[f"tcompile run ({name})"] = (run, env)
        variants[f"tcompile run ({name}), TCOMPILE_KEEP_MB=0"] = (
            run,
            {**env, "TCOMPILE_KEEP_MB": "0"},
        )
    seconds: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.repeat):
        for name, (cmd, env) in variants.items():
            seconds[name].append(loop_seconds(cmd, env, work))
    plain = statistics.median(seconds["plain"])
    print(f"{args.steps} steps on {args.device}, medians of {args.repeat} interleaved runs")
    print("| variant | us per step | added per step | ratio |")
    print("|---|---:|---:|---:|")
    for name, values in seconds.items():
        med = statistics.median(values)
        added = (med - plain) / args.steps * 1e6
        print(f"| {name} | {med / args.steps * 1e6:.0f} | {added:.0f} | {med / plain:.2f} |")
    if args.old:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(work / "old")],
                       capture_output=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

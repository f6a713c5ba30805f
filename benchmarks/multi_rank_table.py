"""Issue 37's closing table: every multi-rank pattern (DDP both wrappings, tensor
parallel, FSDP2), a bug on every rank and on rank 1 only, under ``run --accuracy``,
``bisect --accuracy`` and ``minify --accuracy`` -- what each said, its runs and seconds.
The same script on the CPU (gloo) and on two GPUs (NCCL: the fixtures pick it).

    python benchmarks/multi_rank_table.py [--tcompile EXE] [--only run,bisect,minify]
        [--cases NAME...] [--timeout 600] [--out table.md]

``--tcompile``: another checkout's tcompile (a "before" column); the default is the
one on PATH.  Rows print as they finish (markdown), with the machine in a header line.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (name, fixture and its arguments, the commands it gets)
CASES = [
    ("ddp_rank1", ["ddp_rank1_bug.py"], ("run", "bisect", "minify")),
    ("ddp_device_ids_rank1", ["ddp_device_ids_rank1.py"], ("run",)),
    ("ddp_every_rank", ["ddp_every_rank_bug.py"], ("run", "bisect", "minify")),
    ("ddp_compiled_outside", ["ddp_compiled_outside.py"], ("run",)),
    ("tp_every_rank", ["tp_rowparallel_relu.py"], ("run", "minify")),
    ("tp_rank1", ["tp_rowparallel_relu.py", "--only-rank", "1"], ("run", "bisect", "minify")),
    ("tp_cancel_rank1", ["tp_partials_cancel.py", "--only-rank", "1"], ("run", "minify")),
    ("fsdp2_every_rank", ["fsdp2_block_compile.py"], ("run", "minify")),
    ("fsdp2_rank1", ["fsdp2_block_compile.py", "--only-rank", "1"], ("run", "bisect", "minify")),
]


def said(command: str, doc: dict) -> str:
    """One line: what the command concluded."""
    if command == "run":
        fails = sorted({(f.get("graph"), f.get("rank"), f.get("kind")) for f in doc["failures"]})
        text = ", ".join(f"g{g} r{r} {k}" for g, r, k in fails) or "clean"
        notes = [n["text"] for n in doc.get("notes", [])]
        if any("could not run" in n for n in notes):
            text += "; a check could not run"
        if any("no graph was compiled" in n for n in notes):
            text += "; no graph compiled (said)"
        return f"{text}; ranks: {doc.get('ranks') or '-'}"
    if command == "bisect":
        where = "/".join(str(doc.get(k)) for k in ("stage", "subsystem", "detail") if doc.get(k))
        return (
            f"{where}, graph {doc.get('graph')}, rank {doc.get('rank')}, {doc.get('runs')} runs, "
            f"rank_only {doc.get('rank_only')}"
        )
    level = "program" if doc.get("program") else "graph"
    size = f"{doc.get('nodes_before')} -> {doc.get('nodes_after')} nodes"
    if doc.get("program"):
        size = f"{doc['program'].get('lines_before')} -> {doc['program'].get('lines_after')} lines"
    if not doc.get("verified") and not doc.get("nodes_after") and not doc.get("program"):
        return f"no repro: {doc.get('message', '')[:160]}"
    return (
        f"{level} level, {size}, ops {doc.get('ops')}, {doc.get('calls')} calls, verified "
        f"{doc.get('verified')}, rank {doc.get('rank')}"
    )


def one(exe: list[str], command: str, job: list[str], timeout: float) -> tuple[str, float, int]:
    with tempfile.TemporaryDirectory() as out:
        cmd = [*exe, command, "--accuracy", "--json", "--out", out, "--", "torchrun",
               "--nproc-per-node", "2", str(ROOT / "fixtures" / job[0]), *job[1:]]  # fmt: skip
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"ran past {timeout:.0f} s", time.monotonic() - t0, -1
        seconds = time.monotonic() - t0
        try:
            doc = json.loads(p.stdout)
        except json.JSONDecodeError:
            return (
                f"no JSON (exit {p.returncode}): {p.stderr.strip()[-200:]}",
                seconds,
                p.returncode,
            )
        return said(command, doc), seconds, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tcompile", default=shutil.which("tcompile"))
    ap.add_argument("--only", default="run,bisect,minify")
    ap.add_argument("--cases", nargs="*", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    exe = [a.tcompile] if a.tcompile else [sys.executable, "-m", "tcompile.cli.main"]
    import torch

    gpus = torch.cuda.device_count()
    machine = (
        f"{gpus}x {torch.cuda.get_device_name(0)}, NCCL" if gpus >= 2 else "CPU, gloo"
    ) + f", torch {torch.__version__}, {platform.node()}, {time.strftime('%Y-%m-%d')}"
    lines = [f"machine: {machine}; tcompile: {exe[0]}", "",
             "| case | command | exit | said | seconds |", "|---|---|---|---|---|"]  # fmt: skip
    print("\n".join(lines), flush=True)
    wanted = set(a.only.split(","))
    for name, job, commands in CASES:
        if a.cases and name not in a.cases:
            continue
        for command in commands:
            if command not in wanted:
                continue
            text, seconds, code = one(exe, command, job, a.timeout)
            row = f"| {name} | {command} | {code} | {text} | {seconds:.0f} |"
            print(row, flush=True)
            lines.append(row)
    if a.out:
        Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

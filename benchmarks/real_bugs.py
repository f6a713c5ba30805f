"""Every real upstream bug in fixtures/real/: tcompile's run, bisect and minify side by
side with torch's own tools on the same script.

    python benchmarks/real_bugs.py [--only SUBSTRING] [--limit S] [--results DIR] [--table FILE]
                                   [--ours-again] [--device cuda] [--side ours|theirs]
                                   [--jobs N]

--device cuda: the GPU corpus (fixtures/real_gpu/, results under
benchmarks/results/real_gpu/, table benchmarks/results/real-bugs-cuda.md, headed by the
date, GPU, torch and Triton); minify there also writes kernel_repro.py (the Triton kernel
alone) where it can.  --side runs one side only (the other's results are kept);
--jobs runs several fixtures at once (one GPU can hold them).

tcompile: `run --accuracy`, `bisect --accuracy`, `minify --accuracy` (each with --json).
torch: the accuracy minifier (`TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4`,
level 2 for a failure that raises, then `python minifier_launcher.py`), and the compiler
bisector (`python -m torch._inductor.compiler_bisector run python SCRIPT`: the fixture's
own assertion is the checker, its runs counted).  Each fixture's results are kept as
JSON under --results (a fixture already there is not run again; with --ours-again
tcompile's side is run again and torch's kept), and the Markdown table is written to
--table.  When `minify --accuracy` says compiled is more precise than eager, `minify
--strict-accuracy` is run too (the column then shows that one, marked "strict").
Slow: minutes per fixture.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
LIMIT = 900  # seconds for any one tool on one fixture


def _tcompile() -> list[str]:
    exe = shutil.which("tcompile")
    return [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]


def _run(
    cmd: list[str], cwd: str, env: dict | None = None
) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=LIMIT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        proc = subprocess.CompletedProcess(cmd, -9, "", f"timed out after {LIMIT}s")
    return proc, time.monotonic() - t0


FIELDS = (
    "exit",
    "wall",
    "error",
    "groups",
    "explanation",
    "stage",
    "subsystem",
    "application",
    "detail",
    "runs",
    "flaky",
    "message",
    "signature",
    "nodes_before",
    "nodes_after",
    "calls",
    "verified",
    "repro_lines",
    "repro_text_lines",
    "ops",
    "repeats",
    "kernel_repro",
    "level",
    "divergence",
    "switches",
)


def _tool(script: Path, d: str, job: str, mode: str) -> dict:
    out = os.path.join(d, job + mode)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(out, "cache")}
    proc, seconds = _run([*_tcompile(), job, mode, "--json", "--out", out, str(script)], d, env)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    doc["wall"] = round(seconds, 1)
    doc["exit"] = proc.returncode
    if job == "bisect" and doc.get("steps"):
        doc["repeats"] = sum(1 for st in doc["steps"] if "(try " in str(st.get("what")))
    if job == "minify" and doc.get("repro") and os.path.exists(doc["repro"]):
        doc["repro_text_lines"] = Path(doc["repro"]).read_text().count("\n")
    return {k: doc.get(k) for k in FIELDS}


def ours(script: Path, concurrent: bool = False) -> dict:
    """run, bisect and minify (each --accuracy); ``concurrent``: the three at once (a
    GPU machine with cores to spare)."""
    d = tempfile.mkdtemp(prefix="real-tcompile-")

    def job(name: str) -> dict:
        doc = _tool(script, d, name, "--accuracy")
        if name == "minify" and "--strict-accuracy" in (doc.get("message") or ""):
            # compiled is more precise than eager, said so: the strict judge too
            return {"minify": doc, "minify_strict": _tool(script, d, name, "--strict-accuracy")}
        return {name: doc}

    names = ["run", "bisect", "minify"]
    out: dict = {}
    if concurrent:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(3) as pool:
            for part in pool.map(job, names):
                out.update(part)
    else:
        for name in names:
            out.update(job(name))
    shutil.rmtree(d, ignore_errors=True)
    return out


def theirs(script: Path, raises: bool) -> dict:
    d = tempfile.mkdtemp(prefix="real-torch-")
    env = {
        **os.environ,
        "TORCHDYNAMO_REPRO_AFTER": "aot",
        "TORCHDYNAMO_REPRO_LEVEL": "2" if raises else "4",
        "TORCHINDUCTOR_CACHE_DIR": str(Path(d) / "cache"),
    }
    _, first = _run([sys.executable, str(script)], d, env)
    launchers = glob.glob(f"{d}/**/minifier_launcher.py", recursive=True)
    out: dict = {"detected": bool(launchers), "first_run": round(first, 1)}
    if launchers:
        clean = {k: v for k, v in env.items() if not k.startswith("TORCHDYNAMO_REPRO")}
        proc, seconds = _run([sys.executable, launchers[0]], d, clean)
        queries = re.findall(r"Made (\d+) queries", proc.stdout + proc.stderr)
        repro = Path(d) / "repro.py"
        out.update(minify_seconds=round(seconds, 1), queries=int(queries[-1]) if queries else None)
        out["timed_out"] = proc.returncode == -9
        if repro.exists():
            out["repro_lines"] = repro.read_text().count("\n")
            elsewhere = tempfile.mkdtemp(prefix="real-torch-repro-")
            run, _ = _run([sys.executable, str(repro)], elsewhere, clean)
            out["standalone"] = run.returncode != -9 and "No such file" not in run.stderr
            shutil.rmtree(elsewhere, ignore_errors=True)
    log = Path(d) / "runs.log"
    counter = [sys.executable, str(ROOT / "benchmarks" / "count_runs.py"), str(log), str(script)]
    bis_env = {k: v for k, v in env.items() if not k.startswith("TORCHDYNAMO_REPRO")}
    proc, seconds = _run(
        [sys.executable, "-m", "torch._inductor.compiler_bisector", "run", *counter], d, bis_env
    )
    result = [
        ln
        for ln in proc.stdout.splitlines()
        if "Bisection" in ln or "Subsystem" in ln or "Debug info" in ln
    ]
    out["bisector"] = {
        "timed_out": proc.returncode == -9,
        "seconds": round(seconds, 1),
        "runs": len(log.read_text().splitlines()) if log.exists() else 0,
        "result": " ".join(result[-3:])[:200]
        if result
        else (proc.stdout.strip().splitlines() or ["-"])[-1][:200],
    }
    shutil.rmtree(d, ignore_errors=True)
    return out


def _numerics(m: dict) -> str:
    """Issue 25's answers for an accuracy bug: the first node whose values go wrong (in
    the minimal graph), its kernel, and which numerics switch makes it pass."""
    first = ((m.get("divergence") or {}).get("minimal") or {}) if m else {}
    verdict = ((m.get("switches") or {}).get("verdict") or "") if m else ""
    if not first.get("op") and not verdict:
        return "-"
    where = f"{first.get('op')} ({first.get('kernel') or 'no kernel'})" if first.get("op") else "-"
    return f"{where}; {verdict[:70] or '-'}"


def table(results: dict[str, dict], cuda: bool = False) -> str:
    rows = [
        "| bug | tcompile run | bisect (runs, s) | minify (nodes, verified, lines, s) | torch minifier (detected, queries, lines, standalone, s) | torch bisector (runs, s, result) |",
        "|---|---|---|---|---|---|",
    ]
    rows[0] += " first divergence; numerics switch |"
    rows[1] += "---|"
    if cuda:
        rows[0] += " kernel_repro.py |"
        rows[1] += "---|"
    for name, r in sorted(results.items()):
        o, t = r["ours"], r["theirs"]
        groups = o["run"].get("groups") or []
        run = (
            "; ".join(
                g["signature"].split(": ")[0] + ": " + g["signature"].split(": ")[1] for g in groups
            )
            or o["run"].get("explanation")
            or "-"
        )
        b = o["bisect"]
        where = "/".join(
            str(x) for x in (b.get("stage"), b.get("subsystem"), b.get("detail")) if x
        ) or (b.get("message") or "-")
        bis = f"{where[:60]} ({b.get('runs')}, {b.get('wall')})"
        m = o.get("minify_strict") or o["minify"]
        mini = (
            f"{m.get('nodes_before')}→{m.get('nodes_after')}, {'yes' if m.get('verified') else 'NO'}, "
            f"{m.get('repro_text_lines')}, {m.get('wall')}"
            + (" (strict: compiled is more precise than eager)" if "minify_strict" in o else "")
            if m.get("nodes_after") is not None
            else f"{(m.get('message') or m.get('error') or '-')[:80]}"
        )
        tm = (
            f"{'yes' if t.get('detected') else 'no'}, {t.get('queries')}, {t.get('repro_lines')}, "
            f"{t.get('standalone')}, {t.get('first_run', 0) + (t.get('minify_seconds') or 0):.0f}"
            + (" (timed out)" if t.get("timed_out") else "")
        )
        tb = t.get("bisector") or {}
        kr = o["minify"].get("kernel_repro_recheck") or o["minify"].get("kernel_repro") or {}
        again = " (recheck)" if o["minify"].get("kernel_repro_recheck") else ""
        kernel = (
            f" {kr['kernel']}, verified{again}"
            if kr.get("path")
            else (
                f" none{again}: {kr['error'][:70]}"
                if kr.get("error")
                else (f" {kr['kernel']}, NOT verified{again}" if kr else " -")
            )
        )
        rows.append(
            f"| [{name}]({r['url']}) | {run[:90]} | {bis} | {mini} | {tm} | "
            f"{tb.get('runs')}, {tb.get('seconds')}, "
            f"{'timed out' if tb.get('timed_out') else str(tb.get('result'))[:70]} |"
            + f" {_numerics(o['minify'])} |"
            + (kernel + " |" if cuda else "")
        )
    return "\n".join(rows) + "\n"


def _raises(entry: dict) -> bool:
    kind = entry.get("expected_kind")
    if kind:
        return kind in ("compile", "runtime", "crash", "capture")
    return any(w in entry.get("category", "") for w in ("crash", "CUDA graph", "autotune"))


def _header(cuda: bool) -> str:
    import datetime

    import torch

    if not cuda:
        return ""
    import triton

    return (
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton "
        f"{triton.__version__}, {datetime.date.today()}: `python benchmarks/real_bugs.py "
        "--device cuda`\n\n"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--limit", type=int, default=900, help="seconds for one tool on one bug")
    ap.add_argument("--results", default=None)
    ap.add_argument("--table", default=None)
    ap.add_argument(
        "--ours-again", action="store_true", help="run tcompile again, keep torch's results"
    )
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--side", choices=("both", "ours", "theirs"), default="both")
    ap.add_argument("--jobs", type=int, default=1, help="fixtures at once")
    ap.add_argument("--skip", action="append", default=[], help="a fixture not to run")
    ns = ap.parse_args()
    global LIMIT
    LIMIT = ns.limit
    cuda = ns.device == "cuda"
    corpus = ROOT / "fixtures" / ("real_gpu" if cuda else "real")
    res = ROOT / "benchmarks" / "results"
    results_dir = Path(ns.results or (res / ("real_gpu" if cuda else "real")))
    table_path = Path(ns.table or (res / ("real-bugs-cuda.md" if cuda else "real-bugs.md")))
    manifest = json.loads((corpus / "MANIFEST.json").read_text())
    results_dir.mkdir(parents=True, exist_ok=True)

    def one(entry: dict) -> None:
        name = entry["file"].removesuffix(".py")
        path = results_dir / f"{name}.json"
        r = json.loads(path.read_text()) if path.exists() else {"url": entry["url"]}
        if path.exists() and not ns.ours_again and ns.side == "both":
            return
        if ns.side in ("both", "ours"):
            r["ours"] = ours(corpus / entry["file"], concurrent=cuda)
        if ns.side in ("both", "theirs") and not (ns.ours_again and "theirs" in r):
            r["theirs"] = theirs(corpus / entry["file"], _raises(entry))
        path.write_text(json.dumps(r, indent=1))
        print(f"{name}: done", file=sys.stderr, flush=True)

    todo = [
        e
        for e in manifest
        if (not ns.only or ns.only in e["file"]) and not any(k in e["file"] for k in ns.skip)
    ]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, ns.jobs)) as pool:
        list(pool.map(one, todo))
    results = {}
    for entry in manifest:  # the table holds every bug measured so far, not only --only's
        path = results_dir / f"{entry['file'].removesuffix('.py')}.json"
        if path.exists():
            r = json.loads(path.read_text())
            if "ours" in r and "theirs" in r:
                results[path.stem] = r
    text = _header(cuda) + table(results, cuda)
    table_path.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

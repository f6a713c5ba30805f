"""Every real upstream bug in fixtures/real/: tcompile's run, bisect and minify side by
side with torch's own tools on the same script.

    python benchmarks/real_bugs.py [--only SUBSTRING] [--limit S] [--results DIR] [--table FILE]
                                   [--ours-again]

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


def ours(script: Path) -> dict:
    d = tempfile.mkdtemp(prefix="real-tcompile-")
    out: dict = {}
    jobs = [("run", "--accuracy"), ("bisect", "--accuracy"), ("minify", "--accuracy")]
    while jobs:
        job, mode = jobs.pop(0)
        proc, seconds = _run([*_tcompile(), job, mode, "--json", "--out", d, str(script)], d)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError:
            doc = {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}
        doc["wall"] = round(seconds, 1)
        doc["exit"] = proc.returncode
        if job == "minify" and doc.get("repro") and os.path.exists(doc["repro"]):
            doc["repro_text_lines"] = Path(doc["repro"]).read_text().count("\n")
        if (
            job == "minify"
            and mode == "--accuracy"
            and "--strict-accuracy" in (doc.get("message") or "")
        ):
            jobs.append(("minify", "--strict-accuracy"))  # compiled is more precise: said so
        out[job if mode == "--accuracy" else "minify_strict"] = {
            k: doc.get(k)
            for k in (
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
            )
        }
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


def table(results: dict[str, dict]) -> str:
    rows = [
        "| bug | tcompile run | bisect (runs, s) | minify (nodes, verified, lines, s) | torch minifier (detected, queries, lines, standalone, s) | torch bisector (runs, s, result) |",
        "|---|---|---|---|---|---|",
    ]
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
        rows.append(
            f"| [{name}]({r['url']}) | {run[:90]} | {bis} | {mini} | {tm} | "
            f"{tb.get('runs')}, {tb.get('seconds')}, "
            f"{'timed out' if tb.get('timed_out') else str(tb.get('result'))[:70]} |"
        )
    return "\n".join(rows) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--limit", type=int, default=900, help="seconds for one tool on one bug")
    ap.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "real"))
    ap.add_argument("--table", default=str(ROOT / "benchmarks" / "results" / "real-bugs.md"))
    ap.add_argument(
        "--ours-again", action="store_true", help="run tcompile again, keep torch's results"
    )
    ns = ap.parse_args()
    global LIMIT
    LIMIT = ns.limit
    manifest = json.loads((REAL / "MANIFEST.json").read_text())
    results_dir = Path(ns.results)
    results_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for entry in manifest:
        name = entry["file"].removesuffix(".py")
        if ns.only and ns.only not in name:
            continue
        path = results_dir / f"{name}.json"
        if path.exists() and ns.ours_again:
            r = json.loads(path.read_text())
            r["ours"] = ours(REAL / entry["file"])
            path.write_text(json.dumps(r, indent=1))
            print(f"{name}: tcompile again", file=sys.stderr, flush=True)
        elif not path.exists():
            raises = entry["expected_kind"] in ("compile", "runtime", "crash", "capture")
            r = {
                "url": entry["url"],
                "ours": ours(REAL / entry["file"]),
                "theirs": theirs(REAL / entry["file"], raises),
            }
            path.write_text(json.dumps(r, indent=1))
            print(f"{name}: done", file=sys.stderr, flush=True)
    for entry in manifest:  # the table holds every bug measured so far, not only --only's
        path = results_dir / f"{entry['file'].removesuffix('.py')}.json"
        if path.exists():
            results[path.stem] = json.loads(path.read_text())
    text = table(results)
    Path(ns.table).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

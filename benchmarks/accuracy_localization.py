"""Issue 25's table: every real accuracy bug in fixtures/real/ (MANIFEST expected_kind
"accuracy"), where its values first go wrong and which numerics switch fixes it.

    python benchmarks/accuracy_localization.py [--only SUBSTRING] [--table FILE]

Per fixture: `tcompile run --accuracy --json` (the first divergent node of the failing
graph, from the program's own call: run's `divergence`) and `tcompile minify --accuracy
--json` (the first divergent node of the minimal graph, its kernel, and the verdict of
the numerics switches).  Each result is kept as JSON under benchmarks/results/accuracy/;
the Markdown table goes to --table (default benchmarks/results/accuracy-localization.md).
Minutes per fixture.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
RESULTS = ROOT / "benchmarks" / "results" / "accuracy"
LIMIT = 900


def _tcompile(*args: str, cwd: str) -> tuple[dict, float]:
    exe = shutil.which("tcompile") or "tcompile"
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [exe, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=LIMIT,
            stdin=subprocess.DEVNULL,
        )
        doc = json.loads(proc.stdout)
    except subprocess.TimeoutExpired:
        doc = {"error": f"timed out after {LIMIT}s"}
    except json.JSONDecodeError:
        doc = {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    return doc, round(time.monotonic() - t0, 1)


def one(script: Path) -> dict:
    d = tempfile.mkdtemp(prefix="acc-loc-")
    try:
        run, run_s = _tcompile("run", "--accuracy", "--json", "--out", d, str(script), cwd=d)
        mini, mini_s = _tcompile("minify", "--accuracy", "--json", "--out", d, str(script), cwd=d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    failures = [f for f in run.get("failures") or [] if f.get("kind") == "accuracy"]
    return {
        "run": {
            "seconds": run_s,
            "failure": failures[0]["signature"] if failures else None,
            "graph": failures[0]["graph"] if failures else None,
            "graph_kind": failures[0]["graph_kind"] if failures else None,
            "divergence": failures[0].get("divergence") if failures else None,
            "error": run.get("error"),
        },
        "minify": {
            "seconds": mini_s,
            "nodes": f"{mini.get('nodes_before')}->{mini.get('nodes_after')}",
            "verified": mini.get("verified"),
            "divergence": mini.get("divergence"),
            "switches": mini.get("switches"),
            "message": (mini.get("message") or mini.get("error") or "")[:200],
        },
    }


def _node(d: dict | None) -> str:
    if not d:
        return "-"
    if not d.get("node"):
        return f"none ({(d.get('why') or '')[:60]})"
    kernel = f", `{d['kernel']}`" if d.get("kernel") else ""
    src = (d.get("source") or "").rsplit("line ", 1)[-1][:50]
    return f"`{d['op']}` ({d['node']}{kernel}) line {src}"


def table(results: dict[str, dict]) -> str:
    rows = [
        "| bug | run: first divergent node (graph) | minify: nodes, verified | minimal graph: first divergent node, kernel | switches | s (run, minify) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in sorted(results.items()):
        run, mini = r["run"], r["minify"]
        full = (mini.get("divergence") or {}).get("full")
        minimal = (mini.get("divergence") or {}).get("minimal")
        sw = (mini.get("switches") or {}).get("verdict") or mini.get("message") or "-"
        where = (
            f" (graph {run['graph']} {run['graph_kind']})" if run.get("graph") is not None else ""
        )
        rows.append(
            f"| {name} | {_node(run.get('divergence'))}{where} | {mini['nodes']}, "
            f"{'yes' if mini.get('verified') else 'no'} | {_node(minimal or full)} | {sw} | "
            f"{run['seconds']}, {mini['seconds']} |"
        )
    return "\n".join(rows) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--table", default=str(ROOT / "benchmarks/results/accuracy-localization.md"))
    a = ap.parse_args()
    manifest = json.loads((REAL / "MANIFEST.json").read_text())
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = {}
    for entry in manifest:
        if entry.get("expected_kind") != "accuracy":
            continue
        name = entry["file"].removesuffix(".py")
        if a.only and a.only not in name:
            continue
        path = RESULTS / f"{name}.json"
        if path.exists():
            results[name] = json.loads(path.read_text())
            continue
        print(f"{name} ...", file=sys.stderr, flush=True)
        results[name] = one(REAL / entry["file"])
        path.write_text(json.dumps(results[name], indent=1))
    Path(a.table).write_text(table(results))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

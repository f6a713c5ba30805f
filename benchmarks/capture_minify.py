"""Capture failures minified: lines before and after, oracle calls, time; and what
torch's own minifier does with the same scripts.

    python benchmarks/capture_minify.py [--repeat 3] [--out benchmarks/results/capture-minify.md]

For each capture fixture: ``tcompile minify --json SCRIPT`` end to end (the run that
finds the failure, the record, the search, the verification), ``--repeat`` times
(medians).  "user code" is the lines of the recorded function and of every user
function it called (what a reader of the whole model would face); "function" the
lines of the minimal function; "repro" the lines of repro.py.  Then the script once
more with ``TORCHDYNAMO_REPRO_AFTER=dynamo`` (torch's after-Dynamo minifier): does it
write a repro.py or minifier_launcher.py?  Writes a Markdown table.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = [
    "capture_deep_branch.py",
    "capture_print.py",
    "capture_item_branch.py",
    "capture_builtin.py",
    "capture_dynamic_list_index.py",
    "capture_symbolic_guard.py",
    "capture_fullgraph.py",
    "capture_closure_global.py",
    "real/gaussian_nll_loss_fullgraph_dde.py",
    "recompile_error.py",
    "recompile_limit_fullgraph.py",
]


def tcompile() -> list[str]:
    exe = shutil.which("tcompile")
    return [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]


def ours(fixture: str) -> dict:
    out = tempfile.mkdtemp(prefix="capture-minify-")
    proc = subprocess.run(
        [*tcompile(), "minify", "--json", "--out", out, str(ROOT / "fixtures" / fixture)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    finally:
        shutil.rmtree(out, ignore_errors=True)
    cap = doc.get("capture") or {}
    return {
        "verified": doc.get("verified"),
        "signature": doc.get("signature", ""),
        "user_lines": cap.get("lines_before"),
        "function_lines": cap.get("function_lines"),
        "repro_lines": doc.get("repro_lines"),
        "calls": doc.get("calls"),
        "seconds": doc.get("seconds"),
        "entry": cap.get("entry"),
    }


def torch_minifier(fixture: str) -> str:
    """What TORCHDYNAMO_REPRO_AFTER=dynamo leaves behind for this script."""
    base = tempfile.mkdtemp(prefix="torch-minifier-")
    env = dict(os.environ, TORCHDYNAMO_REPRO_AFTER="dynamo", TORCH_COMPILE_DEBUG_DIR=base)
    subprocess.run(
        [sys.executable, str(ROOT / "fixtures" / fixture)],
        capture_output=True,
        text=True,
        env=env,
        cwd=base,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    found = sorted(
        p.name for p in Path(base).rglob("*.py") if p.name in ("repro.py", "minifier_launcher.py")
    )
    shutil.rmtree(base, ignore_errors=True)
    return ", ".join(found) if found else "nothing"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, help="fixtures whose name holds this")
    a = ap.parse_args()
    rows = []
    for fixture in [f for f in FIXTURES if a.only is None or a.only in f]:
        runs = [ours(fixture) for _ in range(a.repeat)]
        ok = [r for r in runs if "error" not in r]
        if not ok:
            rows.append(f"| `{fixture}` | error: {runs[0]['error']} | | | | | | |")
            continue
        r = ok[0]
        secs = statistics.median(x["seconds"] for x in ok)
        calls = statistics.median(x["calls"] for x in ok)
        exc = r["signature"].split(": ")[1] if ": " in r["signature"] else r["signature"]
        rows.append(
            f"| `{fixture}` | {exc} | {r['user_lines']} | {r['function_lines']} | "
            f"{r['repro_lines']} | {calls:g} | {secs:.1f} | "
            f"{sum(bool(x['verified']) for x in ok)}/{len(runs)} | {torch_minifier(fixture)} |"
        )
        print(rows[-1], flush=True)
    table = "\n".join(
        [
            "| fixture | Dynamo's error | user code (lines) | function (lines) | repro.py (lines) "
            "| oracle calls | seconds (median) | verified | torch's `REPRO_AFTER=dynamo` |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    print(table)
    if a.out:
        Path(a.out).write_text(table + "\n")


if __name__ == "__main__":
    main()

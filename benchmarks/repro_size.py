"""repro.py size before and after short repros and input shrinking, per minify fixture.

    python benchmarks/repro_size.py [--out benchmarks/results/repro-size.md]

For each fixture, one `tcompile minify --json`: the repro it writes (lines, bytes,
sidecar?, input elements) against the long form with the program's real inputs --
what tcompile wrote before (minify.json's ``repro_before``) -- and the seconds input
shrinking took as a share of the whole minify.  Writes a Markdown table.
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
FIXTURES = [
    ("cpp_relu_accuracy.py", ["--accuracy"]),
    ("cpp_relu_compile_error.py", []),
    ("cpp_relu_runtime_error.py", []),
    ("cpp_throw_crash.py", []),
    ("custom_backend.py", []),
    ("bad_decomposition.py", ["--accuracy"]),
    ("post_grad_pass_bug.py", ["--accuracy"]),
    ("dynamic_shapes.py", ["--accuracy"]),
    ("two_bugs.py", ["--accuracy"]),
    ("block_accuracy.py", ["--accuracy"]),
    ("backward_only.py", ["--accuracy"]),
    ("multi_graph.py", ["--accuracy"]),
]


def tcompile() -> list[str]:
    exe = shutil.which("tcompile")
    return [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]


def one(fixture: str, flags: list[str]) -> dict:
    out = tempfile.mkdtemp(prefix="repro-size-")
    t0 = time.monotonic()
    proc = subprocess.run(
        [*tcompile(), "minify", "--json", "--out", out, *flags, str(ROOT / "fixtures" / fixture)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - t0
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"fixture": fixture, "error": proc.stderr.strip().splitlines()[-1:]}
    shutil.rmtree(out, ignore_errors=True)
    inputs = doc.get("inputs") or {}
    before = doc.get("repro_before") or {}
    return {
        "fixture": fixture,
        "flags": " ".join(flags),
        "verified": doc.get("verified"),
        "nodes": doc.get("nodes_after"),
        "form": doc.get("repro_form"),
        "lines": (before.get("lines"), doc.get("repro_lines")),
        "bytes": (before.get("bytes"), doc.get("repro_bytes")),
        "sidecar": (before.get("sidecar"), doc.get("sidecar")),
        "numel": (before.get("numel"), inputs.get("numel_after", before.get("numel"))),
        "values": inputs.get("values", "real"),
        "shrink_seconds": inputs.get("seconds", 0.0),
        "shrink_calls": inputs.get("calls", 0),
        "seconds": round(seconds, 1),
        "kernel": Path(doc["kernel"]).name if doc.get("kernel") else "-",
    }


def table(rows: list[dict]) -> str:
    head = (
        "| fixture | verified | form | lines before → after | bytes before → after | "
        "sidecar before → after | input elements before → after | values | code beside | "
        "shrink calls | shrink s / minify s |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    out = []
    for r in rows:
        if "error" in r:
            out.append(f"| {r['fixture']} | error: {r['error']} |||||||||||")
            continue

        def pair(k: str, r: dict = r) -> str:
            a, b = r[k]
            return f"{a} → {b}"

        share = r["shrink_seconds"] / r["seconds"] if r["seconds"] else 0
        out.append(
            f"| {r['fixture']} {r['flags']} | {'yes' if r['verified'] else 'NO'} | {r['form']} | "
            f"{pair('lines')} | {pair('bytes')} | {pair('sidecar')} | {pair('numel')} | "
            f"{r['values']} | {r['kernel']} | {r['shrink_calls']} | "
            f"{r['shrink_seconds']:.1f} / {r['seconds']:.1f} ({share:.0%}) |"
        )
    return head + "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None, help="a substring of the fixtures to run")
    ns = ap.parse_args()
    rows = []
    for fixture, flags in FIXTURES:
        if ns.only and ns.only not in fixture:
            continue
        rows.append(one(fixture, flags))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    text = table(rows)
    print(text)
    if ns.out:
        Path(ns.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

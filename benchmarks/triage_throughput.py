"""Scripts per hour of ``tcompile triage``, side by side on one corpus and machine:
every failing script bisected and minified (``--each``, the way before issue 52) and
once per cluster (the default), one after the other, each from an empty ``--out``.

    python benchmarks/triage_throughput.py --corpus dupes --jobs 2 --timeout 300

Each half is benchmarks/triage_corpus.py (its scores are in each half's results);
this prints and writes both halves' wall time, scripts per hour, reports, precision
and recall, and the ratio.  Where the time went (runs, checks, reports; bisect and
minify inside the reports) is summed from triage's own cache, per step.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _spent(out: Path) -> dict[str, float]:
    """Seconds per kind of step, summed over the scripts (triage's cache files)."""
    spent: Counter[str] = Counter()
    for f in (out / "cache").glob("*.json"):
        if f.name.startswith("check-"):
            continue
        doc = json.loads(f.read_text())
        for s in doc.get("steps") or []:
            what = str(s.get("what") or "")
            kind = (
                "check"
                if what.startswith(("without", "run at", "captured graph")) or what == "run again"
                else what
            )
            kind = "run" if kind.startswith("run ") else kind
            spent[kind] += float(s.get("seconds") or 0.0)
        for part in ("bisect", "minify"):
            spent[f"report: {part}"] += float((doc.get(part) or {}).get("seconds") or 0.0)
    return {k: round(v, 1) for k, v in sorted(spent.items())}


def half(a: argparse.Namespace, each: bool) -> dict:
    name = "each" if each else "once"
    out = Path(a.out) / name
    shutil.rmtree(out, ignore_errors=True)  # from an empty --out: no cache
    results = Path(a.out) / f"{name}.json"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "triage_corpus.py"),
        "--corpus",
        a.corpus,
        "--jobs",
        str(a.jobs),
        "--timeout",
        str(a.timeout),
        "--per-gpu",
        str(a.per_gpu),
        "--out",
        str(out),
        "--results",
        str(results),
        *(["--each"] if each else []),
    ]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    s = json.loads(results.read_text())["summary"]
    return {
        "mode": "--each" if each else "once per cluster",
        "wall_seconds": round(wall, 1),
        "triage_seconds": s["triage_seconds"],
        "scripts": s["scripts"],
        "scripts_per_hour": s["scripts_per_hour"],
        "reports": s["reports"],
        "verdict_accuracy": s["verdict_accuracy"],
        "cluster_scores": s["cluster_scores"],
        "spent": _spent(out),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--corpus", choices=["default", "dupes", "dupes_gpu", "families3"], default="dupes"
    )
    ap.add_argument("--per-gpu", type=int, default=1, help="triage --per-gpu (a CUDA machine)")
    ap.add_argument(
        "--half",
        choices=["both", "each", "once"],
        default="both",
        help="one half alone (a machine lent for a few minutes at a time)",
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default="/tmp/triage-throughput")
    ap.add_argument("--results", default=None)
    a = ap.parse_args()
    rows = [half(a, each=e) for e in (True, False) if a.half in ("both", "each" if e else "once")]
    before, after = rows[0], rows[-1]
    ratio = round(float(after["scripts_per_hour"] or 0) / float(before["scripts_per_hour"] or 1), 2)
    doc = {
        "corpus": a.corpus,
        "halves": rows,
        "ratio_scripts_per_hour": ratio,
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", "benchmarks/triage_throughput.py", *sys.argv[1:]]),
    }
    results = Path(
        a.results or ROOT / "benchmarks" / "results" / f"triage_throughput_{a.corpus}.json"
    )
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(doc, indent=2))
    print("| mode | triage s | scripts/h | reports | verdicts | precision | recall |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        c = r["cluster_scores"]
        print(
            f"| {r['mode']} | {r['triage_seconds']:.0f} | {r['scripts_per_hour']} | {r['reports']} "
            f"| {r['verdict_accuracy']} | {c.get('precision')} | {c.get('recall')} |"
        )
    print(f"\nonce per cluster / --each, scripts per hour: {ratio}x")
    for r in rows:
        print(f"{r['mode']}: seconds by step (summed over scripts): {r['spent']}")


if __name__ == "__main__":
    main()

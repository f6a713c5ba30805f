"""``tcompile triage`` on the corpus: verdict accuracy, cluster precision and recall,
scripts per hour.

The corpus: fixtures/real (reporters' scripts of real bugs), fixtures/real_gpu (needs a
GPU here), fixtures/program (program-level bugs), fixtures/triage (the same upstream
bugs written as other programs, clean scripts, not-a-compiler-bug scripts, a flaky one,
one that hangs), and two planted fixtures (clean, fails without compile).  The truth
is the manifests' issue numbers (#153044 is #179804's cause, as its manifest says) and
expected verdicts.  Clustering is scored pairwise over the scripts the truth calls
bugs and triage calls ``bug``; beside it, the clusters one would get by exception text
(the signature's message), as the tracker's automation groups them.

    python benchmarks/triage_corpus.py --jobs 2 --timeout 300 --out /tmp/triage-corpus

A rerun with the same --out reuses triage's cache (only the scoring is redone).
``--only SUBSTRING`` (repeatable) takes the scripts whose path holds it; ``--ray
ADDRESS`` runs them on a Ray cluster (``ray start --head --num-cpus 2`` first).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "fixtures"
SAME_BUG = {153044: 179804}  # amp_outer_autocast: "same as #179804" (its manifest)
OTHERS = {"clean.py": ("clean", None), "fails_without_compile.py": ("not_compiler", None)}


def truth(has_gpu: bool) -> dict[str, tuple[str, str | None]]:
    """path -> (expected verdict, bug id)."""
    t: dict[str, tuple[str, str | None]] = {}
    for folder, verdict in (
        ("real", "bug"),
        ("real_gpu", "bug" if has_gpu else "needs_gpu"),
        ("program", "bug"),
    ):
        for e in json.loads((FIX / folder / "MANIFEST.json").read_text()):
            issue = SAME_BUG.get(e["issue"], e["issue"])
            t[str(FIX / folder / e["file"])] = (verdict, str(issue))
    for e in json.loads((FIX / "triage" / "MANIFEST.json").read_text()):
        bug = e.get("bug")
        bug = str(SAME_BUG.get(int(bug), bug)) if bug and str(bug).isdigit() else bug
        t[str(FIX / "triage" / e["file"])] = (e["expect"], bug)
    for name, (verdict, bug) in OTHERS.items():
        t[str(FIX / name)] = (verdict, bug)
    return t


def dupes_truth(folder: str = "dupes") -> tuple[dict[str, tuple[str, str | None]], set[str]]:
    """fixtures/dupes or fixtures/dupes_gpu (issue 52): path -> ("bug", the tracker's
    group); and the scripts whose membership the tracker itself states (not marked weak
    in the manifest)."""
    t: dict[str, tuple[str, str | None]] = {}
    strong: set[str] = set()
    for e in json.loads((FIX / folder / "MANIFEST.json").read_text()):
        path = str(FIX / folder / e["file"])
        t[path] = ("bug", e["group"])
        if not str(e.get("relation", "")).startswith("weak"):
            strong.add(str(Path(path).relative_to(ROOT)))
    return t, strong


def families3_truth() -> tuple[dict[str, tuple[str, str | None]], set[str]]:
    """Issue 62, item 2: the tracker's bug families with at least 3 reports per root
    cause -- fixtures/dupes' argmax/argmin (3) and low-precision round trip (4) groups,
    fixtures/families' pointless_cumsum_replacement reports (3)."""
    t, strong = dupes_truth("dupes")
    keep = {p: v for p, v in t.items() if Path(p).name.startswith(("argreduce", "lowp"))}
    for e in json.loads((FIX / "families" / "MANIFEST.json").read_text()):
        if e["file"].startswith("cumsum"):
            path = str(FIX / "families" / e["file"])
            keep[path] = ("bug", "pointless_cumsum_replacement")
            strong.add(str(Path(path).relative_to(ROOT)))
    return keep, {s for s in strong if any(s.endswith(Path(p).name) for p in keep)}


def pairwise(labels: dict[str, str], truth_ids: dict[str, str]) -> dict[str, float]:
    paths = sorted(p for p in labels if truth_ids.get(p))
    tp = fp = fn = 0
    for i, a in enumerate(paths):
        for b in paths[:i]:
            sp, st = labels[a] == labels[b], truth_ids[a] == truth_ids[b]
            tp += sp and st
            fp += sp and not st
            fn += st and not sp
    return {
        "precision": round(tp / (tp + fp), 3) if tp + fp else 1.0,
        "recall": round(tp / (tp + fn), 3) if tp + fn else 1.0,
        "true_pairs": tp + fn,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default="/tmp/triage-corpus")
    ap.add_argument("--ray", default=None)
    ap.add_argument("--also", default=None)
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        help="only the scripts whose path holds this (repeatable)",
    )
    ap.add_argument(
        "--corpus",
        choices=["default", "dupes", "dupes_gpu", "families3"],
        default="default",
        help="dupes: fixtures/dupes, the tracker's duplicate groups (issue 52); families3: "
        "the families with at least 3 reports per root cause (issue 62)",
    )
    ap.add_argument("--results", default=None)
    ap.add_argument("--per-gpu", type=int, default=1, help="triage --per-gpu (a CUDA machine)")
    ap.add_argument(
        "--each",
        action="store_true",
        help="every failing script bisected and minified (the way before issue 52's item 3)",
    )
    a = ap.parse_args()
    name = "triage_corpus.json" if a.corpus == "default" else f"triage_{a.corpus}.json"
    a.results = a.results or str(ROOT / "benchmarks" / "results" / name)
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    strong: set[str] = set()
    t = truth(has_gpu) if a.corpus == "default" else {}
    if a.corpus == "families3":
        t, strong = families3_truth()
    elif a.corpus != "default":
        t, strong = dupes_truth(a.corpus)
    if a.only:
        t = {p: v for p, v in t.items() if any(o in p for o in a.only)}
    cmd = [
        sys.executable,
        "-m",
        "tcompile",
        "triage",
        "--json",
        "--jobs",
        str(a.jobs),
        "--timeout",
        str(a.timeout),
        "--out",
        a.out,
    ]
    if a.ray:
        cmd += ["--ray", a.ray]
    if a.per_gpu > 1:
        cmd += ["--per-gpu", str(a.per_gpu)]
    if a.also:
        cmd += ["--also", a.also]
    if a.each:
        cmd += ["--each"]
    t0 = time.monotonic()
    proc = subprocess.run([*cmd, *sorted(t)], stdout=subprocess.PIPE, text=True)
    wall = time.monotonic() - t0
    doc = json.loads(proc.stdout)
    rows = []
    for r in doc["scripts"]:
        expect, bug = t[r["path"]]
        rows.append(
            {
                "script": str(Path(r["path"]).relative_to(ROOT)),
                "expect": expect,
                "verdict": r["verdict"],
                "ok": r["verdict"] == expect,
                "bug": bug,
                "culprit": (r.get("culprit") or {}).get("text"),
                "cluster": r.get("cluster"),
                "repro_lines": r.get("repro_lines"),
                "seconds": r.get("seconds"),
                "signature": r.get("signature"),
                "also": (r.get("also") or {}).get("result"),
            }
        )
    bugs = {r["script"]: r for r in rows if r["verdict"] == "bug" and r["bug"]}
    ids = {s: r["bug"] for s, r in bugs.items()}
    ours = pairwise({s: r["cluster"] for s, r in bugs.items()}, ids)
    by_text = pairwise({s: (r["signature"] or "") for s, r in bugs.items()}, ids)
    if strong:  # the pairs the tracker itself stated
        ids_strong = {s: b for s, b in ids.items() if s in strong}
        labels = {s: bugs[s]["cluster"] for s in ids_strong}
        by_tracker = pairwise(labels, ids_strong)
    else:
        by_tracker = None
    seconds = sum(r["seconds"] or 0 for r in rows)
    summary = {
        "scripts": len(rows),
        "verdict_accuracy": round(sum(r["ok"] for r in rows) / len(rows), 3),
        "clusters": len(doc["clusters"]),
        "cluster_scores": ours,
        "by_exception_text": by_text,
        "cluster_scores_tracker_stated": by_tracker,
        "corpus": a.corpus,
        "wall_seconds": round(wall, 1),
        "triage_seconds": doc["seconds"],
        "script_seconds_sum": round(seconds, 1),
        "scripts_per_hour": round(len(rows) / (doc["seconds"] / 3600), 1)
        if doc["done_now"] == len(rows)
        else None,
        "jobs": a.jobs,
        "timeout": a.timeout,
        "each": a.each,
        "reports": sum(1 for r in doc["scripts"] if r.get("reported") or r.get("raw_bug")),
        "engine": doc["engine"],
        "torch": doc["torch"],
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", "benchmarks/triage_corpus.py", *sys.argv[1:]]),
    }
    Path(a.results).parent.mkdir(parents=True, exist_ok=True)
    Path(a.results).write_text(
        json.dumps({"summary": summary, "rows": rows, "clusters": doc["clusters"]}, indent=2)
    )
    print("| script | expected | verdict | culprit | cluster | repro lines | seconds |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        mark = "" if r["ok"] else " (!)"
        print(
            f"| {r['script']} | {r['expect']} | {r['verdict']}{mark} | {r['culprit'] or '-'} "
            f"| {r['cluster'] or '-'} | {r['repro_lines'] or '-'} | {r['seconds'] or 0:.0f} |"
        )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Bisect from the capture (the default) against the program bisect (``--whole-program``,
what bisect did before issue 51) on the same fixtures, one after the other: the culprit
each names, whole-program runs, graph compiles, seconds; and why the capture path
handed over to the program bisect where it did.

    python benchmarks/bisect_capture_vs_program.py [--only SUBSTRING] [--json OUT]

Every fixture's culprit must be the same both ways (the script exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = [
    ("cpp_relu_compile_error.py", []),
    ("cpp_relu_accuracy.py", ["--accuracy"]),
    ("multi_graph.py", ["--accuracy"]),
    ("ten_graphs.py", ["--accuracy"]),
    ("post_grad_pass_bug.py", ["--accuracy"]),
    ("bad_decomposition.py", ["--accuracy"]),
    ("backward_only.py", ["--accuracy"]),
    ("two_bugs.py", ["--accuracy"]),
    ("custom_backend.py", []),
    ("custom_graph_pass_bug.py", ["--accuracy"]),
    ("real/split_normalization_pass_uneven.py", []),
    ("real/sum_int32_of_inf_overflow.py", []),
    ("real/jacfwd_fp16_cpp_compile_error.py", []),
    ("real/uint8_abs_cat_sum.py", []),
    ("real/groupnorm_eval_decomposition.py", []),
    ("cpp_relu_runtime_error.py", []),
    ("cpp_throw_crash.py", []),
    ("numerics/random_dropout.py", []),
]


def one(fixture: str, flags: list[str], extra: list[str]) -> dict:
    exe = shutil.which("tcompile")
    cmd = [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]
    out = tempfile.mkdtemp(prefix="bisect-cap-")
    script = ROOT / "fixtures" / fixture
    proc = subprocess.run(
        [*cmd, "bisect", "--json", "--jobs", "1", "--out", out, *flags, *extra, str(script)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=script.parent,
    )
    shutil.rmtree(out, ignore_errors=True)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": proc.stderr[-500:]}
    culprit = [doc.get(k) for k in ("stage", "graph", "subsystem", "detail")]
    if doc.get("subsystem") == "config":
        culprit[3] = (doc.get("detail") or "").split("=")[0]
    return {
        "exit": doc["exit_code"],
        "culprit": " ".join(str(x) for x in culprit if x is not None),
        "program_runs": doc["runs"],
        "compiles": doc.get("graph_judgements", 0),
        "seconds": round(doc["seconds"], 1),
        "from_capture": doc.get("from_capture", False),
        "fallback": doc.get("fallback"),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows, bad = [], 0
    print(
        "| fixture | culprit | program runs before -> after | graph compiles | seconds before -> after | how |"
    )
    print("|---|---|---|---|---|---|")
    for fixture, flags in FIXTURES:
        if a.only and a.only not in fixture:
            continue
        before = one(fixture, flags, ["--whole-program"])
        after = one(fixture, flags, [])
        same = before.get("culprit") == after.get("culprit") and before.get("exit") == after.get(
            "exit"
        )
        bad += not same
        how = "capture" if after.get("from_capture") else f"program bisect: {after.get('fallback')}"
        culprit = (
            after.get("culprit")
            if same
            else f"DIFFERENT: {before.get('culprit')} / {after.get('culprit')}"
        )
        print(
            f"| {fixture} | {culprit} | {before.get('program_runs')} -> {after.get('program_runs')} "
            f"| {after.get('compiles')} | {before.get('seconds')} -> {after.get('seconds')} | {how} |",
            flush=True,
        )
        rows.append({"fixture": fixture, "before": before, "after": after, "same": same})
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=2))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

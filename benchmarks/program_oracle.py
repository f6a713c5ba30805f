#!/usr/bin/env python3
"""The program-level minify's oracle as a command, for a general reducer (shrinkray):
``program_oracle.py TARGET.json CANDIDATE.py`` exits 0 when CANDIDATE is
*interesting* -- it fails as the target says (same failure, compiled with the target's
stage) and does not fail without torch.compile (or with backend eager) -- else 1.

TARGET.json is what ``benchmarks/program_vs_shrinkray.py`` writes from tcompile's own
baseline run (compiler/program.py: ProgramTarget), so both reducers judge candidates
with the same oracle."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from tcompile.compiler.program import ProgramFailure, ProgramOracle, ProgramTarget
from tcompile.minifier.verdict import Verdict


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    target = ProgramTarget(
        failure=ProgramFailure.from_json(spec["failure"]),
        stage=spec.get("stage"),
        control=spec["control"],
        timeout=spec["timeout"],
        cwd=spec["cwd"],
        script_dir=spec["script_dir"],
        accuracy=spec.get("accuracy", "off"),
        prelude=spec.get("prelude", ""),
    )
    source = Path(argv[1]).read_text()
    # the oracle's adaptive time limit (ProgramOracle.limit), kept across calls as
    # tcompile keeps it across candidates: the quickest same-failure run so far
    state = Path(argv[0]).with_suffix(".quickest")
    with tempfile.TemporaryDirectory(prefix="tcompile-oracle-") as work:
        oracle = ProgramOracle(target, Path(work), spec["script_name"])
        try:
            oracle.quickest = float(state.read_text())
        except (OSError, ValueError):
            pass
        verdict = oracle(source)
    if oracle.quickest is not None:
        try:
            best = min(oracle.quickest, float(state.read_text()))
        except (OSError, ValueError):
            best = oracle.quickest
        state.write_text(str(best))
    return 0 if verdict is Verdict.SAME_FAILURE else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``tcompile merge DIR...``: the runs of one distributed job, one per node (each
node's ``tcompile run -- torchrun --nnodes N --node-rank K ...`` writes its own
result.json), combined into one report: every rank's graphs and failures, grouped by
signature, with which ranks fail alike.  Reads JSON only (nothing is unpickled)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.failure import Failure, group

from .classify import RunReport


def result_files(dirs: list[str]) -> list[Path]:
    """Each DIR's result.json, or those of the runs under it (``--out`` of a run)."""
    out: list[Path] = []
    for d in dirs:
        p = Path(d)
        if p.is_file() and p.name.endswith(".json"):
            out.append(p)
        elif (p / layout.RESULT).is_file():
            out.append(p / layout.RESULT)
        elif p.is_dir():
            found = sorted(p.glob("*/result.json"))
            if not found:
                raise UsageError(f"{d}: no result.json of a tcompile run in it")
            out.extend(found)
        else:
            raise UsageError(f"{d}: no such directory")
    return out


def _load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a tcompile result ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("failures"), list):
        raise UsageError(f"{path}: not a tcompile result (no failures[])")
    return doc


def merge(dirs: list[str]) -> RunReport:
    files = result_files(dirs)
    graphs: list[dict[str, Any]] = []
    failures: list[Failure] = []
    notes: list[dict[str, Any]] = []
    codes: list[int] = []
    seconds = 0.0
    for path in files:
        doc = _load(path)
        try:
            graphs += [g for g in doc.get("graphs") or [] if isinstance(g, dict)]
            failures += [Failure.from_json(f) for f in doc["failures"]]
            notes += [n for n in doc.get("notes") or [] if isinstance(n, dict)]
            codes.append(int(doc.get("exit_code", 0)))
            seconds = max(seconds, float(doc.get("seconds") or 0.0))
        except (TypeError, ValueError, AttributeError) as exc:
            raise UsageError(f"{path}: not a tcompile result ({exc})") from None
    if failures:
        verdict, code = "compiler-failure", ExitCode.COMPILER_FAILURE
        explanation = (
            f"{len(files)} runs merged: {len(failures)} compiler failure(s), "
            f"{len(group(failures))} distinct"
        )
    elif codes and all(c == ExitCode.NOT_COMPILER for c in codes):
        verdict, code = "not-a-compiler-bug", ExitCode.NOT_COMPILER
        explanation = f"{len(files)} runs merged: the job fails without torch.compile too"
    elif ExitCode.FLAKY in codes:
        verdict, code = "flaky", ExitCode.FLAKY
        explanation = f"{len(files)} runs merged: a failure that did not come back when run again"
    else:
        verdict, code = "clean", ExitCode.OK
        explanation = f"{len(files)} runs merged: no compiler failure"
    graphs.sort(key=lambda g: (g.get("node") or 0, g.get("rank") or 0))
    failures.sort(key=lambda f: (f.rank if f.rank is not None else -1, f.graph or 0))
    return RunReport(
        graphs=graphs,
        failures=failures,
        notes=notes,
        exit_code=int(code),
        verdict=verdict,
        explanation=explanation,
        returncode=None,
        seconds=seconds,
        run_dir=None,
        command=["tcompile", "merge", *dirs],
        stage=None,
        accuracy="off",
    )

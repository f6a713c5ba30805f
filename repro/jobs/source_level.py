"""The source level (``tcompile minify --level source``): for a failure a graph holds,
a repro in user-level PyTorch beside the aten-level one.

The graph is minified first (repro.py, aten ops).  Its minimal nodes carry the stack
traces Dynamo recorded (``node.meta["stack_trace"]``): the user's source lines they
came from are the *anchors*.  Then the program itself is shrunk (program_job.py, the
same engine and oracle as ``--level program``) until it fails with the graph's failure
-- the same signature -- and the engine
never judges a candidate that lost what an anchor calls (``torch.copysign``,
``.to``): such a candidate could not fail the same way (source_case.Hints.keep).
A wrong value (an accuracy failure) raises nothing: there every candidate, and the
repro, run with torch.compile checked against eager on each call (program_harness.py).
The user-level repro is ``source/repro.py`` of the run folder, verified like a program
repro; the report keeps the graph's fields and adds ``source`` and ``source_lines``.
"""

from __future__ import annotations

import ast
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler.observer import NullObserver
from tcompile.repro.program_harness import prelude_for

from .minify_types import GraphMinifyReport, MinifyOptions, MinifyReport, SourceSummary

if TYPE_CHECKING:
    import torch

    from .minify_types import SourceLine

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n(?P<code>.*)')


def _library(path: str) -> bool:
    """A frame of torch, another installed package, or Python itself."""
    from tcompile.compiler.owners import Owner, owner

    return path.startswith("<") or owner(path) in (Owner.TORCH, Owner.INSTALLED)


def user_lines(gm: torch.fx.GraphModule) -> list[SourceLine]:
    """The user's source lines of a graph's nodes: for each node, the innermost frame of
    its stack trace outside installed packages; in order of file and line, each once,
    with the ops of the nodes that came from it."""
    seen: dict[tuple[str, int], SourceLine] = {}
    for node in gm.graph.nodes:
        trace = str(node.meta.get("stack_trace") or "")
        frames = [m for m in _FRAME.finditer(trace) if not _library(m["file"])]
        if not frames:
            continue
        m = frames[-1]
        key = (m["file"], int(m["line"]))
        entry = seen.setdefault(
            key,
            {"file": m["file"], "line": int(m["line"]), "code": m["code"].strip(), "ops": []},
        )
        op = getattr(node.target, "__name__", str(node.target))
        if node.op == "call_function" and op not in entry["ops"]:
            entry["ops"].append(op)
    return [seen[k] for k in sorted(seen)]


def anchors(lines: list[SourceLine], source: str) -> list[frozenset[str]]:
    """For each user line in ``source``, the library names its statement calls (the
    program's own functions, classes and attributes excluded: inlining may remove
    those)."""
    from tcompile.minifier.source_case import called_names

    tree = ast.parse(source)
    own: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(n.name)
        elif isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store):
            own.add(n.id if isinstance(n, ast.Name) else n.attr)
    out: list[frozenset[str]] = []
    for entry in lines:
        stmts = [
            s
            for s in ast.walk(tree)
            if isinstance(s, ast.stmt)
            and not isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.If))
            and s.lineno <= entry["line"] <= (s.end_lineno or s.lineno)
        ]
        if stmts:
            names = frozenset(called_names(stmts[-1]) - own)
            if names:
                out.append(names)
    return out


def with_source_level(
    command: list[str], report: MinifyReport, opts: MinifyOptions
) -> MinifyReport:
    """The graph's report, with the user-level repro made from the program (a report
    of another kind -- no graph holds the failure -- is returned as it is)."""
    from tcompile.compiler.exitcodes import UsageError
    from tcompile.repro.program_files import program_files
    from tcompile.repro.project import entry_of

    from .program_job import ProgramOptions, minify_program

    report.level = "source"
    if not isinstance(report, GraphMinifyReport) or report.graph is None:
        return report  # no graph holds it (said already)
    if not report.repro or not report.run_dir:
        return report  # nothing was minified
    try:
        entry = entry_of(command)
        files = program_files(
            entry.script, opts.include, list(entry.roots), entry.module, entry.project
        )
    except UsageError as exc:
        report.source = SourceSummary(error=str(exc))
        return report
    keep: list[frozenset[str]] = []
    lines: list[SourceLine] = []
    for f in files:  # the anchors of each file, on its own text (its line numbers)
        mine = [
            e
            for e in report.source_lines or []
            if os.path.realpath(e["file"]) == os.path.realpath(f)
        ]
        if mine:
            keep += anchors(mine, f.read_text())
            lines += mine
    observer = opts.observer or NullObserver()
    t0 = time.monotonic()
    try:
        prog = minify_program(
            command,
            Path(report.run_dir) / "source",
            ProgramOptions(
                backend=opts.backend,
                jobs=opts.for_program(),
                max_time=opts.max_time,
                timeout=opts.timeout,
                observer=observer,
                t0=t0,
                include=opts.include,
                reason=f"a repro in user-level PyTorch for graph {report.graph}",
                keep=keep,
                prelude=prelude_for(report.failure_signature()),
            ),
        )
    except UsageError as exc:
        report.source = SourceSummary(error=str(exc))
        return report
    report.source_lines = lines
    report.source = SourceSummary(
        **{
            "repro": prog.repro,
            "verified": prog.verified,
            "repro_lines": prog.repro_lines,
            "calls": prog.calls,
            "seconds": round(prog.seconds, 1),
            "message": prog.message,
            **(prog.program or {}),
        }
    )
    report.seconds += prog.seconds
    if prog.interrupted:
        report.interrupted = True
    return report

"""tcompile.minifier: search behind an oracle.

Pure search: knows nothing about subprocesses, the CLI or torch's compiler internals,
and imports nothing of tcompile.

  verdict.py          the oracle's answer (no torch import: compiler/ judges with it)
  interval.py         the one interval search (no torch): bisect, passes, numerics, inputs
  gate.py             the one gate before an oracle, for every case type: limits, the
                      verdict cache, calls, candidates judged jobs at a time, per-pass
                      statistics, the best-so-far hook
  problem.py          the one search problem over a case type's format: the best so
                      far, candidates judged in order (speculatively), the primitives
                      passes search with (first failing, bisect)
  ddmin.py            delta debugging over it (the graph passes' node deletion)
  fixpoint.py         its fixed point: rounds of a schedule, a pass's bug isolated,
                      passes that resume, growth steps taken back

Each case type is a format of the one problem: a graph (engine.py), a frame's or a
program's source (source_case.py), a graph's inputs (repro/shrink.py).

Graphs (the graph-level minify):

  graph.py            immutable cases and ``rebuild``, the one operation passes use
  passes.py           the passes, the rules for writing one, the schedule as data
  engine.py           the graph format, and the problem over graphs
  reduce.py           ``minify()``: the start, the schedule, checkpoints, the final check
  checkpoint.py       best-so-far checkpoints, to resume an interrupted search

Source (a frame's function, or a whole program):

  source.py           ``minify_source()``: phases, passes as proposals judged in order
  source_case.py      the source format, and the problem over a module's source
  source_passes.py    the source engine's passes over a function
  program_passes.py   passes that shrink a whole program
  class_passes.py     taking the program's classes apart once inlining emptied them
  dead_code.py        code a program no longer needs, found by reading it
  observe.py          what one run of a program shows about its own driver code
  observed_passes.py  passes from what one run of the candidate showed

Names are imported on first use, so that importing the package (for its Verdict)
does not import torch.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Case": "graph",
    "Gate": "gate",
    "MinifyError": "engine",
    "MinifyResult": "engine",
    "Progress": "engine",
    "Step": "engine",
    "Stop": "gate",
    "Verdict": "verdict",
    "minify": "reduce",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tcompile.minifier' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

"""tcompile.minifier: shrink a failing FX graph behind an oracle.

Pure search over FX graphs: knows nothing about subprocesses, the CLI or torch's
compiler internals, and imports nothing of tcompile.

  verdict.py     the oracle's answer (no torch import: compiler/ judges with it)
  graph.py       immutable cases and ``rebuild``, the one operation passes use
  passes.py      the passes, the rules for writing one, the schedule as data
  engine.py      the problem: the best case so far and the one gate
  reduce.py      ``minify()``: schedule, fixed point, checkpoints, the final check
  checkpoint.py  best-so-far checkpoints, to resume an interrupted search

Names are imported on first use, so that importing the package (for its Verdict)
does not import torch.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Case": "graph",
    "MinifyError": "engine",
    "MinifyResult": "engine",
    "Progress": "engine",
    "Step": "engine",
    "Stop": "engine",
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

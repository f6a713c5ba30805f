"""Best-so-far checkpoints: written after each accepted step, read to resume.

A ``codec`` (encode, decode) turns the graph into plain data and back; the default
pickles the GraphModule itself, which FX re-traces on load (an op that depends on no
input comes back as a constant): callers that care pass their own (tcompile passes
compiler/graph_io.py's)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .engine import Step
from .graph import Case

VERSION = 1
FILE = "minify-checkpoint.pt"


Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]
_PLAIN: Codec = (lambda gm: gm, lambda data: data)


def save(
    directory: str | os.PathLike[str],
    case: Case,
    history: list[Any],
    calls: int,
    codec: Codec | None = None,
) -> None:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / (FILE + ".tmp")
    torch.save(
        {
            "version": VERSION,
            "gm": (codec or _PLAIN)[0](case.gm),
            "inputs": list(case.inputs),
            "history": [vars(h) for h in history],
            "calls": calls,
            "code": case.gm.code,
        },
        tmp,
    )
    os.replace(tmp, d / FILE)
    (d / "best_graph.py").write_text(case.gm.code)


def load(
    directory: str | os.PathLike[str], codec: Codec | None = None
) -> tuple[Case, list[Any], int] | None:
    path = Path(directory) / FILE
    if not path.exists():
        return None
    data = torch.load(path, weights_only=False)  # our own file, written by save()
    if data.get("version") != VERSION:
        raise ValueError(f"checkpoint {path} has version {data.get('version')}, expected {VERSION}")
    history = [Step(**h) for h in data["history"]]
    gm = (codec or _PLAIN)[1](data["gm"])
    return Case.of(gm, data["inputs"]), history, int(data["calls"])

"""Best-so-far checkpoints: written after each accepted step, read to resume."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from .engine import Step
from .graph import Case

VERSION = 1
FILE = "minify-checkpoint.pt"


def save(directory: str | os.PathLike[str], case: Case, history: list[Any], calls: int) -> None:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / (FILE + ".tmp")
    torch.save(
        {
            "version": VERSION,
            "gm": case.gm,
            "inputs": list(case.inputs),
            "history": [vars(h) for h in history],
            "calls": calls,
            "code": case.gm.code,
        },
        tmp,
    )
    os.replace(tmp, d / FILE)
    (d / "best_graph.py").write_text(case.gm.code)


def load(directory: str | os.PathLike[str]) -> tuple[Case, list[Any], int] | None:
    path = Path(directory) / FILE
    if not path.exists():
        return None
    data = torch.load(path, weights_only=False)  # our own file, written by save()
    if data.get("version") != VERSION:
        raise ValueError(f"checkpoint {path} has version {data.get('version')}, expected {VERSION}")
    history = [Step(**h) for h in data["history"]]
    return Case.of(data["gm"], data["inputs"]), history, int(data["calls"])

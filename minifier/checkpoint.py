"""Best-so-far checkpoints: written on the gate's best-so-far hook, read to resume.

Graphs (``save``/``load``, ``minify(checkpoint=)``) and source (``save_source`` /
``load_source``, ``minify_source(checkpoint=)``: the smallest source so far, its
history and calls, as JSON, for a search from the same source only).

A graph's ``codec`` (encode, decode) turns the graph into plain data and back; the default
pickles the GraphModule itself, which FX re-traces on load (an op that depends on no
input comes back as a constant): callers that care pass their own (tcompile passes
compiler/graph_io.py's)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    import torch

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
    import torch

    from .engine import Step
    from .graph import Case

    path = Path(directory) / FILE
    if not path.exists():
        return None
    data = torch.load(path, weights_only=False)  # our own file, written by save()
    if data.get("version") != VERSION:
        raise ValueError(f"checkpoint {path} has version {data.get('version')}, expected {VERSION}")
    history = [Step(**h) for h in data["history"]]
    gm = (codec or _PLAIN)[1](data["gm"])
    return Case.of(gm, data["inputs"]), history, int(data["calls"])


SOURCE_FILE = "minify-source-checkpoint.json"


def save_source(
    directory: str | os.PathLike[str], origin: str, best: str, history: list[str], calls: int
) -> None:
    """The smallest source so far, whole or not at all (a temporary file renamed)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    data = {"origin": _digest(origin), "source": best, "history": history, "calls": calls}
    tmp = d / (SOURCE_FILE + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, d / SOURCE_FILE)


def load_source(
    directory: str | os.PathLike[str], origin: str
) -> tuple[str, list[str], int] | None:
    """The checkpoint of a search from this very source (None: none, or another's)."""
    try:
        data = json.loads((Path(directory) / SOURCE_FILE).read_text())
        if data.get("origin") != _digest(origin):
            return None
        return str(data["source"]), [str(h) for h in data["history"]], int(data["calls"])
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()

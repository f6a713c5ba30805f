"""minifier_launcher.py: the full failing graph, its inputs and config, runnable again.

``python minifier_launcher.py`` minifies again; ``python minifier_launcher.py run``
only checks that the failure reproduces; ``tcompile minify minifier_launcher.py`` is
the same as the first.  It needs tcompile installed, and says so if it is not.  The
graph and inputs sit beside it (``*_graph.pt``, ``*_inputs.pt``, written by tcompile).
"""

from __future__ import annotations

import ast
import datetime
import json
import os
import pprint
from pathlib import Path
from typing import Any

import torch

from .launcher_template import TEMPLATE as _TEMPLATE

FORMAT = "tcompile-launcher/1"
MARKER = "TCOMPILE_LAUNCHER = "


def write_launcher(
    path: Path,
    *,
    gm: Any,
    inputs: list[Any],
    meta: dict[str, Any],
    signature: Any,
    accuracy: str,
    command: list[str],
) -> Path:
    from tcompile import __version__

    graph_file = path.with_name(path.stem + "_graph.pt")
    inputs_file = path.with_name(path.stem + "_inputs.pt")
    torch.save(gm, graph_file)
    torch.save(inputs, inputs_file)
    data = {
        "format": FORMAT,
        "signature": signature.to_json(),
        "accuracy": accuracy,
        "graph_file": graph_file.name,
        "inputs_file": inputs_file.name,
        "command": command,
        "meta": meta,
    }
    text = _TEMPLATE.format(
        tcompile=__version__,
        written=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        signature=str(signature),
        command=" ".join(command),
        name=path.name,
        name_graph=graph_file.name,
        name_inputs=inputs_file.name,
        marker=MARKER,
        meta=pprint.pformat(json.loads(json.dumps(data, default=str)), indent=1, width=100),
    )
    compile(text, str(path), "exec")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def read_launcher(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The launcher's data, read without running it.  ValueError if it is not one."""
    text = Path(path).read_text(errors="replace")
    start = text.find("\n" + MARKER)
    if start < 0:
        raise ValueError(
            f"{path} is not a tcompile minifier_launcher.py "
            "(torch's own launchers are run with python)"
        )
    body = text[start + 1 + len(MARKER) :]
    end = body.find("\n\nif __name__")
    try:  # a Python literal: read without executing anything
        data = ast.literal_eval(body[:end] if end >= 0 else body)
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"{path}: the launcher's data is corrupt ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the launcher's data is corrupt")
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{path}: launcher format {data.get('format')!r}, this tcompile reads {FORMAT!r}"
        )
    return data

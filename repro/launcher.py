"""minifier_launcher.py: the full failing graph, its inputs and config, runnable again.

``python minifier_launcher.py`` minifies again; ``python minifier_launcher.py run``
only checks that the failure reproduces; ``tcompile minify minifier_launcher.py`` is
the same as the first.  It needs tcompile installed, and says so if it is not.  The
graph and inputs sit beside it (``*_graph.pt``, ``*_inputs.pt``, written by tcompile).

Reading a launcher executes nothing (its data is a Python literal); its data files are
pickles, so they are read only from the launcher's own folder, only when their
SHA-256 matches the launcher's data, and only when the launcher is signed by this
user's tcompile (compiler/trust.py) or the user says ``--trust``.
"""

from __future__ import annotations

import ast
import datetime
import json
import os
import pprint
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tcompile.compiler import layout, trust
from tcompile.compiler.graph_io import save_graph

from .launcher_template import TEMPLATE as _TEMPLATE

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tcompile.compiler.signature import FailureSignature

    from .writer import CaptureMeta

FORMAT = "tcompile-launcher/2"  # 2: graph files in graph_io's format
MARKER = "TCOMPILE_LAUNCHER = "


def is_launcher(path: str) -> bool:
    """A minifier_launcher.py (by its marker line, or its name)."""
    try:
        with open(path, errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return False
    return MARKER in head or os.path.basename(path) == layout.LAUNCHER


def write_launcher(
    path: Path,
    *,
    gm: torch.fx.GraphModule,
    inputs: list[object],
    meta: CaptureMeta,
    signature: FailureSignature,
    accuracy: str,
    command: list[str],
) -> tuple[Path, dict[str, Any]]:
    """The launcher at ``path`` with its graph and inputs beside it; and its data, as
    :func:`read_launcher` would read it back (signed)."""
    from tcompile import __version__

    graph_file = path.with_name(path.stem + layout.LAUNCHER_GRAPH_SUFFIX)
    inputs_file = path.with_name(path.stem + layout.SIDECAR_SUFFIX)
    save_graph(gm, graph_file)
    torch.save(inputs, inputs_file)
    data: dict[str, Any] = {
        "format": FORMAT,
        "signature": signature.to_json(),
        "accuracy": accuracy,
        "graph_file": graph_file.name,
        "inputs_file": inputs_file.name,
        "graph_sha256": _sha256(graph_file),
        "inputs_sha256": _sha256(inputs_file),
        "command": command,
        "meta": meta,
    }
    data = json.loads(json.dumps(data, default=str))
    data["hmac"] = trust.sign(_canonical(data))
    text = _TEMPLATE.format(
        tcompile=__version__,
        written=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        signature=str(signature),
        command=" ".join(command),
        name=path.name,
        name_graph=graph_file.name,
        name_inputs=inputs_file.name,
        marker=MARKER,
        meta=pprint.pformat(data, indent=1, width=100),
    )
    compile(text, str(path), "exec")
    return layout.write_file(path, text), data


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _canonical(data: Mapping[str, object]) -> bytes:
    body = {k: v for k, v in data.items() if k != "hmac"}
    return b"tcompile-launcher\n" + json.dumps(body, sort_keys=True).encode()


# the launcher's fields and their types (a field of the wrong type: a corrupt launcher)
_FIELDS: dict[str, type] = {
    "format": str,
    "signature": dict,
    "accuracy": str,
    "graph_file": str,
    "inputs_file": str,
    "command": list,
    "meta": dict,
}


def read_launcher(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The launcher's data, read without running it.  ValueError if it is not one, or
    a corrupt one (a missing field, a field of the wrong type, a data file outside its
    folder)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
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
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"{path}: the launcher's data is corrupt ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the launcher's data is corrupt")
    if data.get("format") != FORMAT:
        raise ValueError(
            f"{path}: launcher format {str(data.get('format'))[:40]!r}, this tcompile reads {FORMAT!r}"
        )
    _check_fields(path, data)
    return data


def _check_fields(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    for key, want in _FIELDS.items():
        if key not in data:
            raise ValueError(f"{path}: corrupt launcher (no {key!r})")
        if not isinstance(data[key], want):
            raise ValueError(
                f"{path}: corrupt launcher ({key!r} is a {type(data[key]).__name__}, "
                f"not a {want.__name__})"
            )
    for key in ("graph_file", "inputs_file"):
        name = data[key]
        if not name or name != os.path.basename(name) or name in (".", "..") or "\\" in name:
            raise ValueError(
                f"{path}: corrupt launcher ({key} {name[:80]!r} is not a file name beside it)"
            )
    if data["accuracy"] not in ("off", "loose", "strict"):
        raise ValueError(f"{path}: corrupt launcher (accuracy {data['accuracy'][:20]!r})")
    if not all(isinstance(c, str) for c in data["command"]):
        raise ValueError(f"{path}: corrupt launcher (command is not a list of strings)")
    sig = data["signature"]
    if not all(isinstance(sig.get(k, ""), str) for k in ("stage", "kind", "exc_type", "message")):
        raise ValueError(f"{path}: corrupt launcher (a malformed signature)")
    meta = data["meta"]
    if not isinstance(meta.get("stage"), str):
        raise ValueError(f"{path}: corrupt launcher (meta has no stage)")


def check_files(path: str | os.PathLike[str], data: dict[str, Any], *, trusted: bool) -> Path:
    """Before the data files (pickles) are loaded: they sit beside the launcher, their
    SHA-256 matches, and the launcher is this user's (or ``trusted``).  Its folder."""
    here = Path(path).resolve().parent
    for key in ("graph_file", "inputs_file"):
        if not (here / data[key]).is_file():
            raise ValueError(f"{path}: {data[key]} is missing beside it")
    if not trusted:
        mac = data.get("hmac")
        if not isinstance(mac, str) or not trust.verify(_canonical(data), mac):
            raise ValueError(
                f"{path} is not signed by this user's tcompile (a launcher from elsewhere, or "
                "altered); its data files are pickles, which execute code when loaded: pass "
                "--trust if you trust it"
            )
    for key in ("graph", "inputs"):
        want = data.get(f"{key}_sha256")
        if want is not None and _sha256(here / data[f"{key}_file"]) != want:
            raise ValueError(
                f"{path}: {data[key + '_file']} does not match the launcher's checksum"
            )
    return here

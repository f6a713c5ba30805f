"""inductor's debug artifacts per graph (``run --debug-dir``, ``explain --code``)."""

from __future__ import annotations

import shutil
from pathlib import Path

ARTIFACTS = (
    "fx_graph_readable.py",
    "fx_graph_transformed.py",
    "ir_pre_fusion.txt",
    "ir_post_fusion.txt",
    "output_code.py",
    "fx_graph_runnable.py",
)


def index_debug_dir(debug_dir: str) -> list[dict[str, int | str | dict[str, str]]]:
    """Flatten inductor's trace folders into DIR/graph-NNN-kind/<artifact> and list them."""
    out: list[dict[str, int | str | dict[str, str]]] = []
    for gdir in sorted(Path(debug_dir).glob("graph-*")):
        nested = sorted(gdir.glob("torchinductor/*/"))
        for sub in nested[-1:]:  # the last compile of this graph
            for f in sub.iterdir():
                if f.is_file():
                    shutil.move(str(f), gdir / f.name)
        if nested:
            shutil.rmtree(gdir / "torchinductor", ignore_errors=True)
        _, index, kind = gdir.name.split("-", 2)
        files = {a: str(gdir / a) for a in ARTIFACTS if (gdir / a).exists()}
        out.append({"graph": int(index), "kind": kind, "dir": str(gdir), "files": files})
    return out

"""``tcompile run --trace DIR``: torch's structured trace of the run (``TORCH_TRACE``),
the log PyTorch's maintainers open first on a compile issue, and, where ``tlparse`` is
installed, its HTML pages -- with the page of each failing graph named.

tlparse names a compile's folder ``<rank>_<frame>_<compile>_<attempt>`` (``-`` for no
rank); a Dynamo graph's compile id (``0/1``) says which.  Parent side: no torch."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from .failure import Failure


def trace_summary(
    trace_dir: str,
    graphs: Sequence[Mapping[str, object]],
    failures: Sequence[Failure],
    timeout: float = 300,
) -> dict[str, object]:
    """{"dir", "logs", "tlparse": its index.html or None, "why", "pages": {graph: folder}}."""
    root = Path(trace_dir)
    logs = sorted(root.glob("*.log"))
    out: dict[str, object] = {"dir": str(root), "logs": [str(p) for p in logs], "tlparse": None}
    exe = shutil.which("tlparse")
    if exe is None:
        out["why"] = "tlparse is not installed (pip install tlparse) to turn the trace into pages"
        return out
    if not logs:
        out["why"] = "the run wrote no trace (did the program compile anything?)"
        return out
    pages: dict[str, str] = {}
    for log in logs:
        dest = root / "tlparse" / (log.stem if len(logs) > 1 else "")
        try:
            subprocess.run(
                [exe, str(log), "-o", str(dest), "--overwrite", "--no-browser"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            out["why"] = f"tlparse failed: {exc}"
            continue
        if (dest / "index.html").exists():
            out["tlparse"] = out["tlparse"] or str(dest / "index.html")
            pages.update(_graph_pages(dest, graphs, failures))
    out["pages"] = pages
    return out


def _graph_pages(
    dest: Path, graphs: Sequence[Mapping[str, object]], failures: Sequence[Failure]
) -> dict[str, str]:
    """Failing graph index -> tlparse's folder for that compile (its last attempt)."""
    ids = {
        g.get("index"): str(g.get("compile_id") or "")
        for g in graphs
        if g.get("level") == "dynamo" and g.get("compile_id")
    }
    pages = {}
    for f in failures:
        cid = ids.get(getattr(f, "graph", None), "")
        frame, _, compile_ = cid.partition("/")
        if not frame.isdigit() or not compile_.isdigit():
            continue
        found = sorted(dest.glob(f"*_{frame}_{compile_}_*"))
        if found:
            pages[str(f.graph)] = str(found[-1])
    return pages

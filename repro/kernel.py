"""The generated code beside the repro: what inductor wrote for the minimized graph.

repro.py is verified with a private inductor cache directory (verify.py), so what
inductor generated for it is there and nothing else is: the wrapper module
(``output_code``) and the C++ sources of its kernels.  The kernels are taken from the
wrapper (``name = async_compile.cpp_pybinding(..., r'''...''')`` or
``async_compile.triton('name', '''...''')``), or from the ``*.main.cpp`` files when a
C++ compile error stopped inductor before the wrapper was loaded.  The kernel whose
name holds the culprit op comes first.
"""

from __future__ import annotations

import re
from pathlib import Path

from tcompile.compiler import layout

_CPP = re.compile(r"^(\w+) = async_compile\.cpp(?:_pybinding)?\(.*?r?'''(.*?)'''", re.S | re.M)
_TRITON = re.compile(r"^(\w+) = async_compile\.triton\('\w+', '''(.*?)'''", re.S | re.M)


def _rank(names_code: list[tuple[str, str]], ops: list[str]) -> list[tuple[str, str]]:
    """Kernels naming a culprit op first (the op of a one-node graph), else in order."""

    def score(item: tuple[str, str]) -> int:
        name = item[0].lower()
        return -sum(1 for op in ops if op and op.lower() in name)

    return sorted(names_code, key=score)


def collect(cache_dir: Path, ops: list[str]) -> dict[str, str]:
    """{file name: text} to write beside repro.py (empty when inductor wrote nothing)."""
    wrappers = sorted(
        (p for p in cache_dir.rglob("*.py") if "async_compile" in _read(p)),
        key=lambda p: p.stat().st_mtime,
    )
    out: dict[str, str] = {}
    text = "\n".join(_read(p) for p in wrappers)
    cpp = _rank(_CPP.findall(text), ops)
    triton = _rank(_TRITON.findall(text), ops)
    if not cpp and not triton:
        mains = sorted(cache_dir.rglob("*.main.cpp"), key=lambda p: p.stat().st_mtime)
        cpp = [(p.stem.split(".")[0], _read(p)) for p in mains]
    if cpp:
        out[layout.KERNEL_CPP] = "".join(
            f"// ---- {name} ----\n{code.strip()}\n\n" for name, code in cpp
        )
    if triton:
        out[layout.KERNEL_TRITON] = "".join(
            f"# ---- {name} ----\n{code.strip()}\n\n" for name, code in triton
        )
    if wrappers and not out:
        out["output_code.py"] = _read(wrappers[-1])
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def graph_ops(gm: object) -> list[str]:
    """The short names of the ops of a (minimal) graph: ``relu``, ``mul``, ..."""
    names = []
    for n in gm.graph.nodes:  # type: ignore[attr-defined]
        if n.op in ("call_function", "call_method"):
            t = n.target
            name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
            names.append(str(name).split(".")[0].strip("_"))
    return names

"""Bytecode for tcompile's own interpreters where the environment says not to write it.

With ``PYTHONDONTWRITEBYTECODE`` set (common in container images; the GPU machine the
benchmarks ran on has it), every fresh interpreter compiles torch's 2,700 modules from
source: 8 s there before ``import torch`` returns, and as much again in each of
inductor's compile workers.  tcompile starts many interpreters of its own -- minifier
and bisect workers, the standby, each repro.py's verification -- and on that machine a
verification took 24 s, 14 of them compiling Python.  Those interpreters (never the
user's own runs of the program, which run in its environment exactly) keep their
bytecode in tcompile's cache folder instead (``PYTHONPYCACHEPREFIX``: nothing is written
beside the sources, which is what the variable asked for) -- where torch has no bytecode
beside its sources (installed by uv, say; pip compiles it).  Bytecode is a cache of the
same source: it changes no result.  ``TCOMPILE_PYCACHE=0`` turns it off;
``TCOMPILE_PYCACHE=DIR`` puts it in DIR.
"""

from __future__ import annotations

import os
from pathlib import Path

from .owners import torch_folder

ENV = "TCOMPILE_PYCACHE"


def _folder() -> str | None:
    asked = os.environ.get(ENV, "")
    if asked == "0":
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tcompile"
    folder = Path(asked) if asked else base / "pycache"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return str(folder) if os.access(folder, os.W_OK) else None


def _torch_has_bytecode() -> bool:
    """Whether torch's own bytecode lies beside its sources (pip compiles it at install;
    uv does not): then those are read, and a prefix would only compile them again."""
    folder = torch_folder()
    return folder is None or (Path(folder) / "__pycache__").is_dir()


def helper_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for an interpreter tcompile runs for its own work: where bytecode may not
    be written beside the sources and none is there, it goes to tcompile's cache folder."""
    if not env.get("PYTHONDONTWRITEBYTECODE") or env.get("PYTHONPYCACHEPREFIX"):
        return env
    if _torch_has_bytecode():
        return env
    folder = _folder()
    if folder is None:
        return env
    out = dict(env)
    del out["PYTHONDONTWRITEBYTECODE"]
    out["PYTHONPYCACHEPREFIX"] = folder
    return out

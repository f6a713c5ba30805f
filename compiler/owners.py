"""Whose code a source file is: tcompile's, torch's, an installed package's, Python's,
generated, or the program's own -- by where the code lives, never by a word in its path.

A rule that treats every path holding ``/tcompile/`` as tcompile's breaks the moment a
user follows the README in a clone named ``tcompile`` (its virtual environment, so torch
itself, lies under that folder) or keeps a project there: every frame then looks like
tcompile's and the program's own raising line is lost.  So each owner is a set of
folders found from the modules themselves:

* **tcompile**: the folders of tcompile's own packages (``tcompile``, ``tcompile.cli``,
  ``tcompile.compiler`` and ``child``/``bootstrap``, ``tcompile.minifier``,
  ``tcompile.repro`` and ``jobs``) -- exactly those folders, not what lies below them:
  in a source checkout the fixtures and tests beside the packages are programs;
* **torch**: torch's package folder (found without importing torch);
* **installed**: the interpreter's site-packages and standard library (``sysconfig``,
  ``site``), and inductor's folder of generated kernels;
* **generated**: ``<eval_with_key>``, ``<frozen runpy>`` and the like (``<string>`` and
  ``<stdin>`` are the program's: ``python -c``);
* **user**: everything else -- the program, its modules, its packages (an editable
  install of the user's own package lives in the project, so it is the user's).

Pure Python, no torch import: the parent uses it on stacks read back from a child.
"""

from __future__ import annotations

import enum
import functools
import getpass
import importlib.util
import os
import site
import sysconfig
import tempfile

_OWN_PACKAGES = (
    "tcompile",
    "tcompile.cli",
    "tcompile.compiler",
    "tcompile.compiler.child",
    "tcompile.minifier",
    "tcompile.repro",
    "tcompile.repro.jobs",
)


class Owner(str, enum.Enum):
    TCOMPILE = "tcompile"
    TORCH = "torch"
    INSTALLED = "installed"  # site-packages, the standard library, generated kernels
    GENERATED = "generated"  # <eval_with_key.N>, <frozen runpy>, ...
    USER = "user"


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


@functools.lru_cache(maxsize=1)
def own_folders() -> frozenset[str]:
    """The folders tcompile's modules live in (the installed package or the checkout)."""
    here = os.path.dirname(os.path.abspath(__file__))
    folders = {
        _real(here),
        _real(os.path.join(here, "child")),
        _real(os.path.join(here, "bootstrap")),
    }
    for name in _OWN_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for loc in (spec.submodule_search_locations or []) if spec else []:
            folders.add(_real(loc))
    return frozenset(folders)


@functools.lru_cache(maxsize=1)
def torch_folder() -> str | None:
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    return _real(os.path.dirname(spec.origin))


@functools.lru_cache(maxsize=1)
def installed_folders() -> tuple[str, ...]:
    """site-packages (every scheme of this interpreter, the user's site), the standard
    library, and inductor's folder of generated kernels."""
    paths: set[str] = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            paths.add(p)
    try:
        paths.update(site.getsitepackages())
    except AttributeError:  # some virtualenvs' site module
        pass
    user_site = getattr(site, "getusersitepackages", lambda: None)()
    if user_site:
        paths.add(user_site)
    paths.add(inductor_cache_folder())
    return tuple(sorted({_real(p) for p in paths if p}))


def installed_relative(path: str) -> str | None:
    """``path`` relative to the installed folder holding it (``torch/_inductor/ir.py``),
    the innermost one; None: not under one."""
    real = _real(path)
    for folder in sorted(installed_folders(), key=len, reverse=True):
        if _under(real, folder):
            return os.path.relpath(real, folder).replace(os.sep, "/")
    return None


def inductor_cache_folder() -> str:
    """Where inductor writes generated code (its own default rule)."""
    env = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if env:
        return env
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return os.path.join(tempfile.gettempdir(), f"torchinductor_{user}".replace(os.sep, "_"))


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@functools.lru_cache(maxsize=4096)
def owner(filename: str) -> Owner:
    """Whose code ``filename`` (a frame's file) is."""
    if not filename:
        return Owner.GENERATED
    if filename.startswith("<"):
        return Owner.USER if filename in ("<string>", "<stdin>") else Owner.GENERATED
    path = _real(filename)
    if os.path.dirname(path) in own_folders():
        return Owner.TCOMPILE
    torch_dir = torch_folder()
    if torch_dir and _under(path, torch_dir):
        return Owner.TORCH
    if any(_under(path, folder) for folder in installed_folders()):
        return Owner.INSTALLED
    return Owner.USER


def is_tcompile(filename: str) -> bool:
    return owner(filename) is Owner.TCOMPILE


def is_user(filename: str) -> bool:
    return owner(filename) is Owner.USER


# torch's compiler: a run without torch.compile that raises in here failed by its own
# means (``torch.compile with fullgraph=True found no compiled frames`` under
# TORCH_COMPILE_DISABLE=1), not as the program fails
# (torch.func's vmap and grad live in _functorch and run eagerly: not these)
_COMPILER_PACKAGES = ("_dynamo", "_inductor")


def is_torch_compiler(filename: str) -> bool:
    """Code of TorchDynamo or inductor, which a run without torch.compile never enters."""
    torch_dir = torch_folder()
    if not torch_dir or not filename or filename.startswith("<"):
        return False
    path = _real(filename)
    return any(_under(path, os.path.join(torch_dir, p)) for p in _COMPILER_PACKAGES)


def in_torch(filename: str, *parts: str) -> bool:
    """``filename`` lies in torch's package (under ``parts`` of it when given:
    ``in_torch(f, "_inductor", "fx_passes")``) -- by where torch is, not by a
    ``/torch/`` in the path (a project folder named ``torch`` is the user's)."""
    torch_dir = torch_folder()
    if not torch_dir or not filename or filename.startswith("<"):
        return False
    return _under(_real(filename), os.path.join(torch_dir, *parts))


def frame_file(frame: str) -> str:
    """'/p/model.py:12 in forward' -> '/p/model.py'."""
    head = frame.rsplit(" in ", 1)[0] if " in " in frame else frame
    path, sep, line = head.rpartition(":")
    return path if sep and line.isdigit() else head


def innermost_user(frames: list[str]) -> str:
    """The innermost of ``frames`` (``file:line in name``, outermost first) that is the
    program's own code; '' when none is."""
    for f in reversed(frames):
        if is_user(frame_file(f)):
            return f
    return ""

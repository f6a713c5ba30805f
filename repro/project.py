"""The project a program belongs to (the program level, program_job.py).

Users' code lives in projects, not single scripts: a script beside its modules and
packages, ``python -m pkg.train`` run from the project's folder, a ``src/`` layout with
``pyproject.toml`` (installed editable, or run with ``PYTHONPATH=src``), and the data
and config files the program opens.  :func:`entry_of` reads a command into an
:class:`Entry`: the file that runs as ``__main__``, its arguments, the dotted name it
runs as (``-m``), and the *roots* its own imports resolve from, in Python's order (the
script's folder -- for ``-m`` the working folder --, ``PYTHONPATH``, the project's
``src/``, a package of the project found on ``sys.path``: an editable install).  A
module under site-packages is never the program's own: it is installed, and repro.py
names it with its version (:func:`installed_versions`).

What the program *opens* is recorded in the baseline run (compiler/child/opened.py, an
audit hook); :func:`data_files` keeps the files of the project among them (a config, a
vocabulary; not Python, not installed, not tcompile's), each with the path it takes
beside repro.py, and repro.py becomes a folder.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
from pathlib import Path

from tcompile.compiler.exitcodes import UsageError
from tcompile.compiler.owners import is_user
from tcompile.compiler.runner import is_distributed_launch

_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg")
MAX_FILE = 2 << 20  # a data file carried beside repro.py: at most 2 MiB ...
MAX_FILES = 20 << 20  # ... and 20 MiB in all
_CODE = {".py", ".pyc", ".pyo", ".so", ".pyd", ".pth"}


@dataclasses.dataclass(frozen=True)
class Entry:
    script: Path  # the file that runs as __main__
    argv: list[str]  # its arguments
    distributed: bool  # launched by torchrun
    module: str = ""  # ``python -m pkg.train``: "pkg.train" (its packages import first)
    roots: tuple[Path, ...] = ()  # where its own imports resolve, first wins
    project: Path | None = None  # the folder with pyproject.toml/setup.py, if any


def project_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` (three levels at most) that holds
    pyproject.toml, setup.py or setup.cfg."""
    here = start.resolve()
    for folder in [here, *here.parents][:4]:
        if any((folder / m).is_file() for m in _MARKERS):
            return folder
    return None


def is_installed(path: Path) -> bool:
    """Under site-packages (or the interpreter's own library): never the program's."""
    from tcompile.compiler.owners import Owner, owner

    return owner(str(path)) in (Owner.TORCH, Owner.INSTALLED)


def _module_path(roots: list[Path] | tuple[Path, ...], name: str) -> Path | None:
    """Where ``name`` runs from under ``-m``: ``a/b.py``, or a package's ``__main__``."""
    for root in roots:
        base = root.joinpath(*name.split("."))
        for candidate in (base.with_suffix(".py"), base / "__main__.py"):
            if candidate.is_file():
                return candidate.resolve()
    return None


def _roots(first: Path) -> list[Path]:
    """The roots after the first: PYTHONPATH's folders, the project's src/."""
    out = [first.resolve()]
    for p in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if p and Path(p).is_dir() and not is_installed(Path(p)):
            out.append(Path(p).resolve())
    project = project_root(first)
    if project is not None and (project / "src").is_dir():
        out.append((project / "src").resolve())
    return list(dict.fromkeys(out))


def editable_root(name: str, project: Path | None) -> Path | None:
    """A top-level package of the project that imports from elsewhere on sys.path (an
    editable install): the folder it is in.  Found without importing it."""
    if project is None or name.split(".")[0] == "tcompile":
        return None
    try:
        spec = importlib.util.find_spec(name.split(".")[0])
    except (ImportError, ValueError, AttributeError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not origin or not os.path.isfile(origin):
        return None
    path = Path(origin).resolve()
    try:
        path.relative_to(project)
    except ValueError:
        return None
    if is_installed(path):
        return None
    top = path.parent if path.name == "__init__.py" else path
    return top.parent


def entry_of(command: list[str]) -> Entry:
    """The program a command runs: ``python script.py ARGS``, ``python -m pkg.mod
    ARGS`` (from the working folder), or a launcher of a script (torchrun ...)."""
    distributed = is_distributed_launch(command)
    cwd = Path.cwd()
    for i, arg in enumerate(command[1:], start=1):
        if arg == "-m" and i + 1 < len(command) and not distributed:
            name = command[i + 1]
            roots = _roots(cwd)
            path = _module_path(roots, name)
            if path is None:
                raise UsageError(f"-m {name}: no module {name} under {cwd}")
            if path.name == "__main__.py":
                name += ".__main__"
            return Entry(path, command[i + 2 :], False, name, tuple(roots), project_root(cwd))
        if arg.endswith(".py") and os.path.isfile(arg):
            script = Path(arg).resolve()
            roots = _roots(script.parent)
            return Entry(
                script, command[i + 1 :], distributed, "", tuple(roots), project_root(script.parent)
            )
    raise UsageError(
        "program-level minify needs a Python script (SCRIPT [ARGS], -m MODULE [ARGS], "
        "or a launcher of one)"
    )


def installed_versions(source: str) -> dict[str, str]:
    """The installed distributions a program imports at its top level, with versions
    (``{"pyyaml": "6.0.3"}``): the standard library and torch are left out (the header
    names torch already)."""
    import ast
    import importlib.metadata as md

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    tops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    tops -= set(sys.stdlib_module_names) | {"torch", "__future__"}
    try:
        dists = md.packages_distributions()
    except Exception:  # a broken environment's metadata: say nothing rather than fail
        return {}
    out: dict[str, str] = {}
    for top in sorted(tops):
        for dist in dists.get(top, [])[:1]:
            try:
                out[dist.lower()] = md.version(dist)
            except md.PackageNotFoundError:
                pass
    return out


def data_files(opened: Path | list[Path], entry: Entry, exclude: Path) -> list[tuple[Path, str]]:
    """The project's files the program opened (``opened``: records of its runs, one JSON
    object per line: ``{"given", "abs", "how", "pid"}``, compiler/child/opened.py) under
    the program's first root (the script's folder; the working folder for ``-m``) or its
    project, each with the path it takes beside repro.py: as the program named it, when
    relative; else relative to that folder.  Python files count when the program read
    them (``exec(open("configurator.py").read())``) or imported them by path: the
    modules pasted into the program are never imported by it.  A file a process wrote
    before it read it is the program's own making, not carried.  ``exclude``:
    tcompile's own files."""
    lines: list[str] = []
    for record in [opened] if isinstance(opened, Path) else opened:
        try:
            lines += record.read_text().splitlines()
        except OSError:
            continue
    first = entry.roots[0] if entry.roots else entry.script.parent
    bases = list(
        dict.fromkeys([first, entry.script.parent, *([entry.project] if entry.project else [])])
    )
    out: dict[Path, str] = {}
    made: set[tuple[int | None, Path]] = set()  # (process, file) written before it was read
    total = 0
    for line in lines:
        try:
            rec = json.loads(line)
            path = Path(rec["abs"]).resolve()
        except (ValueError, KeyError, TypeError, OSError):
            continue
        how, pid = rec.get("how", "read"), rec.get("pid")
        if how == "write":
            made.add((pid, path))
            continue
        if (pid, path) in made or path in out or not path.is_file() or not is_user(str(path)):
            continue  # made by the program; tcompile's, torch's, installed (owners.py)
        if path.suffix in _CODE and path.suffix != ".py":
            continue
        if _under(path, exclude) or _under(path, Path(sys.prefix)):
            continue
        rel = _placed(Path(rec.get("given", "")), path, bases)
        if rel is None:
            continue
        size = path.stat().st_size
        if size > MAX_FILE or total + size > MAX_FILES:
            continue
        total += size
        out[path] = rel
    return list(out.items())


def _under(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder.resolve())
        return True
    except ValueError:
        return False


def _placed(given: Path, path: Path, bases: list[Path]) -> str | None:
    """Where a data file goes in the repro's folder (None: not the project's): where
    the program looks for it, when it named it relatively (repro.py runs from its
    folder)."""
    if not any(_under(path, base) for base in bases):
        return None
    if not given.is_absolute() and ".." not in given.parts and str(given) not in ("", "."):
        return given.as_posix()
    for base in bases:
        if _under(path, base):
            return path.relative_to(base).as_posix()
    return None

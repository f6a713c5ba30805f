"""What the program opens (the program level's baseline and candidates, repro/project.py).

An audit hook (``sys.addaudithook``, event ``open``) writes one JSON line per file the
program opens -- the path as given and as resolved from the working folder at that
moment, and how (``how``):

* ``read``: opened to read by the program's own code -- data, a config, and Python files
  read as data too (``exec(open("configurator.py").read())``, ``runpy.run_path``);
* ``import``: a Python file the import system opened (its frames are on the stack):
  a module the parent pastes into the program, or one imported by path
  (``importlib.util.spec_from_file_location``) that it carries;
* ``write``: opened to write -- a file the program makes itself (a checkpoint it saves
  and loads back is never carried: the repro makes it again).

Each path is recorded once per way and process (``pid``: the order of a read and a
write of one file is the order within one process).  Compiled modules and anything under the
interpreter's prefix are left out here; the parent keeps the project's files among the
rest.  The record goes to a file opened once, at install, with ``os.write`` (which
raises no audit event of its own: the hook never sees itself), appended to: a candidate
and its control run write one record.  A program that dies of a signal leaves what it
opened so far.
"""

from __future__ import annotations

import json
import os
import sys

_SKIP = (".pyc", ".so", ".pth", ".pyi")
# the import system's own frames: a Python file opened here is imported, not read
_IMPORTING = ("<frozen importlib._bootstrap", "importlib/_bootstrap")


def _imported() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_IMPORTING[0]) or _IMPORTING[1] in name:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def record(path: str) -> None:
    """Record, from now on, the files this process opens, into ``path``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        return
    seen: set[tuple[str, str]] = set()
    prefixes = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix)})

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event != "open" or not args:
            return
        name, mode = args[0], args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        if not isinstance(name, (str, bytes, os.PathLike)):
            return  # a file descriptor
        try:
            given = os.fsdecode(name)
            if given.endswith(_SKIP) or given.startswith(("/proc", "/dev", "/sys")):
                return
            if isinstance(mode, str):
                writes = any(c in mode for c in "wax+")
            else:
                writes = bool(flags & (os.O_WRONLY | os.O_RDWR))
            how = "write" if writes else "read"
            if how == "read" and given.endswith(".py") and _imported():
                how = "import"
            if (given, how) in seen:
                return
            seen.add((given, how))
            full = os.path.abspath(given)
            if full.startswith(prefixes):
                return
            line = json.dumps({"given": given, "abs": full, "how": how, "pid": os.getpid()})
            os.write(fd, (line + "\n").encode())
        except Exception:  # never break the user's program
            pass

    sys.addaudithook(hook)

"""What the program opens to read (the program level's baseline, repro/project.py).

An audit hook (``sys.addaudithook``, event ``open``) writes one JSON line per file the
program opens for reading -- the path as given and as resolved from the working folder
at that moment -- to a file opened once, at install, with ``os.write`` (which raises no
audit event of its own: the hook never sees itself).  Python files, compiled modules
and anything under the interpreter's prefix are left out here; the parent keeps the
project's files among the rest.  The record is written as the program goes: a program
that dies of a signal leaves what it opened so far.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

_SKIP = (".py", ".pyc", ".so", ".pth", ".pyi")


def record(path: str) -> None:
    """Record, from now on, the files this process opens to read, into ``path``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError:
        return
    seen: set[str] = set()
    prefixes = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix)})

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not args:
            return
        name, mode = args[0], args[1] if len(args) > 1 else None
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        if not isinstance(name, (str, bytes, os.PathLike)):
            return  # a file descriptor
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            return
        if mode is None and flags & (os.O_WRONLY | os.O_RDWR):
            return
        try:
            given = os.fsdecode(name)
            if (
                given in seen
                or given.endswith(_SKIP)
                or given.startswith(("/proc", "/dev", "/sys"))
            ):
                return
            seen.add(given)
            full = os.path.abspath(given)
            if full.startswith(prefixes):
                return
            os.write(fd, (json.dumps({"given": given, "abs": full}) + "\n").encode())
        except Exception:  # never break the user's program
            pass

    sys.addaudithook(hook)

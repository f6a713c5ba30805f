"""Text a person shares holds no path of the machine it was made on.

report.md and the triage pages go into bug reports and chats; the folders a run used
-- the program's project, the run's ``--out``, the home and temporary folders -- mean
nothing elsewhere and tell things about the user.  Each is replaced by what it is:
the program's folder by nothing (files named as the program names them), ``--out`` by
``<out>``, home by ``~``, the temporary folder by ``<tmp>``.  repro.py needs no scrub:
its writers never put a path in it (DESIGN.md mechanism 9)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def places(program_dirs: list[str], out: str | None = None) -> dict[str, str]:
    """The folders of this machine a shared text may mention, and what stands for each."""
    found: dict[str, str] = {}
    for folder, token in (
        *((d, "") for d in program_dirs),
        (out, "<out>"),
        (str(Path.home()), "~"),
        (tempfile.gettempdir(), "<tmp>"),
    ):
        if not folder:
            continue
        for form in {os.path.abspath(folder), os.path.realpath(folder)}:
            if form not in ("/", "") and form not in found:
                found[form] = token
    return found


def scrub(text: str, where: dict[str, str]) -> str:
    """``text`` with each folder of ``where`` replaced (longest first, so that a
    project under home keeps its relative names)."""
    for folder in sorted(where, key=len, reverse=True):
        token = where[folder]
        text = text.replace(folder + os.sep, f"{token}{os.sep}" if token else "")
        text = text.replace(folder, token or ".")
    return text

"""Naming a process that died: the signal, and the line it printed about why."""

from __future__ import annotations

import signal

from .signature import FailureKind, FailureSignature, normalize_message

# what a dying process prints about why (``terminate called ...`` from a C++ throw)
_DYING_WORDS = (
    "terminate called",
    "Segmentation fault",
    "Aborted",
    "Fatal Python error",
    "illegal memory",
)


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def crash_message(tail: list[str]) -> str:
    """The line a dying process printed about why (e.g. ``terminate called ...``), with
    the ``what():`` line that follows a C++ throw -- the only one that says what went
    wrong (``index out of bounds: 0 <= tmp2 < 92L``)."""
    lines = [line.strip() for line in tail]
    hits = [i for i, line in enumerate(lines) if any(k in line for k in _DYING_WORDS)]
    # later threads only say "terminate called recursively"
    informative = [i for i in hits if "recursively" not in lines[i]]
    if not (informative or hits):
        return ""
    first = (informative or hits)[0]
    what = next((ln for ln in lines[first + 1 :] if ln.startswith("what():")), "")
    return f"{lines[first]} {what}".strip()


FATAL_PREFIX = "fatal-"  # child/session.py: a process's Python stacks when a signal killed it


def fatal_stack(run_dir: str) -> list[str]:
    """Where the program was when a signal killed it: the program's own frames
    (``file:line in name``, outermost first; owners.py).  Inside a compiled graph: where
    the program called it, as the marker says (protocol.read_site: written at each call,
    so it never depends on how the death went); else from the faulthandler dump a dying
    process left (child/session.py) -- which a second thread's abort can cut short (seen:
    a kernel's OpenMP threads each throwing).  Empty when neither says."""
    import os
    import re

    from .owners import is_user
    from .protocol import read_markers, read_site

    for pid, m in read_markers(run_dir).items():
        if m["graph"] >= 0 and m["phase"] != "idle":
            site = read_site(run_dir, pid)
            if site:
                return site
    try:
        names = sorted(n for n in os.listdir(run_dir) if n.startswith(FATAL_PREFIX))
    except OSError:
        return []
    for name in names:
        try:
            with open(os.path.join(run_dir, name), errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        blocks = [b for b in text.split("\n\n") if 'File "' in b]
        # the thread that faulted first, then the others (a kernel's worker thread has no
        # Python frames: the main thread waiting on it has the program's)
        blocks.sort(key=lambda b: "Current thread" not in b)
        for block in blocks:
            frames = [
                f"{path}:{line} in {fn}"
                for path, line, fn in re.findall(r'File "(.+?)", line (\d+) in (\S+)', block)
                if is_user(path)
            ]
            if frames:
                return list(reversed(frames))
    return []


def crash_signature(stage: str, returncode: int | None, tail: list[str]) -> FailureSignature:
    """The signature of a process that died: the signal is the identity."""
    if returncode is not None and returncode < 0:
        exc_type = signal_name(returncode)
    else:
        exc_type = f"exit status {returncode}"
    message = crash_message(tail) or f"process killed by {exc_type}"
    return FailureSignature(stage, FailureKind.CRASH.value, exc_type, normalize_message(message))

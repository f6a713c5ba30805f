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
    """The line a dying process printed about why (e.g. ``terminate called ...``)."""
    hits = [line.strip() for line in tail if any(k in line for k in _DYING_WORDS)]
    # later threads only say "terminate called recursively"
    informative = [h for h in hits if "recursively" not in h]
    return (informative or hits or [""])[0]


def crash_signature(stage: str, returncode: int | None, tail: list[str]) -> FailureSignature:
    """The signature of a process that died: the signal is the identity."""
    if returncode is not None and returncode < 0:
        exc_type = signal_name(returncode)
    else:
        exc_type = f"exit status {returncode}"
    message = crash_message(tail) or f"process killed by {exc_type}"
    return FailureSignature(stage, FailureKind.CRASH.value, exc_type, normalize_message(message))

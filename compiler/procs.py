"""Every process of one run, wherever it went: found, asked where it is, killed.

A command may start processes outside the process group tcompile kills: torchrun's
workers lead sessions of their own.  Each process a run starts carries the run's
token in its environment (``TCOMPILE_RUN``, set by runner.child_env and inherited by
everything below), so the run's processes are the ones whose environment holds it.
Before a hung run is killed, each of its distributed workers is asked for its Python
stack (child/hooks.py registers faulthandler on SIGUSR2 in processes with a
``WORLD_SIZE``): where every rank was waiting.

Parent side (tcompile's own process); Linux's /proc.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

RUN_ENV = "TCOMPILE_RUN"
STACK_SIGNAL = signal.SIGUSR2
STACK_PREFIX = "stack-"


def run_pids(token: str) -> list[int]:
    """The live processes (other than this one) whose environment holds ``token``."""
    needle = f"{RUN_ENV}={token}\0".encode()
    out = []
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if needle in f.read():
                    out.append(int(entry.name))
        except OSError:
            continue
    return out


def dump_stacks(token: str, run_dir: str, wait: float = 1.5) -> None:
    """Ask the run's distributed workers for their stacks (files ``stack-PID.txt``)."""
    asked = False
    for pid in run_pids(token):
        if Path(run_dir, f"{STACK_PREFIX}{pid}.txt").exists():
            try:
                os.kill(pid, STACK_SIGNAL)
                asked = True
            except OSError:
                pass
    if asked:
        time.sleep(wait)


def kill_run(token: str) -> int:
    """SIGKILL every process of the run; how many there were."""
    pids = run_pids(token)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(pids)


def stack_of(run_dir: str, pid: int) -> list[str]:
    """The main thread's frames, innermost first, as ``file:line in name``."""
    try:
        text = Path(run_dir, f"{STACK_PREFIX}{pid}.txt").read_text(errors="replace")
    except OSError:
        return []
    blocks = text.split("\n\n")
    block = next((b for b in reversed(blocks) if "Current thread" in b), None)
    if block is None:
        block = next((b for b in reversed(blocks) if b.strip()), "")
    frames = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith('File "'):
            path, _, rest = line[6:].partition('", line ')
            lineno, _, name = rest.partition(" in ")
            frames.append(f"{path}:{lineno} in {name}")
    return frames


def user_frame(frames: list[str]) -> str:
    """The innermost frame (``frames``: innermost first, as a stack dump lists them) that
    is the program's own code -- not torch's, tcompile's, a library's or Python's, each
    known by where it lives (owners.py)."""
    from .owners import innermost_user

    return innermost_user(list(reversed(frames))) or (frames[0] if frames else "")

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
import re
import signal
import time
from pathlib import Path
from typing import Any

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


def stuck_at_end(pids: set[Any], run_dir: str, window: float = 1.5) -> bool:
    """Each process of ``pids`` is alive, its main thread spent no CPU time over
    ``window`` seconds and runs no frame of the program's but its module's own (none at
    all: the interpreter is tearing down) -- its stack dumped on request (procs.py).
    The dump is asked for, and written, before the CPU time is first read: writing it
    costs the process a clock tick now and then, which read as "still working" and
    kept a stuck job running for minutes (seen with two jobs side by side)."""
    sizes = {}
    for pid in pids:
        path = Path(run_dir, f"{STACK_PREFIX}{pid}.txt")
        if not path.exists():  # no handler registered: the signal would kill it
            return False
        try:
            sizes[pid] = path.stat().st_size  # the dump asked now is what comes after
            os.kill(int(pid), STACK_SIGNAL)
        except (OSError, ValueError, TypeError):
            return False
    deadline = time.monotonic() + window
    while time.monotonic() < deadline and not all(
        _size(Path(run_dir, f"{STACK_PREFIX}{pid}.txt")) > sizes[pid] for pid in pids
    ):
        time.sleep(0.05)
    time.sleep(0.1)  # the handler's last lines
    before = {pid: _cpu_ticks(pid) for pid in pids}
    if any(t is None for t in before.values()):
        return False  # gone, or not ours to read: not known to be stuck
    time.sleep(window)
    for pid in pids:
        if _cpu_ticks(pid) != before[pid]:
            return False  # still working
        with open(Path(run_dir, f"{STACK_PREFIX}{pid}.txt"), "rb") as f:
            f.seek(sizes[pid])
            text = f.read().decode(errors="replace")
        if not text.strip() or not _at_its_end(text):
            return False  # no dump to read, or the program's own code still runs
    return True


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _at_its_end(dump: str) -> bool:
    """A faulthandler dump of every thread: no thread runs a frame of the program's own
    code but a module's, and the thread at module level has nothing above it."""
    from .owners import is_user

    for block in dump.split("\n\n"):
        frames = re.findall(r'File "(.+?)", line \d+ in (\S+)', block)
        if any(is_user(path) and name != "<module>" for path, name in frames):
            return False
        if any(name == "<module>" for _, name in frames) and len(frames) > 1:
            return False
    return True


def _cpu_ticks(pid: Any) -> int | None:
    """The CPU time of the process's main thread: gloo's own threads (its TCP loop, its
    run loop) keep waking up and spend a tick now and then while the main thread
    waits forever in the process group's destructor."""
    try:
        with open(f"/proc/{int(pid)}/task/{int(pid)}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, ValueError, IndexError, TypeError):
        return None

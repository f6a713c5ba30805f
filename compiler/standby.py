"""Workers started while the baseline runs (issue 61 item 3).

A bisect or minify from a capture judges the captured graph in a launcher worker
(protocol.LAUNCHER_WORKER): a fresh interpreter that imports torch and inductor (4 s on
two loaded cores, more with CUDA and Triton) before it loads the graph.  That start
used to follow the baseline; now :func:`prewarm` starts a *standby* (child/standby.py)
as the baseline starts, and :class:`~tcompile.compiler.pool.WorkerPool` takes it
(:func:`take`) for its first launcher worker: the standby receives the environment a
fresh worker would have had and becomes one.

A standby is used only where it is the same as a fresh worker: the variables torch,
inductor, Dynamo and Triton read at import must be those the worker would have had;
otherwise it is killed and a fresh worker starts.  Standbys nobody took are killed
(:func:`close`), and each dies with tcompile (child/hooks.watch_parent).
``TCOMPILE_NO_STANDBY=1`` turns the mechanism off.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
from pathlib import Path

from .pool import WorkerDied, _Worker
from .protocol import LAUNCHER_WORKER, HookConfig
from .runner import SAFE_CACHE_ENV, child_env

FDS_ENV = "TCOMPILE_STANDBY_FDS"  # child/standby.FDS_ENV
OFF_ENV = "TCOMPILE_NO_STANDBY"
STANDBY_WORKER = "from tcompile.compiler.child.standby import standby; standby()"
# what torch, inductor, Dynamo and Triton read from the environment at import: a
# standby imported them under its own, so it serves only where those are the same
_IMPORT_READS = ("TORCH", "PYTORCH", "TRITON", "CUDA", "OMP_", "MKL_", "KMP_", "LD_")

_WAITING: list[tuple[_Worker, dict[str, str]]] = []  # a standby, the environment it has
_LOCK = threading.Lock()


def _env() -> dict[str, str]:
    # the user's PYTHONPATH stays (a fresh worker has it on sys.path too, after the
    # start-up hook's folder: this one installs the hooks itself)
    env = {k: v for k, v in os.environ.items() if k != "TCOMPILE_CONFIG"}
    env.update(SAFE_CACHE_ENV)
    return env


def prewarm(log_dir: str | Path, n: int = 1) -> int:
    """Start ``n`` standbys (their logs in ``log_dir``); how many started."""
    if os.environ.get(OFF_ENV) == "1":
        return 0
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    started = 0
    for _ in range(n):
        with _LOCK:
            k = len(_WAITING) + 1
        env = _env()
        try:
            w = _Worker(
                [sys.executable, "-c", STANDBY_WORKER],
                None,
                Path(log_dir) / f"standby-{os.getpid()}-{k}.log",
                env,
                FDS_ENV,
                stdin_devnull=True,  # the program's stdin belongs to the baseline
            )
        except OSError:
            break
        with _LOCK:
            _WAITING.append((w, env))
        started += 1
    return started


def _same_imports(a: dict[str, str], b: dict[str, str]) -> bool:
    def reads(env: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if k.startswith(_IMPORT_READS)}

    return reads(a) == reads(b)


def take(
    command: list[str], config: HookConfig, env: dict[str, str], timeout: float
) -> _Worker | None:
    """A standby made a worker for ``command`` under ``config``, or None (none waits,
    the command is not a launcher's worker, its imports would differ, it died)."""
    if command[-1:] != [LAUNCHER_WORKER] or config.serve is None:
        return None
    while True:
        with _LOCK:
            if not _WAITING:
                return None
            w, had = _WAITING.pop(0)
        try:
            hello = w.wait_line(timeout)  # it may still be importing: the rest is saved
        except (TimeoutError, WorkerDied, ValueError):
            w.kill()
            continue
        fds = hello.get("fds")
        if not hello.get("standby") or not isinstance(fds, list):
            w.kill()
            continue
        serve = dataclasses.replace(config.serve, fds=fds)
        full = child_env(dataclasses.replace(config, serve=serve), env)
        if not _same_imports(full, had):
            w.kill()  # it has done nothing: nothing to wait for
            return None
        try:
            w.to_child.write(json.dumps({"env": full, "code": LAUNCHER_WORKER}) + "\n")
        except (OSError, ValueError):
            w.kill()
            continue
        return w


def close() -> None:
    """Stop the standbys nobody took."""
    with _LOCK:
        left = list(_WAITING)
        _WAITING.clear()
    for w, _ in left:
        w.kill()  # it has done nothing: nothing to wait for

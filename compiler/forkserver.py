"""Candidate programs forked from a process that has imported torch already
(program-level minify, DESIGN.md mechanism 12).

A candidate run spends about half its time importing torch, TorchDynamo and inductor
(measured on this project's 2-core machine: 15 of 29 s for a compiled candidate, most of
the 11 s of its run without torch.compile).  A fork server imports them once; each
candidate is a fork of it that sets the run's environment, installs tcompile's hooks as
the start-up hook would, and runs the script as ``__main__`` in a session of its own.
Events, markers and stderr go where a fresh run's go, so the result is the same
``ProcessResult``.

What a fork does not give a fresh run -- modules imported before the program's own
``import torch`` (and the configuration torch read from the environment then) -- is
checked, not assumed: the oracle runs the original program through the server once and
uses it only when that run fails exactly as the fresh baseline did
(repro/jobs/program_job.py).  Baselines and the final verification always run fresh.

Parent side (here): ``ForkServer`` (one request at a time; a pool holds several).
Server side: ``python -m tcompile.compiler.child.forkserve``: JSON lines on
stdin/stdout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any

from . import layout
from .procs import kill_run
from .protocol import HookConfig, read_events, read_markers
from .runner import SAFE_CACHE_ENV, ProcessResult, child_env


class ForkServer:
    """One server process; ``run`` forks one candidate and waits for it."""

    def __init__(self, env: dict[str, str] | None = None, *, wait: bool = True) -> None:
        import queue

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tcompile.compiler.child.forkserve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env if env is not None else {**os.environ, **SAFE_CACHE_ENV},
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        """Until the server has imported torch (a pool starts all, then waits)."""
        ready = self._read(timeout=300)
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the fork server did not start: {ready}")

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self._lines.put(line)
        self._lines.put("")  # the server is gone

    def _read(self, timeout: float | None) -> dict[str, Any] | None:
        import queue

        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if not line:
            self._lines.put("")  # gone for every later read too
            return None
        return json.loads(line)

    def run(
        self,
        script: str,
        argv: list[str],
        config: HookConfig,
        *,
        timeout: float,
        cwd: str,
        extra_path: list[str],
        extra_env: dict[str, str] | None = None,
    ) -> ProcessResult:
        os.makedirs(config.dir, exist_ok=True)
        stderr = os.path.join(config.dir, layout.STDERR)
        env = {**child_env(config, extra_path=extra_path), **(extra_env or {})}
        request = {"script": script, "argv": argv, "cwd": cwd, "env": env, "stderr": stderr}
        t0 = time.monotonic()
        self.proc.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        started = self._read(timeout=60)
        if not started or "pid" not in started:
            raise RuntimeError("the fork server did not fork")
        pid = started["pid"]
        done = self._read(timeout=timeout)
        timed_out = done is None
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            done = self._read(timeout=30)
        kill_run(config.dir)  # anything the candidate started (its env carries the run)
        if not done or "status" not in done:
            raise RuntimeError("the fork server lost a candidate")
        try:
            with open(stderr, errors="replace") as f:
                tail = list(deque(f, maxlen=60))
        except OSError:
            tail = []
        return ProcessResult(
            returncode=done["status"],
            seconds=time.monotonic() - t0,
            timed_out=timed_out,
            stderr_tail=[ln.rstrip("\n") for ln in tail],
            events=read_events(config.dir),
            markers=read_markers(config.dir),
            run_dir=config.dir,
        )

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()


class ForkPool:
    """``size`` servers; ``run`` takes a free one (thread-safe)."""

    def __init__(self, size: int, env: dict[str, str] | None = None) -> None:
        self._free: list[ForkServer] = []
        self._all: list[ForkServer] = []  # free or running a candidate
        self._closed = False
        self._cv = threading.Condition()
        try:  # the servers import torch side by side
            for _ in range(max(1, size)):
                self._free.append(ForkServer(env, wait=False))
                self._all.append(self._free[-1])
            for server in self._free:
                server.wait_ready()
        except Exception:
            self.close()
            raise

    def run(self, *args: Any, **kw: Any) -> ProcessResult:
        with self._cv:
            while not self._free and not self._closed:
                self._cv.wait()
            if self._closed:
                raise RuntimeError("the fork pool is closed")
            server = self._free.pop()
        try:
            return server.run(*args, **kw)
        finally:
            with self._cv:
                if not self._closed:
                    self._free.append(server)
                    self._cv.notify()

    def close(self) -> None:
        """Every server, a running one too (its candidate's run then raises
        RuntimeError: the server lost it)."""
        with self._cv:
            self._closed = True
            servers, self._all, self._free = self._all, [], []
            self._cv.notify_all()
        for s in servers:
            s.close()

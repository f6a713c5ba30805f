"""The worker that judges candidate sources of a recorded frame, from tcompile's side
(the other side is child/capture_worker.py).

One worker, started from the record (it imports torch and unpickles the frame once),
answers one request at a time.  A worker that dies (a candidate that crashes the
interpreter) or hangs is killed and replaced, and that candidate's verdict is CRASH or
TIMEOUT: never "same failure".
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from tcompile.minifier.verdict import Verdict

from .pool import WorkerDied, _Worker
from .protocol import CAPTURE_WORKER
from .signature import FailureSignature

FDS_ENV = "TCOMPILE_CAPTURE_FDS"  # child/capture_worker.FDS_ENV


class CaptureWorkerError(RuntimeError):
    """The worker could not start from the record (its last words attached)."""


class CapturePool:
    def __init__(
        self,
        record: str,
        sha256: str | None,
        work_dir: str,
        target: FailureSignature,
        *,
        backend: str | None = None,
        startup_timeout: float = 600.0,
    ) -> None:
        self.command = [sys.executable, "-c", CAPTURE_WORKER, record, sha256 or "-"]
        self.dir = Path(work_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.target = target
        self.backend = backend
        self.startup_timeout = startup_timeout
        self.timeout = 300.0  # per request; calibrated after the first answers
        self.restarts = 0
        self.calls = 0
        self.ready: dict[str, Any] = {}
        self._worker: _Worker | None = None
        self._spawned = 0
        self._durations: list[float] = []
        self._entries: list[dict[str, Any]] | None = None

    def _spawn(self) -> _Worker:
        self._spawned += 1
        env = dict(os.environ)
        env.pop("TCOMPILE_CONFIG", None)  # no hooks: it compiles candidates itself
        w = _Worker(
            self.command, None, self.dir / f"capture-worker-{self._spawned}.log", env, FDS_ENV
        )
        try:
            msg = w.wait_line(self.startup_timeout)
        except (TimeoutError, WorkerDied):
            w.kill()
            tail = "\n".join(w.tail(12))
            raise CaptureWorkerError(
                "the worker could not rebuild the recorded frame" + (f":\n{tail}" if tail else "")
            ) from None
        if not msg.get("ready"):
            w.kill()
            raise CaptureWorkerError(f"unexpected message from the worker: {msg}")
        self.ready = msg
        if self._entries is not None:  # a replacement knows the callees again
            self._ask(w, {"op": "entries", "user_stack": self._user_stack})
        return w

    def start(self) -> dict[str, Any]:
        self._worker = self._spawn()
        return self.ready

    def _ask(self, w: _Worker, req: dict[str, Any]) -> dict[str, Any]:
        import json

        w.to_child.write(json.dumps(req) + "\n")
        return w.wait_line(self.timeout)

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        """One request; a dead or hung worker is replaced and the answer says so."""
        if self._worker is None:
            self._worker = self._spawn()
        t0 = time.monotonic()
        try:
            reply = self._ask(self._worker, req)
        except TimeoutError:
            self._replace()
            return {"verdict": Verdict.TIMEOUT.value}
        except (WorkerDied, OSError, ValueError):
            self._replace()
            return {"verdict": Verdict.CRASH.value}
        self._durations.append(time.monotonic() - t0)
        if len(self._durations) == 3:  # a hang must not stall the search
            self.timeout = max(60.0, 10 * max(self._durations))
        return reply

    def _replace(self) -> None:
        if self._worker is not None:
            self._worker.kill()
        self.restarts += 1
        self._worker = None

    def entries(self, user_stack: list[str]) -> list[dict[str, Any]]:
        """Entry 0 (the recorded frame) and the user functions it calls."""
        self._user_stack = user_stack
        reply = self.request({"op": "entries", "user_stack": user_stack})
        self._entries = reply.get("entries") or [dict(self.ready, entry=0)]
        return self._entries

    def judge(self, entry: int, source: str) -> tuple[Verdict, dict[str, Any] | None]:
        self.calls += 1
        reply = self.request(
            {"op": "judge", "entry": entry, "source": source, "backend": self.backend}
        )
        verdict = Verdict(reply.get("verdict", Verdict.INVALID.value))
        return verdict, reply.get("signature")

    def info(self, entry: int) -> dict[str, Any]:
        return self.request({"op": "info", "entry": entry})

    def values(self, entry: int, source: str) -> dict[str, Any]:
        return self.request({"op": "values", "entry": entry, "source": source}).get("values") or {}

    def describe(self, entry: int, source: str) -> dict[str, Any]:
        return self.request({"op": "describe", "entry": entry, "source": source})

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

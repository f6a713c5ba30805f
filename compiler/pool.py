"""Persistent isolated workers for judging candidates (DESIGN.md mechanism 7).

A worker is the user's command run once more under the hooks, told to stop at the
first call of graph N.  There it saves the graph and its real inputs (the capture),
then answers requests on two pipes (child/serve.py).  It imports torch once and keeps
every bit of the program's state; fork would be cheaper but is unsafe once OpenMP has
run (a forked child hangs on its first parallel region).

:class:`WorkerPool`, in tcompile's process, keeps up to ``jobs`` workers.  A worker that
dies (a C++ throw in generated code aborts it), hangs past the timeout, or stops
answering is killed with its process group and replaced; the candidate's verdict is
then CRASH or TIMEOUT with a signature made exactly as ``tcompile run`` makes them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.minifier.verdict import Verdict

from .crash import crash_signature
from .graph_io import save_graph
from .protocol import HookConfig, read_events, read_markers
from .pycache import helper_env
from .runner import PARENT_ENV, STDIN, ProcessResult, child_env, parent_identity
from .signature import FailureKind, FailureSignature

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import torch


# ---- parent side -----------------------------------------------------------------
class WorkerDied(Exception):
    pass


class NotServed(RuntimeError):
    """The first worker ended without serving a graph: what it did is the program's
    run, to be classified (``result``)."""

    def __init__(self, message: str, result: ProcessResult) -> None:
        super().__init__(message)
        self.result = result


class _Worker:
    """A child answering JSON lines on two pipes: under the hooks with ``config`` (the
    pipes in its serve spec), or, with ``fds_env``, a plain interpreter told its pipes
    in that variable (it still dies with tcompile: child/hooks.watch_parent)."""

    def __init__(
        self,
        command: list[str],
        config: HookConfig | None,
        log: Path,
        env: dict[str, str],
        fds_env: str | None = None,
        *,
        stdin_devnull: bool = False,
    ) -> None:
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        if config is not None:
            assert config.serve is not None, "a pool's worker serves a graph"
            serve = dataclasses.replace(config.serve, fds=[p2c_r, c2p_w])
            full_env = child_env(dataclasses.replace(config, serve=serve), env)
        else:
            full_env = dict(env)
            full_env[PARENT_ENV] = parent_identity()
            full_env[fds_env or "TCOMPILE_FDS"] = f"{p2c_r},{c2p_w}"
        full_env = helper_env(full_env)  # its bytecode cached where the env forbids writing it
        self.log = log
        self._logf = open(log, "wb")
        # the program's stdin, as its first run read it (a standby starts while that run
        # reads it: it gets none, and needs none)
        stdin, feed = (subprocess.DEVNULL, None) if stdin_devnull else STDIN.for_run()
        self.proc = subprocess.Popen(
            command,
            env=full_env,
            stdin=stdin,
            stdout=self._logf,
            stderr=subprocess.STDOUT,
            pass_fds=(p2c_r, c2p_w),
            start_new_session=True,
        )
        if feed is not None:
            feed(self.proc)
        os.close(p2c_r)
        os.close(c2p_w)
        self.to_child = os.fdopen(p2c_w, "w", buffering=1)
        self.from_child = os.fdopen(c2p_r, "r")
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.started = time.monotonic()

    def _read(self) -> None:
        try:
            for line in self.from_child:
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        self._lines.put(None)

    def wait_line(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            raise WorkerDied
        return json.loads(line)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.to_child, self.from_child, self._logf):
            try:
                f.close()
            except OSError:
                pass

    def stop(self) -> None:
        try:
            self.to_child.write(json.dumps({"stop": True}) + "\n")
            self.proc.wait(timeout=10)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def tail(self, n: int = 60) -> list[str]:
        try:
            return self.log.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return []


class WorkerPool:
    """Up to ``jobs`` paused copies of the user's program, judging candidates."""

    def __init__(
        self,
        command: list[str],
        config: HookConfig,
        *,
        jobs: int,
        work_dir: str,
        target: FailureSignature,
        startup_timeout: float = 900.0,
        env: dict[str, str] | None = None,
        standby: Callable[[list[str], HookConfig, dict[str, str], float], _Worker | None]
        | None = None,
    ) -> None:
        """``standby``: gives a worker started ahead (compiler/standby.take), or None."""
        self.command = command
        self.standby = standby
        self.config = config
        self.jobs = max(1, jobs)
        self.dir = Path(work_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.target = target
        self.startup_timeout = startup_timeout
        self.env = dict(os.environ if env is None else env)
        self.timeout = 600.0  # per candidate; calibrated after the first answers
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._spawned = 0
        self._counter = 0
        self.restarts = 0
        self.retried = 0  # candidates judged again after running past the limit
        self._durations: list[float] = []
        self.ready: dict[str, Any] = {}
        self.from_standby = 0  # workers that were standbys (started ahead)

    def retarget(self, target: FailureSignature) -> None:
        """Judge another capture's failure from now on (each request then says which:
        serve.py's ``retarget``); the time limit is calibrated again on its answers."""
        self.target = target
        self.timeout = 600.0
        self._durations = []

    def _spawn(self) -> _Worker:
        with self._lock:
            self._spawned += 1
            n = self._spawned
        w = None
        if self.standby is not None:
            w = self.standby(self.command, self.config, self.env, self.startup_timeout)
            self.from_standby += w is not None
        if w is None:
            w = _Worker(self.command, self.config, self.dir / f"worker-{n}.log", self.env)
        with self._lock:
            self._all.append(w)
        t0 = time.monotonic()
        try:
            msg = w.wait_line(self.startup_timeout)
        except (TimeoutError, WorkerDied) as exc:
            timed_out = isinstance(exc, TimeoutError)
            w.kill()
            if self.config.serve is not None and self.config.serve.first_failure:
                result = ProcessResult(
                    returncode=w.proc.returncode,
                    seconds=time.monotonic() - t0,
                    timed_out=timed_out,
                    stderr_tail=w.tail(60),
                    events=read_events(self.config.dir),
                    markers=read_markers(self.config.dir),
                    run_dir=self.config.dir,
                )
                raise NotServed("the program met no failure a worker could serve", result) from None
            tail = "\n".join(w.tail(20))
            raise RuntimeError(
                "a worker did not reach the failing graph (the program did not get there again)"
                + (f":\n{tail}" if tail else "")
            ) from None
        if not msg.get("ready"):
            w.kill()
            raise RuntimeError(f"unexpected message from worker: {msg}")
        self.ready = msg
        return w

    def start(self) -> dict[str, Any]:
        """Start the first worker (it writes the capture) and wait for it; its ready
        message (which graph it serves, and the failure, when it chose)."""
        self._idle.put(self._spawn())
        if self.config.serve is not None and self.config.serve.first_failure:
            # the next workers serve the graph the first one chose, as it chose it
            msg = self.ready
            serve = dataclasses.replace(
                self.config.serve,
                first_failure=False,
                match=None,
                graph=msg["graph"],
                signature=msg["signature"],
                graph_kind=msg.get("graph_kind"),
            )
            self.config = dataclasses.replace(self.config, serve=serve)
            self.target = FailureSignature.from_json(msg["signature"])
        return self.ready

    def _acquire(self) -> _Worker:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            can_spawn = len([w for w in self._all if w.proc.poll() is None]) < self.jobs
        if can_spawn:
            return self._spawn()
        return self._idle.get()

    def analyze(self, gm: torch.fx.GraphModule, inputs: Sequence[object]) -> dict[str, Any]:
        """Where ``gm``'s values first go wrong, in which kernel, and the numerics
        switches the worker's torch has (child/numerics.py)."""
        import torch

        with self._lock:
            self._counter += 1
            n = self._counter
        gpath, ipath = self.dir / f"an-{n}.graph.pt", self.dir / f"an-{n}.inputs.pt"
        save_graph(gm, gpath)
        torch.save(inputs, ipath)
        w = self._acquire()
        try:
            w.to_child.write(
                json.dumps({"id": n, "graph": str(gpath), "inputs": str(ipath), "analyze": True})
                + "\n"
            )
            reply = w.wait_line(max(self.timeout, 600.0))
        except (TimeoutError, WorkerDied, OSError, ValueError) as exc:
            w.kill()
            self.restarts += 1
            return {"node": None, "why": f"the worker did not answer: {type(exc).__name__}"}
        finally:
            for p in (gpath, ipath):
                p.unlink(missing_ok=True)
        self._idle.put(w)
        return reply.get("analysis") or {}

    def evaluate(
        self,
        gm: torch.fx.GraphModule,
        inputs: Sequence[object],
        patch: Mapping[str, object] | None = None,
        *,
        request: Mapping[str, object] | None = None,
        reply_out: dict[str, object] | None = None,
    ) -> tuple[Verdict, dict[str, Any] | None]:
        """The verdict on ``gm``; ``request``: more of the request (a bisect's
        ``stage`` and ``bisect``), ``reply_out``: filled with the whole reply.

        Timing never decides a verdict (issue 64): a candidate that ran past the
        calibrated limit -- a busy machine makes every compile slower -- is judged again
        on a fresh worker with three times the limit before it is a TIMEOUT; the retries
        are counted (``retried``).  A failure that is itself a hang is judged at once."""
        verdict, sig = self._evaluate(gm, inputs, patch, request, reply_out, self.timeout)
        if verdict is Verdict.TIMEOUT and self.target.kind != FailureKind.TIMEOUT.value:
            with self._lock:
                self.retried += 1
            verdict, sig = self._evaluate(gm, inputs, patch, request, reply_out, 3 * self.timeout)
        return verdict, sig

    def _evaluate(
        self,
        gm: torch.fx.GraphModule,
        inputs: Sequence[object],
        patch: Mapping[str, object] | None,
        request: Mapping[str, object] | None,
        reply_out: dict[str, object] | None,
        timeout: float,
    ) -> tuple[Verdict, dict[str, Any] | None]:
        import torch

        with self._lock:
            self._counter += 1
            n = self._counter
        gpath, ipath = self.dir / f"cand-{n}.graph.pt", self.dir / f"cand-{n}.inputs.pt"
        save_graph(gm, gpath)
        torch.save(inputs, ipath)
        w = self._acquire()
        t0 = time.monotonic()
        try:
            req = {**(request or {}), "id": n, "graph": str(gpath), "inputs": str(ipath)}
            if patch:
                req["patch"] = patch
            w.to_child.write(json.dumps(req) + "\n")
            reply = w.wait_line(timeout)
        except TimeoutError:
            w.kill()
            self.restarts += 1
            sig = FailureSignature(
                self.target.stage,
                FailureKind.TIMEOUT.value,
                "Timeout",
                "the command ran past --timeout",
            )
            return _verdict_for(sig, self.target), sig.to_json()
        except (WorkerDied, OSError, ValueError):
            w.proc.wait(timeout=30)
            sig = crash_signature(self.target.stage, w.proc.returncode, w.tail())
            w.kill()
            self.restarts += 1
            return _verdict_for(sig, self.target), sig.to_json()
        finally:
            for p in (gpath, ipath):
                p.unlink(missing_ok=True)
        self._durations.append(time.monotonic() - t0)
        if len(self._durations) == 3:  # calibrate: generous, but a hang must not stall us
            self.timeout = max(60.0, 10 * max(self._durations))
        if reply.get("retire"):  # its CUDA context is dead: replace it
            w.kill()
            self.restarts += 1
        else:
            self._idle.put(w)
        if reply_out is not None:
            reply_out.update(reply)
        verdict = Verdict(reply["verdict"])
        if (
            verdict is Verdict.OTHER_FAILURE
            and (reply.get("signature") or {}).get("kind") == "crash"
        ):
            verdict = Verdict.CRASH
        return verdict, reply.get("signature")

    def close(self) -> None:
        for w in list(self._all):
            if w.proc.poll() is None:
                w.stop()
            else:
                w.kill()


def _verdict_for(sig: FailureSignature, target: FailureSignature) -> Verdict:
    """A worker that died or hung: the same failure, or a crash / timeout of its own."""
    if sig.matches(target):
        return Verdict.SAME_FAILURE
    if sig.kind == FailureKind.CRASH.value:
        return Verdict.CRASH
    if sig.kind == FailureKind.TIMEOUT.value:
        return Verdict.TIMEOUT
    return Verdict.OTHER_FAILURE


# A pool one job hands to the next in the same process: ``tcompile report``'s bisect
# judged the baseline's capture in a worker, and the minify of that capture that follows
# is served by the same worker (one worker start less: issue 61, item 3).  Keyed by what
# the worker serves (its launcher data: the capture, the signature, the accuracy check),
# so a pool is only ever taken by a job that would have started the same worker.
_PARKED: dict[str, WorkerPool] = {}


def park(key: str, pool: WorkerPool) -> None:
    """Keep ``pool`` running for the next job that serves ``key``."""
    old = _PARKED.pop(key, None)
    if old is not None and old is not pool:
        old.close()
    _PARKED[key] = pool


def take(key: str) -> WorkerPool | None:
    """The pool a job parked for ``key`` (its workers alive), or None."""
    pool = _PARKED.pop(key, None)
    if pool is not None and not any(w.proc.poll() is None for w in pool._all):
        pool.close()  # its workers are gone: a fresh pool starts instead
        return None
    return pool


def close_parked() -> None:
    """Close what no job took (the end of a report)."""
    while _PARKED:
        _PARKED.popitem()[1].close()

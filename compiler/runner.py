"""Running a command under the hooks, once (the parent side of the protocol).

The command runs in its own process group (so ``--timeout`` and Ctrl-C kill
everything it spawned), with the bootstrap folder first on ``PYTHONPATH`` and the
hook config in ``TCOMPILE_CONFIG``.  Its stdout and stderr pass through; stderr is
also kept (the last lines) to name a crash.  Results come back as events (protocol.py);
classify.py turns them into graphs and failures.

Caches that cannot lie (DESIGN.md mechanism 4): inductor's FX-graph and AOTAutograd
caches, which key on graph and config and can serve an artifact built under other
settings, live in a private directory per run (child/hooks.py), so they start cold
and behave within the run as in the program (a bug of those caches shows); remote
caches are off; the kernel code caches, keyed by the generated source itself, stay
(a cached kernel *is* the code the current settings generate).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from . import layout
from .exitcodes import UsageError
from .observer import NullObserver, Observer
from .procs import RUN_ENV, dump_stacks, kill_run, stuck_at_end
from .protocol import CONFIG_ENV, Event, HookConfig, Marker, read_events, read_markers
from .stdin import STDIN

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent / "bootstrap")

SAFE_CACHE_ENV = {
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "0",
}


@dataclasses.dataclass
class ProcessResult:
    returncode: int | None
    seconds: float
    timed_out: bool
    stderr_tail: list[str]
    events: list[dict[str, Any]]
    markers: dict[int, Marker]
    run_dir: str
    # the CPU seconds the command used (os.wait4), where known: work, not wall time
    cpu_seconds: float | None = None
    # ranks that had torn their process group down, and whose code had returned, but
    # never exited were ended (hung_ranks: which)
    teardown_hang: bool = False
    hung_ranks: list[int] = dataclasses.field(default_factory=list)
    stuck_pids: list[Any] = dataclasses.field(default_factory=list)  # stuck at their end
    stdout_tail: list[str] = dataclasses.field(default_factory=list)  # the program's own

    def outcome(self) -> dict[str, Any]:
        """How the program ended, as a person running it plainly sees it: its exit
        status, the exception line its traceback ends with, the last line it printed."""
        return program_outcome(self.returncode, self.stdout_tail, self.stderr_tail)


def program_outcome(returncode: int | None, stdout: list[str], stderr: list[str]) -> dict[str, Any]:
    """``{"returncode", "exception", "last_line"}`` from a run's output (the same reading
    for a run under tcompile and a plain one: tests/e2e/test_differential.py compares them)."""
    out = [ln for ln in stdout if ln.strip()]
    err = [ln for ln in stderr if ln.strip()]
    exception = None
    if any(ln.startswith("Traceback (most recent call last)") for ln in err):
        last = (
            len(err)
            - 1
            - next(i for i, ln in enumerate(reversed(err)) if ln.startswith("Traceback (most"))
        )
        after = [ln for ln in err[last + 1 :] if not ln.startswith((" ", "\t"))]
        exception = after[0] if after else None  # the line after the frames
    return {
        "returncode": returncode,
        "exception": exception,
        "last_line": out[-1] if out else None,
    }


def check_script(path: str) -> None:
    """Missing, unreadable, a directory, or not Python: a usage error, said in one line."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"script not found: {path}")
    if p.is_dir():
        raise UsageError(f"{path} is a directory, not a script")
    try:
        source = p.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        compile(source, str(p), "exec")
    except SyntaxError as exc:
        raise UsageError(
            f"the script has a syntax error (the script's problem, not tcompile's): "
            f"{path}:{exc.lineno}: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise UsageError(f"{path} is not a Python script: {exc}") from None


def check_backend(name: str | None) -> None:
    if name is None:
        return
    from .stack import known_backend_names

    names = known_backend_names()
    if name not in names:
        raise UsageError(
            f"unknown backend {name!r}; known: {', '.join(n for n in names if not n.startswith('relu_'))}"
        )


def is_distributed_launch(command: list[str]) -> bool:
    """``torchrun ...`` or ``python -m torch.distributed.run ...``: the command starts
    workers of its own (each one a rank), which do not inherit tcompile's pipes."""
    if not command:
        return False
    if os.path.basename(command[0]) == "torchrun":
        return True
    return any(
        a == "-m" and b in ("torch.distributed.run", "torch.distributed.launch")
        for a, b in zip(command, command[1:])
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# torchrun's options that say where its rendezvous is (or that it picks a port itself)
_ENDPOINT_OPTIONS = ("--master-port", "--master_port", "--rdzv-endpoint", "--rdzv_endpoint",
                     "--standalone", "--nnodes")  # fmt: skip


def on_own_port(command: list[str]) -> list[str]:
    """A one-node torchrun command that names no port of its own, given a free one
    (``--master-port``): tcompile runs the job several times, sometimes side by side
    (triage's jobs, bisect's probes, two tcompile commands), and two jobs on torchrun's
    default port 29500 join each other's rendezvous and wait out its 300-second timeout.
    A command that names its endpoint, its node count or ``--standalone`` is the user's
    to keep: several nodes must meet where they were told to."""
    if not is_distributed_launch(command) or any(a.startswith(_ENDPOINT_OPTIONS) for a in command):
        return command
    at = 1 if os.path.basename(command[0]) == "torchrun" else command.index("-m") + 2
    return [*command[:at], f"--master-port={free_port()}", *command[at:]]


PARENT_ENV = "TCOMPILE_PARENT"
# set on Ctrl-C / SIGTERM: runs in other threads (bisect's parallel probes) stop too
CANCEL = threading.Event()


def parent_identity(pid: int | None = None) -> str:
    """``pid:start-time`` of a process (tcompile's own by default): a child checks that
    this very process is alive, not merely some process that reused its pid."""
    pid = os.getpid() if pid is None else pid
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            start = f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        start = "?"
    return f"{pid}:{start}"


def child_env(
    config: HookConfig, base: dict[str, str] | None = None, extra_path: list[str] | None = None
) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env[PARENT_ENV] = parent_identity()  # children exit when tcompile is gone (child/hooks.py)
    if config.only:
        env["TORCHDYNAMO_DEBUG_FUNCTION"] = config.only  # Dynamo compiles only frames of that name
    if config.trace:
        env["TORCH_TRACE"] = config.trace  # torch's structured trace (trace.py)
    env[CONFIG_ENV] = config.to_env()
    env[RUN_ENV] = config.dir  # every process of the run, wherever it goes (procs.py)
    path = os.pathsep.join([*(extra_path or []), env.get("PYTHONPATH", "")]).strip(os.pathsep)
    env["PYTHONPATH"] = BOOTSTRAP_DIR + (os.pathsep + path if path else "")
    env.update(SAFE_CACHE_ENV)
    return env


def run_process(
    command: list[str],
    config: HookConfig,
    *,
    timeout: float | None = None,
    observer: Observer | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    cwd: str | None = None,
    extra_path: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> ProcessResult:
    """Run ``command`` once under the hooks; return what it said and how it ended.
    ``extra_path``: folders the program imports from (a copy of a script run from
    elsewhere still finds the modules beside the original); ``extra_env``: variables
    set for it (a launched job's world of one process: RANK, WORLD_SIZE, ...)."""
    observer = observer or NullObserver()
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    os.makedirs(config.dir, exist_ok=True)
    env = {**child_env(config, extra_path=extra_path), **(extra_env or {})}
    t0 = time.monotonic()
    stdin, feed = STDIN.for_run()
    try:
        proc = subprocess.Popen(
            on_own_port(command),
            env=env,
            cwd=cwd,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            text=True,
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        raise UsageError(f"cannot run {command[0]}: {exc.strerror or exc}") from None
    feed(proc)
    tail: deque[str] = deque(maxlen=400)  # a Dynamo error's traceback is long
    out_tail: deque[str] = deque(maxlen=5)
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, stdout, out_tail), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, stderr, tail), daemon=True),
    ]
    for t in pumps:
        t.start()
    reader = _EventTail(config.dir, observer)
    timed_out = teardown_hang = False
    hung: list[int] = []
    cpu: list[float] = []
    try:
        while True:
            try:
                _wait(proc, 0.25, cpu)
                break
            except subprocess.TimeoutExpired:
                stopped = reader.poll()
                if CANCEL.is_set():
                    raise KeyboardInterrupt from None
                if timeout is not None and time.monotonic() - t0 > timeout:
                    timed_out = True
                    dump_stacks(config.dir, config.dir)  # where each rank was waiting
                    _kill_job(proc, config.dir)
                    break
                if stopped:  # one process showed the failure: the rest are not needed
                    _kill_job(proc, config.dir)
                    break
                if reader.finished_ranks_hung():
                    # every rank tore its process group down and its code returned
                    # (the program's work is done) and some still have not exited:
                    # gloo's teardown deadlock
                    hung = reader.alive_ranks()
                    _kill_job(proc, config.dir)
                    teardown_hang = True
                    break
    except BaseException:
        _kill_job(proc, config.dir)
        raise
    finally:
        for t in pumps:
            t.join(timeout=5)
    reader.poll()
    _kill_job(proc, config.dir)  # anything the command left behind, in its group or not
    STDIN.ran()
    return ProcessResult(
        # the ranks that hung at teardown had finished: the job's own status is theirs
        returncode=0 if teardown_hang else proc.returncode,
        seconds=time.monotonic() - t0,
        cpu_seconds=cpu[0] if cpu else None,
        timed_out=timed_out,
        teardown_hang=teardown_hang,
        hung_ranks=hung,
        stuck_pids=sorted(reader.stuck, key=str),
        stderr_tail=list(tail),
        stdout_tail=list(out_tail),
        events=read_events(config.dir),
        markers=read_markers(config.dir),
        run_dir=config.dir,
    )


def _wait(proc: subprocess.Popen[str], timeout: float, cpu: list[float]) -> None:
    """``proc.wait(timeout)``, keeping the CPU seconds the command used (its own and its
    waited-for children's: os.wait4's usage) in ``cpu``: a measure of its work that a
    busy machine does not stretch as it stretches the wall clock (issue 64)."""
    end = time.monotonic() + timeout
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped already (by subprocess itself)
            proc.wait(timeout=max(0.0, end - time.monotonic()))
            return
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            cpu.append(usage.ru_utime + usage.ru_stime)
            return
        if time.monotonic() >= end:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        time.sleep(0.05)


def _pump(src: IO[str] | None, dst: IO[str], tail: deque[str] | None) -> None:
    if src is None:
        return
    for line in src:
        try:
            dst.write(line)
            dst.flush()
        except (OSError, ValueError):
            pass
        if tail is not None:
            tail.append(line.rstrip("\n"))


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_job(proc: subprocess.Popen[str], token: str) -> None:
    """The command's process group, and every process of the run outside it
    (torchrun's workers lead sessions of their own)."""
    _kill_group(proc)
    kill_run(token)
    proc.wait()


TEARDOWN_GRACE = 10.0  # seconds a rank may take to exit after destroying its group


def returned(exit_event: dict[str, object]) -> bool:
    """An EXIT event of a rank whose code returned: nothing raised, status 0."""
    return not exit_event.get("raised") and exit_event.get("code") in (0, None)


class _EventTail:
    """Reads new events as the child writes them, for live progress; notices when a
    process stopped at the failure, and when every rank tore its group down."""

    def __init__(self, run_dir: str, observer: Observer) -> None:
        self.run_dir = Path(run_dir)
        self.observer = observer
        self.offsets: dict[Path, int] = {}
        self.ranked: set[Any] = set()  # processes of a distributed job
        self.destroyed: set[Any] = set()  # ... that destroyed their process group
        self.returned: set[Any] = set()  # ... whose code returned (protocol.Event.EXIT)
        self.rank_of: dict[Any, int] = {}
        self.raised: set[Any] = set()  # ... whose code raised or exited failing
        self.last_asked = 0.0  # when the silent ranks were last asked for their stacks
        self.stuck: set[Any] = set()  # ... found stuck at their end (stuck_at_end)
        self.suspect: set[Any] = set()  # ... found so at the last ask (twice to be stuck)
        self.last_destroyed = 0.0

    def finished_ranks_hung(self) -> bool:
        """Every rank destroyed its process group and none raised, and a grace period
        later the job still runs: each rank either said, at exit, that its code returned
        (no uncaught exception, no ``sys.exit`` with a failing status), or is still
        alive and stuck at its end, found so twice a grace period apart -- its main
        thread blocked (no CPU time spent over a second and a half) with no frame of
        the program's running but its module's own (gloo's ProcessGroupGloo destructor
        hangs as ``main()`` returns and frees the DDP reducer: seen on CI).  A rank whose code failed, or that exited without saying
        how, is never ended here: the launcher reports it, as it would without tcompile
        (a rank's own failure after its teardown is the program's: issue 49)."""
        if not (
            self.ranked
            and self.ranked <= self.destroyed
            and not self.raised
            and time.monotonic() - self.last_destroyed > TEARDOWN_GRACE
        ):
            return False
        silent = self.ranked - self.returned
        if not silent:
            return True
        if time.monotonic() - self.last_asked < TEARDOWN_GRACE:
            return False
        self.last_asked = time.monotonic()
        if not stuck_at_end(silent, str(self.run_dir)):
            self.suspect = set()
            return False
        if self.suspect != silent:
            # found so once: asked again a grace period later.  A rank between its
            # code's end and saying so (an interpreter starting its exit on a loaded
            # machine) once looked stuck for a moment (seen in the suite under load)
            self.suspect = set(silent)
            return False
        self.stuck = set(silent)
        return True

    def _track(self, event: dict[str, Any]) -> None:
        if event.get("rank") is not None:
            self.ranked.add(event.get("pid"))
            self.rank_of[event.get("pid")] = int(event["rank"])
        if event.get("event") == Event.EXCEPTION and event.get("rank") is not None:
            self.raised.add(event.get("pid"))
        if event.get("event") == Event.GROUP_DESTROYED:
            self.destroyed.add(event.get("pid"))
            self.last_destroyed = time.monotonic()
        if event.get("event") == Event.EXIT:
            if returned(event):
                self.returned.add(event.get("pid"))
            else:
                self.raised.add(event.get("pid"))
            self.last_destroyed = time.monotonic()

    def alive_ranks(self) -> list[int]:
        """The ranks whose process still runs."""
        alive = []
        for pid, rank in self.rank_of.items():
            try:
                os.kill(int(pid), 0)
            except (ProcessLookupError, ValueError, TypeError):
                continue
            except PermissionError:
                pass
            alive.append(rank)
        return sorted(alive)

    def poll(self) -> bool:
        """Pass new events on; True once a process said it stopped at the failure."""
        stopped = False
        for path in sorted(self.run_dir.glob("events-*.jsonl")):
            offset = self.offsets.get(path, 0)
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            end = chunk.rfind("\n")
            if end < 0:
                continue
            self.offsets[path] = offset + len(chunk[: end + 1].encode("utf-8", errors="replace"))
            for line in chunk[: end + 1].splitlines():
                try:
                    event = json.loads(line)
                    stopped = stopped or event.get("event") == Event.STOPPED
                    self._track(event)
                    self.observer.event(event)
                except (json.JSONDecodeError, Exception):
                    continue
        return stopped


def command_args(command: list[str]) -> str:
    """The command as it goes after a tcompile command's options: ``SCRIPT ARGS`` for a
    script run with this Python, else ``-- COMMAND ARGS`` (for a next_command)."""
    import shlex

    if command and command[0] == sys.executable:
        return " ".join(shlex.quote(c) for c in command[1:])
    return "-- " + " ".join(shlex.quote(c) for c in command)


def new_run_dir(out: str | None, prefix: str = "run") -> str:
    """A fresh directory for one tcompile job: under ``out`` or a new temporary one.
    Always an absolute path: it is handed to processes that run elsewhere."""
    if out is None:
        return os.path.abspath(tempfile.mkdtemp(prefix=f"tcompile-{prefix}-"))
    base = Path(out).absolute()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {out}: {exc.strerror or exc}") from None
    if not os.access(base, os.W_OK):
        raise UsageError(f"--out {out} is not writable")
    for i in range(1, 10000):
        d = base / f"{prefix}-{i:03d}"
        try:
            d.mkdir()
            return str(d)
        except FileExistsError:
            continue
    raise UsageError(f"--out {out} holds too many runs")


def write_json(path: str | os.PathLike[str], data: object) -> None:
    """Write JSON atomically: a reader never sees half a file."""
    layout.write_file(path, json.dumps(data, indent=2, default=str))

"""The parent side of ``tcompile run``: run a command under the hooks, classify.

The command runs in its own process group (so ``--timeout`` and Ctrl-C kill
everything it spawned), with the bootstrap folder first on ``PYTHONPATH`` and the
hook config in ``TCOMPILE_CONFIG``.  Its stdout and stderr pass through; stderr is
also kept (the last lines) to name a crash.  Results come back as events (protocol.py).

Caches that cannot lie (DESIGN.md mechanism 4): inductor's FX-graph and AOTAutograd
caches, which key on graph and config and can serve an artifact built under other
settings, are forced off; the kernel code caches, keyed by the generated source
itself, stay (a cached kernel *is* the code the current settings generate).
"""

from __future__ import annotations

import dataclasses
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

from .observer import NullObserver, Observer
from .protocol import CONFIG_ENV, STOP_EXIT, HookConfig, read_events, read_markers
from .signature import FailureKind, FailureSignature, normalize_message

BOOTSTRAP_DIR = str(Path(__file__).resolve().parent / "bootstrap")

EXIT_OK = 0
EXIT_COMPILER_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_COMPILER = 3

SAFE_CACHE_ENV = {
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "0",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "0",
}


class UsageError(Exception):
    """Bad input from the user (exit 2)."""


@dataclasses.dataclass
class ProcessResult:
    returncode: int | None
    seconds: float
    timed_out: bool
    stderr_tail: list[str]
    events: list[dict[str, Any]]
    markers: dict[int, dict[str, Any]]
    run_dir: str


@dataclasses.dataclass
class RunReport:
    graphs: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    notes: list[dict[str, Any]]
    exit_code: int
    verdict: str  # "clean" | "compiler-failure" | "not-a-compiler-bug"
    explanation: str
    returncode: int | None
    seconds: float
    run_dir: str
    command: list[str]
    stage: str | None
    accuracy: str
    debug_index: list[dict[str, Any]] | None = None
    # frames that failed in Dynamo, recorded for `tcompile replay` (record.py)
    records: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
    from .stages import known_backend_names

    names = known_backend_names()
    if name not in names:
        raise UsageError(
            f"unknown backend {name!r}; known: {', '.join(n for n in names if not n.startswith('relu_'))}"
        )


def child_env(config: HookConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    if config.only:
        env["TORCHDYNAMO_DEBUG_FUNCTION"] = config.only  # Dynamo compiles only frames of that name
    env[CONFIG_ENV] = config.to_env()
    path = env.get("PYTHONPATH", "")
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
) -> ProcessResult:
    """Run ``command`` once under the hooks; return what it said and how it ended."""
    observer = observer or NullObserver()
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    os.makedirs(config.dir, exist_ok=True)
    env = child_env(config)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            text=True,
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        raise UsageError(f"cannot run {command[0]}: {exc.strerror or exc}") from None
    tail: deque[str] = deque(maxlen=60)
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, stdout, None), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, stderr, tail), daemon=True),
    ]
    for t in pumps:
        t.start()
    reader = _EventTail(config.dir, observer)
    timed_out = False
    try:
        while True:
            try:
                proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                reader.poll()
                if timeout is not None and time.monotonic() - t0 > timeout:
                    timed_out = True
                    _kill_group(proc)
                    proc.wait()
                    break
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    finally:
        for t in pumps:
            t.join(timeout=5)
    reader.poll()
    _kill_group(proc)  # anything the command left behind in its group
    return ProcessResult(
        returncode=proc.returncode,
        seconds=time.monotonic() - t0,
        timed_out=timed_out,
        stderr_tail=list(tail),
        events=read_events(config.dir),
        markers=read_markers(config.dir),
        run_dir=config.dir,
    )


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


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _EventTail:
    """Reads new events as the child writes them, for live progress."""

    def __init__(self, run_dir: str, observer: Observer) -> None:
        self.run_dir = Path(run_dir)
        self.observer = observer
        self.offsets: dict[Path, int] = {}

    def poll(self) -> None:
        import json

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
                    self.observer.event(json.loads(line))
                except (json.JSONDecodeError, Exception):
                    continue


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def collect(
    result: ProcessResult,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Graphs, failures and notes out of a finished process's events and markers.

    Failures that tcompile has not itself checked against eager (a capture failure the
    program died of, a crash or timeout outside any compiled graph) carry
    ``"unconfirmed": True``; :func:`run_and_classify` checks them with a plain run.
    """
    failures: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    multi = len({e.get("pid") for e in result.events if e.get("event") == "graph"}) > 1
    dynamo: dict[tuple[Any, Any], dict[str, Any]] = {}
    children: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for e in result.events:
        kind = e.get("event")
        pid = e.get("pid")
        if kind == "graph":
            g = {
                k: e.get(k)
                for k in (
                    "index",
                    "frame",
                    "kind",
                    "nodes",
                    "stage",
                    "compile_seconds",
                    "file",
                    "line",
                    "compile_id",
                    "break_reason",
                )
            }
            g.update(level="dynamo", gated=bool(e.get("gated")), failed=bool(e.get("failed")))
            if multi:
                g["pid"] = pid
            dynamo[(pid, e.get("index"))] = g
        elif kind == "aot_graph":
            g = {k: e.get(k) for k in ("index", "kind", "nodes", "stage", "compile_seconds")}
            g.update(level="aot", failed=bool(e.get("failed")))
            if multi:
                g["pid"] = pid
            children.setdefault((pid, e.get("index")), []).append(g)
        elif kind == "failure":
            failures.append(_failure_from_event(e, multi))
        elif kind == "note":
            notes.append({"graph": e.get("graph"), "text": e.get("text")})
        elif kind == "exception" and e.get("after_graph") is not None:
            # a sticky CUDA error the program died of, after graph N ran (hooks.py)
            graph = e["after_graph"]
            if any(f["graph"] == graph and f["kind"] == "crash" for f in failures):
                continue  # the graph itself already reported it
            raw = FailureSignature.from_json(e.get("signature") or {})
            sig = dataclasses.replace(raw, stage=e.get("after_stage") or "unknown")
            failures.append(
                {
                    "graph": graph,
                    "graph_kind": e.get("after_graph_kind") or "dynamo",
                    "kind": FailureKind.CRASH.value,
                    "stage": sig.stage,
                    "signature": str(sig),
                    "signature_fields": sig.to_json(),
                    "message": (e.get("message") or "")
                    + f"\n(reported at a later synchronisation; graph {graph} ran last)",
                    "frame": sig.frame,
                    "unconfirmed": True,
                    **({"pid": pid} if multi else {}),
                }
            )
        elif kind == "exception" and e.get("dynamo"):
            sig = FailureSignature.from_json(e.get("signature") or {})
            failures.append(
                {
                    "graph": None,
                    "graph_kind": "dynamo",
                    "kind": FailureKind.CAPTURE.value,
                    "stage": "eager",
                    "signature": str(sig),
                    "signature_fields": sig.to_json(),
                    "message": e.get("message", ""),
                    "frame": e.get("user_frame") or sig.frame,
                    "user_stack": e.get("user_stack") or [],
                    "record": e.get("record"),
                    "unconfirmed": True,
                    **({"pid": pid} if multi else {}),
                }
            )
    graphs: list[dict[str, Any]] = []
    for key in sorted(
        set(dynamo) | set(children), key=lambda k: (str(k[0]), k[1] if k[1] is not None else -1)
    ):
        parent = dynamo.get(key)
        if parent is not None:
            graphs.append(parent)
        for child in children.get(key, []):
            child["frame"] = parent["frame"] if parent else ""
            graphs.append(child)
    # A process that died (signal) or was killed (timeout) says nothing more: the
    # markers say which graph it was in.
    if result.timed_out or (result.returncode is not None and result.returncode < 0):
        busy = {
            pid: m for pid, m in result.markers.items() if m["graph"] >= 0 and m["phase"] != "idle"
        }
        kind = FailureKind.TIMEOUT if result.timed_out else FailureKind.CRASH
        if result.timed_out:
            exc_type, message = "Timeout", "the command ran past --timeout"
        else:
            exc_type = _signal_name(result.returncode or 0)
            message = _crash_message(result.stderr_tail) or f"process killed by {exc_type}"
        targets = list(busy.items()) or [
            (None, {"graph": None, "phase": "", "graph_kind": "dynamo"})
        ]
        for pid, m in targets:
            g = dynamo.get((pid, m["graph"])) or next(
                (d for (p, i), d in dynamo.items() if i == m["graph"]), None
            )
            stage = g["stage"] if g else "unknown"
            sig = FailureSignature(
                stage=stage, kind=kind.value, exc_type=exc_type, message=normalize_message(message)
            )
            failures.append(
                {
                    "graph": m["graph"],
                    "graph_kind": m["graph_kind"],
                    "kind": kind.value,
                    "stage": stage,
                    "signature": str(sig),
                    "signature_fields": sig.to_json(),
                    "message": message,
                    "phase": m["phase"],
                    "frame": f"{m['phase']} of graph {m['graph']}"
                    if m["graph"] is not None
                    else "",
                    "unconfirmed": m["graph"] is None,
                }
            )
    return graphs, failures, notes


def _failure_from_event(e: dict[str, Any], multi: bool) -> dict[str, Any]:
    sig = FailureSignature.from_json(e.get("signature") or {})
    out = {
        "graph": e.get("graph"),
        "graph_kind": e.get("graph_kind"),
        "kind": e.get("kind"),
        "stage": e.get("stage"),
        "signature": e.get("signature_text") or str(sig),
        "signature_fields": sig.to_json(),
        "message": e.get("message", ""),
        "frame": sig.frame,
    }
    if multi:
        out["pid"] = e.get("pid")
    return out


def _crash_message(tail: list[str]) -> str:
    """The line a dying process printed about why (e.g. ``terminate called ...``)."""
    keys = (
        "terminate called",
        "Segmentation fault",
        "Aborted",
        "Fatal Python error",
        "illegal memory",
    )
    hits = [line.strip() for line in tail if any(k in line for k in keys)]
    # later threads only say "terminate called recursively"
    informative = [h for h in hits if "recursively" not in h]
    return (informative or hits or [""])[0]


def _last_exception(result: ProcessResult) -> dict[str, Any] | None:
    exc = [e for e in result.events if e.get("event") == "exception"]
    return exc[-1] if exc else None


def _fails_the_same_way(compiled: ProcessResult, plain: ProcessResult) -> bool:
    """Same exit status, and the same exception (or the same cause Dynamo wrapped)."""
    if compiled.timed_out or plain.timed_out:
        return compiled.timed_out and plain.timed_out
    if plain.returncode in (0, None) or plain.returncode != compiled.returncode:
        return False
    first, second = _last_exception(compiled), _last_exception(plain)
    if first is None or second is None:
        return first is None and second is None
    theirs = FailureSignature.from_json(second["signature"])
    ours = [FailureSignature.from_json(first["signature"])]
    if first.get("cause_signature"):
        ours.append(FailureSignature.from_json(first["cause_signature"]))
    if any(
        o.exc_type.rsplit(".", 1)[-1] == theirs.exc_type.rsplit(".", 1)[-1]
        and o.message == theirs.message
        for o in ours
    ):
        return True
    # Dynamo hits the program's own error while tracing with fake tensors and words
    # it differently (TorchRuntimeError); the same failing line of code is the tell.
    where = _line_of(first.get("user_frame") or "")
    return bool(where) and where == _line_of(theirs.frame)


def _line_of(frame: str) -> str:
    """'path/to/linear.py:134 in forward' -> 'linear.py:134'."""
    head = frame.split(" in ", 1)[0].replace("\\", "/")
    return head.rsplit("/", 1)[-1] if ":" in head else ""


def new_run_dir(out: str | None, prefix: str = "run") -> str:
    """A fresh directory for one tcompile job: under ``out`` or a new temporary one."""
    if out is None:
        return tempfile.mkdtemp(prefix=f"tcompile-{prefix}-")
    base = Path(out)
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


def run_and_classify(
    command: list[str],
    *,
    out: str | None = None,
    stage: str | None = None,
    accuracy: str = "off",
    timeout: float | None = None,
    observer: Observer | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    gate: list[int] | None = None,
    bisect: dict[str, Any] | None = None,
    debug_dir: str | None = None,
    only: str | None = None,
    record: str = "failures",
    confirm: bool = True,
) -> RunReport:
    """``tcompile run``: the command under the wrapped stack, every graph, every failure."""
    observer = observer or NullObserver()
    run_dir = new_run_dir(out, "run")
    config = HookConfig(
        dir=os.path.join(run_dir, "compiled"),
        stage=stage,
        accuracy=accuracy,
        gate=gate,
        bisect=bisect,
        debug_dir=debug_dir,
        only=only,
        record=record,
    )
    observer.status("running the command under tcompile")
    result = run_process(
        command, config, timeout=timeout, observer=observer, stdout=stdout, stderr=stderr
    )
    graphs, failures, notes = collect(result)
    records = _gather_records(result, run_dir, failures)
    verdict, explanation, exit_code = "clean", "no compiler failure", EXIT_OK
    failed = result.timed_out or result.returncode not in (0, None, STOP_EXIT)
    confirmed = [f for f in failures if not f.get("unconfirmed")]
    if failed and not confirmed and confirm:
        # The command failed and nothing tcompile checked explains it.  Does it fail
        # the same way with torch.compile turned off?
        observer.status("the command failed: running it again without torch.compile")
        plain = HookConfig(dir=os.path.join(run_dir, "plain"), disable=True)
        again = run_process(
            command, plain, timeout=timeout, observer=NullObserver(), stdout=stdout, stderr=stderr
        )
        if _fails_the_same_way(result, again):
            first = _last_exception(result)
            what = (
                first["signature_text"]
                if first
                else ("timeout" if result.timed_out else f"exit status {result.returncode}")
            )
            verdict, exit_code = "not-a-compiler-bug", EXIT_NOT_COMPILER
            explanation = (
                f"the command fails the same way without torch.compile ({what}): not a compiler bug"
            )
            for f in failures:
                f["not_a_compiler_bug"] = True
            notes.append({"graph": None, "text": explanation})
            failures = []
        elif not failures:
            first = _last_exception(result)
            sig = (
                FailureSignature.from_json(first["signature"])
                if first
                else FailureSignature(
                    stage="unknown",
                    kind="runtime",
                    exc_type=f"exit status {result.returncode}",
                    message="",
                )
            )
            # surfaced outside any compiled graph (e.g. reading a CUDA-graph output that
            # a later replay overwrote): the stage is the one the program compiled with
            stages = {g["stage"] for g in graphs if g.get("level") == "dynamo" and not g["gated"]}
            program_stage = stages.pop() if len(stages) == 1 else "unknown"
            sig = dataclasses.replace(
                sig, stage=stage or program_stage, kind=FailureKind.RUNTIME.value
            )
            failures.append(
                {
                    "graph": None,
                    "graph_kind": "dynamo",
                    "kind": FailureKind.RUNTIME.value,
                    "stage": sig.stage,
                    "signature": str(sig),
                    "signature_fields": sig.to_json(),
                    "message": first["message"] if first else "\n".join(result.stderr_tail[-5:]),
                    "frame": sig.frame,
                }
            )
    for f in failures:
        f.pop("unconfirmed", None)
    if failures:
        verdict, exit_code = "compiler-failure", EXIT_COMPILER_FAILURE
        kinds = sorted({f["kind"] for f in failures})
        explanation = f"{len(failures)} compiler failure(s): {', '.join(kinds)}"
    debug_index = None
    if debug_dir:
        from .explain import index_debug_dir

        debug_index = index_debug_dir(debug_dir)
    report = RunReport(
        graphs=graphs,
        failures=failures,
        notes=notes,
        exit_code=exit_code,
        verdict=verdict,
        explanation=explanation,
        returncode=result.returncode,
        seconds=result.seconds,
        run_dir=run_dir,
        command=command,
        stage=stage,
        accuracy=accuracy,
        debug_index=debug_index,
        records=records,
    )
    write_json(os.path.join(run_dir, "result.json"), report.to_json())
    return report


def _gather_records(
    result: ProcessResult, run_dir: str, failures: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Move the records the processes wrote to RUN_DIR/record.pkl, record-2.pkl, ...
    and point the failures at their new paths."""
    records: list[dict[str, Any]] = []
    moved: dict[str, str] = {}
    for e in result.events:
        if e.get("event") != "record" or not os.path.exists(str(e.get("path"))):
            continue
        n = len(records) + 1
        dest = os.path.join(run_dir, "record.pkl" if n == 1 else f"record-{n}.pkl")
        os.replace(e["path"], dest)
        moved[e["path"]] = dest
        records.append(
            {"path": dest, "function": e.get("function"), "signature": e.get("signature_text")}
        )
    for f in failures:
        if f.get("record"):
            f["record"] = moved.get(f["record"], f["record"])
    return records


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically: a reader never sees half a file."""
    import json

    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(tmp, path)

"""What passes between the tcompile parent and the processes it runs.

Parent -> child: one environment variable, ``TCOMPILE_CONFIG``, holding a JSON
:class:`HookConfig`; ``PYTHONPATH`` gains the bootstrap folder whose
``sitecustomize.py`` installs the hooks when (and only when) that variable is set.

Child -> parent: each process appends JSON lines to ``events-<pid>.jsonl`` in the run
directory (flushed per event, so a crash loses nothing already said), and keeps a
16-byte ``marker-<pid>`` file, memory-mapped, saying which graph is running now, so
that a process killed by a signal or a timeout can still be attributed to a graph.
Never parsed from stderr.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import struct
from pathlib import Path
from typing import Any, TypedDict

from . import layout

SCHEMA = 1
CONFIG_ENV = "TCOMPILE_CONFIG"
STOP_EXIT = 86  # a child that stopped early because the failure it looked for showed


# a note's tag: compiled differs from eager by being closer to float64 (not a failure;
# the parent names such graphs beside a failure outside every graph)
MORE_PRECISE = "more_precise"


class Event(str, enum.Enum):
    """The kinds of event a child writes (``"event"`` of each JSON line), and the ones
    the parent adds for its observer (bisect steps, minify progress)."""

    START = "start"  # a process under the hooks compiled its first graph
    GRAPH = "graph"  # a Dynamo graph: index, frame, nodes, stage, compile seconds
    AOT_GRAPH = "aot_graph"  # a forward / backward / inference graph of a Dynamo graph
    FAILURE = "failure"  # a compiler failure tcompile saw and classified
    NOTE = "note"  # something the user should know (e.g. a nondeterministic reference)
    EXCEPTION = "exception"  # the exception the program died of (sys.excepthook)
    RECORD = "record"  # a record of a frame that failed in Dynamo was written
    BISECT_COUNTS = "bisect_counts"  # applications of inductor's subsystems so far
    RECOMPILE = "recompile"  # a guard failed: the frame is compiled again
    RECOMPILE_LIMIT = "recompile_limit"  # the frame hit the recompile limit
    INTERNAL = "internal"  # tcompile's own stack could not be built (a torch API it needs)
    BISECT_STEP = "bisect_step"  # (parent) one probe run of `tcompile bisect`
    MINIFY_PROGRESS = "minify_progress"  # (parent) the minifier's best so far
    STOPPED = "stopped"  # the process showed the failure it was told to stop at (stop_on)
    GROUP_DESTROYED = "group_destroyed"  # a rank tore down its default process group
    EXIT = "exit"  # a rank's code ended (atexit): how -- returned, raised, sys.exit(code)
    CHECK_EFFECT = "check_effect"  # the check changed something in the program (faithful.py)


# A minifier worker's capture of the graph it serves (child/serve.py writes it, the
# parent reads it): the graph, its real inputs and the configuration in force.
CAPTURE_GRAPH = layout.CAPTURE_GRAPH
CAPTURE_INPUTS = layout.CAPTURE_INPUTS
CAPTURE_META = layout.CAPTURE_META
CAPTURE_COLLECTIVES = layout.CAPTURE_COLLECTIVES
# The program `tcompile replay` runs (child/replay_driver.py): from `-c`, not as a
# script or `-m`, so that the recorded frame's globals can go into an empty __main__.
REPLAY_DRIVER = (
    "import sys; from tcompile.compiler.child.replay_driver import main; "
    "sys.exit(main(sys.argv[1:]))"
)
# The worker judging candidate sources of a recorded frame (child/capture_worker.py):
# python -c CAPTURE_WORKER RECORD SHA256, without the hooks (it compiles on its own).
CAPTURE_WORKER = (
    "import sys; from tcompile.compiler.child.capture_worker import main; "
    "sys.exit(main(sys.argv[1:]))"
)
# The worker of a minifier_launcher.py: the launcher's data comes in the serve spec.
LAUNCHER_WORKER = "from tcompile.compiler.child.serve import serve_launcher; serve_launcher()"

# marker layout: graph index (int32), phase (int32), graph kind (int32), spare
MARKER_FMT = "<iiii"
MARKER_SIZE = struct.calcsize(MARKER_FMT)
# after it: where the program called the last graph that ran -- its own frames, outermost
# first, as a length (int32) and JSON -- rewritten only when the place changes
# (recorder.Recorder.note_site): a process a kernel kills says where it was
SITE_SIZE = 4096
PHASES = {0: "idle", 1: "compile", 2: "run", 3: "check"}
GRAPH_KINDS = {0: "dynamo", 1: "forward", 2: "backward", 3: "inference", 4: "joint"}
KIND_CODES = {v: k for k, v in GRAPH_KINDS.items()}


class Marker(TypedDict):
    """What a process's marker says (:func:`read_markers`)."""

    graph: int  # the graph's index (-1: none, the process is idle)
    phase: str  # PHASES
    graph_kind: str  # GRAPH_KINDS


@dataclasses.dataclass
class ServeSpec:
    """A minifier worker's orders (HookConfig.serve): which graph to stop at, where to
    write its capture, what to answer.  Written by the jobs (minify, the launcher, a
    rank's capture) and the pool; read by the child (serve.py, runners.py, session.py)."""

    capture_dir: str  # the worker writes the graph, its inputs and capture.json here
    graph: int | None = None  # the graph to serve (None: the first failing one)
    level: str = "dynamo"  # "dynamo" or "aot": which of the graph's forms is served
    graph_kind: str | None = None  # at the AOT level: forward, backward or inference
    signature: dict[str, Any] | None = None  # the failure to minify (FailureSignature)
    first_failure: bool = False  # serve the first compile or accuracy failure met
    match: str | None = None  # ... whose signature matches this regular expression
    rank: int | None = None  # in a distributed job: only this rank serves
    capture_only: bool = False  # write the capture, then stop the run (a rank's capture)
    launcher: dict[str, Any] | None = None  # {"dir", "data"}: a minifier_launcher.py's graph
    fds: list[int] | None = None  # the pipes to the parent (pool.py sets them)

    def serves(self, index: int, level: str, rank: int | None) -> bool:
        """Whether a process (of ``rank``) serves graph ``index`` at ``level``."""
        if self.first_failure or self.graph != index or self.level != level:
            return False
        return self.rank is None or self.rank == rank


@dataclasses.dataclass
class HookConfig:
    dir: str
    stage: str | None = None  # override every compile's backend with this stage
    accuracy: str = "off"  # off | loose | strict
    disable: bool = False  # torch.compile becomes a no-op (is it a compiler bug at all?)
    gate: list[int] | None = None  # only these graph indices use the stage; others eager
    # a launched job: the gate is this rank's; the other ranks compile nothing (bisect
    # asks the failing rank's question only)
    gate_rank: int | None = None
    check_calls: int = 1  # accuracy-check the first N calls of each graph
    # be a minifier worker at the first call of graph serve.graph (child/serve.py)
    serve: ServeSpec | None = None
    # bisection: {"limits": {subsystem: n enabled applications}, "toggles": {config: value}}
    bisect: dict[str, Any] | None = None
    # exit as soon as a failure like this one ({"kind", "exc_type", "message"}) shows
    stop_on: dict[str, Any] | None = None
    # diagnostics (tcompile explain): ops per graph, compile phases, recompilations
    explain: bool = False
    # keep inductor's debug artifacts per graph under this directory
    debug_dir: str | None = None
    only: str | None = None  # compile only frames of this function name
    trace: str | None = None  # torch's structured trace of the run goes here (TORCH_TRACE)
    # records of frames that fail in Dynamo (record.py): off | failures (those the
    # program dies of) | all (every frame whose conversion raised)
    record: str = "failures"
    # an accuracy failure the check sees: its first divergent node (child/localize.py)
    localize: bool = False
    # record the files the program opens to read into this file (child/opened.py)
    opened: str | None = None
    # save each graph's first compile or accuracy failure here (graph-N/: the graph, the
    # inputs of that call, capture.json) and go on: bisect and minify start from it
    capture: str | None = None
    # keep each graph's last call and judge them if the program dies of its own
    # exception outside every graph (child/postmortem.py): the classification run
    keep_last_calls: bool = False
    schema: int = SCHEMA

    def to_env(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_env(cls, text: str) -> HookConfig:
        data = json.loads(text)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"tcompile hook config schema {data.get('schema')} != {SCHEMA}")
        names = {f.name for f in dataclasses.fields(cls)}
        config = cls(**{k: v for k, v in data.items() if k in names})
        if isinstance(config.serve, dict):
            config.serve = ServeSpec(**config.serve)
        return config


def read_events(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All events of all processes of a run, in file order per process."""
    events: list[dict[str, Any]] = []
    for path in sorted(Path(run_dir).glob("events-*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
    return events


def read_site(run_dir: str | os.PathLike[str], pid: int) -> list[str]:
    """Where process ``pid`` called the last compiled graph that ran: the program's own
    frames (``file:line in name``), outermost first; empty when not known."""
    try:
        data = Path(run_dir, f"marker-{pid}").read_bytes()[MARKER_SIZE : MARKER_SIZE + SITE_SIZE]
        (n,) = struct.unpack("<i", data[:4])
        frames = json.loads(data[4 : 4 + n].decode()) if 0 < n <= len(data) - 4 else []
    except (OSError, ValueError, struct.error):
        return []
    return [str(f) for f in frames] if isinstance(frames, list) else []


def read_markers(run_dir: str | os.PathLike[str]) -> dict[int, Marker]:
    """pid -> {"graph", "phase", "graph_kind"} for every process that left a marker."""
    out: dict[int, Marker] = {}
    for path in Path(run_dir).glob("marker-*"):
        try:
            pid = int(path.name.split("-", 1)[1])
            data = path.read_bytes()[:MARKER_SIZE]
            graph, phase, kind, _ = struct.unpack(MARKER_FMT, data)
        except (ValueError, struct.error, OSError):
            continue
        out[pid] = {
            "graph": graph,
            "phase": PHASES.get(phase, "idle"),
            "graph_kind": GRAPH_KINDS.get(kind, "dynamo"),
        }
    return out

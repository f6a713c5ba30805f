"""The child side of the protocol (compiler/protocol.py): events out, a live marker."""

from __future__ import annotations

import json
import mmap
import os
import struct
import threading
import time
from typing import Any

from ..protocol import KIND_CODES, MARKER_FMT, MARKER_SIZE, ServeSpec

STARTED = time.monotonic()  # interpreter start-up, near enough (sitecustomize imports us)


def _dist() -> dict[str, int]:
    """This process's place in a distributed job (torchrun's environment), if any."""
    if "WORLD_SIZE" not in os.environ:
        return {}
    out = {}
    for key, env in (
        ("rank", "RANK"),
        ("local_rank", "LOCAL_RANK"),
        ("world_size", "WORLD_SIZE"),
        ("node", "GROUP_RANK"),
    ):
        try:
            out[key] = int(os.environ[env])
        except (KeyError, ValueError):
            pass
    return out


DIST = _dist()  # every event says which rank it comes from


def serves(serve: ServeSpec | None, index: int, level: str) -> bool:
    """Whether this process is the minifier worker for graph ``index`` at ``level``
    (in a distributed job, only the rank named in the serve spec serves)."""
    return serve is not None and serve.serves(index, level, DIST.get("rank"))


# marker phases (protocol.PHASES): what a graph is doing
PHASE_IDLE, PHASE_COMPILE, PHASE_RUN, PHASE_CHECK = 0, 1, 2, 3


class Recorder:
    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._next_graph = 0
        self.last_run: tuple[int, str] | None = None
        os.makedirs(run_dir, exist_ok=True)
        self._events = open(os.path.join(run_dir, f"events-{self.pid}.jsonl"), "a", buffering=1)
        marker_path = os.path.join(run_dir, f"marker-{self.pid}")
        with open(marker_path, "wb") as f:
            f.write(b"\0" * MARKER_SIZE)
        fd = os.open(marker_path, os.O_RDWR)
        try:
            self._marker = mmap.mmap(fd, MARKER_SIZE)
        finally:
            os.close(fd)
        self.mark(-1, PHASE_IDLE)

    def graphs_seen(self) -> bool:
        """Whether any Dynamo graph reached tcompile's backend in this process."""
        return self._next_graph > 0

    def next_graph_index(self) -> int:
        with self._lock:
            index = self._next_graph
            self._next_graph += 1
            return index

    def emit(self, event: str, **fields: Any) -> None:
        fields = {"event": event, "pid": self.pid, "time": time.time(), **DIST, **fields}
        line = json.dumps(fields, default=str)
        with self._lock:
            self._events.write(line + "\n")
            self._events.flush()

    def mark(self, graph: int, phase: int, graph_kind: str = "dynamo") -> None:
        """Cheap (a few hundred ns): called around every compiled-graph call."""
        if phase == PHASE_RUN and graph >= 0:  # running: the last graph that ran (async GPU faults)
            self.last_run = (graph, graph_kind)
        struct.pack_into(
            MARKER_FMT, self._marker, 0, graph, phase, KIND_CODES.get(graph_kind, 0), 0
        )

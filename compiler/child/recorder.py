"""The child side of the protocol (compiler/protocol.py): events out, a live marker."""

from __future__ import annotations

import json
import mmap
import os
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING

from ..protocol import KIND_CODES, MARKER_FMT, MARKER_SIZE, SITE_SIZE, ServeSpec

if TYPE_CHECKING:
    from types import CodeType, FrameType

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
            f.write(b"\0" * (MARKER_SIZE + SITE_SIZE))
        fd = os.open(marker_path, os.O_RDWR)
        try:
            self._marker = mmap.mmap(fd, MARKER_SIZE + SITE_SIZE)
        finally:
            os.close(fd)
        self._site: tuple[int, ...] = ()  # (f_lasti, id(f_code)) of each frame
        # each place seen: its frames' code (kept alive) and the marker's text of it
        self._sites: dict[tuple[int, ...], tuple[list[CodeType], bytes]] = {}
        self._user_code: dict[int, tuple[CodeType, bool]] = {}
        self.mark(-1, PHASE_IDLE)

    def graphs_seen(self) -> bool:
        """Whether any Dynamo graph reached tcompile's backend in this process."""
        return self._next_graph > 0

    def next_graph_index(self) -> int:
        with self._lock:
            index = self._next_graph
            self._next_graph += 1
            return index

    def emit(self, event: str, **fields: object) -> None:
        fields = {"event": event, "pid": self.pid, "time": time.time(), **DIST, **fields}
        line = json.dumps(fields, default=str)
        with self._lock:
            self._events.write(line + "\n")
            self._events.flush()

    def note_site(self, depth: int = 2) -> None:
        """Where the program calls the graph about to run: its own frames (owners.py),
        outermost first, into the marker -- rewritten only when the stack changed (a
        training loop calls its graphs from one place: one walk up the stack, a few
        microseconds).  A process a compiled kernel kills (a C++ throw aborts it) has
        said where it was (protocol.read_site; crash.fatal_stack)."""
        raw: list[int] = []
        f: FrameType | None = sys._getframe(depth)
        while f is not None:
            raw.append(f.f_lasti)
            raw.append(id(f.f_code))
            f = f.f_back
        key = tuple(raw)
        if key == self._site:
            return
        self._site = key
        # a step calls its forward from the loop and its backward from autograd: two
        # places, one after the other -- each one's text made once (the entry keeps its
        # code objects alive, so their ids are not reused while it is kept)
        known_site = self._sites.get(key)
        if known_site is None:
            if len(self._sites) > 256:
                self._sites.clear()
            known_site = self._sites[key] = self._site_text(depth + 1)
        data = known_site[1]
        self._marker[MARKER_SIZE + 4 : MARKER_SIZE + 4 + len(data)] = data
        struct.pack_into("<i", self._marker, MARKER_SIZE, len(data))

    def _site_text(self, depth: int) -> tuple[list[CodeType], bytes]:
        """The program's own frames of the stack ``depth`` up, as the marker holds them."""
        codes: list[CodeType] = []
        frames = []
        f = sys._getframe(depth)
        while f is not None:
            code = f.f_code
            codes.append(code)
            # keyed by identity: a code object Dynamo made (a resume function with a
            # dict among its constants: #91468) cannot be hashed; the entry keeps the
            # code alive, so its id is not reused
            known = self._user_code.get(id(code))
            if known is None or known[0] is not code:
                from ..owners import is_user

                known = self._user_code[id(code)] = (code, is_user(code.co_filename))
            mine = known[1]
            if mine:
                frames.append(f"{code.co_filename}:{f.f_lineno} in {code.co_name}")
            f = f.f_back
        frames.reverse()
        data = json.dumps(frames).encode()
        while len(data) > SITE_SIZE - 4 and frames:
            frames = frames[1:]  # the innermost frames matter most
            data = json.dumps(frames).encode()
        return codes, data

    def mark(self, graph: int, phase: int, graph_kind: str = "dynamo") -> None:
        """Cheap (a few hundred ns): called around every compiled-graph call."""
        if phase == PHASE_RUN and graph >= 0:  # running: the last graph that ran (async GPU faults)
            self.last_run = (graph, graph_kind)
        struct.pack_into(
            MARKER_FMT, self._marker, 0, graph, phase, KIND_CODES.get(graph_kind, 0), 0
        )

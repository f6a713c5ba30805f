"""The nodes of one distributed job bisecting together (``tcompile bisect --peers DIR
-- torchrun --nnodes N --node-rank K ...``, run once per node).

A probe is a whole job, so every node must run the same probes in the same order --
but each node's tcompile sees only its own ranks, and the failure may show on a rank
of another node.  So after each run (the baseline, then each probe) a node writes
what it saw to ``DIR/STEP/node-K.json`` and waits until all N nodes have; every node
then decides on the union, and the deterministic search takes the same next step on
every node.  DIR is any directory all nodes can write (on one machine, any; across
machines, a shared filesystem).  JSON only: nothing is unpickled.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.compiler.exitcodes import ExitCode, UsageError
from tcompile.compiler.failure import Failure
from tcompile.compiler.runner import CANCEL, write_json

if TYPE_CHECKING:
    from .classify import RunReport

WAIT_SECONDS = 1800.0  # how long a node waits for the others at one step


def node_of(command: list[str]) -> tuple[int, int]:
    """(this node's rank, the number of nodes) from torchrun's arguments."""
    node, nnodes = 0, 1

    def value(i: int, arg: str) -> str | None:
        if "=" in arg:
            return arg.split("=", 1)[1]
        return command[i + 1] if i + 1 < len(command) else None

    for i, arg in enumerate(command):
        name = arg.split("=", 1)[0].replace("_", "-")
        if name == "--nnodes" and (v := value(i, arg)):
            nnodes = int(v.split(":")[-1])  # an elastic MIN:MAX: the most there can be
        elif name == "--node-rank" and (v := value(i, arg)):
            node = int(v)
    return node, nnodes


def one_node_of(command: list[str]) -> str | None:
    """Why this command is not run again to check a failure, where it is one node of a
    job of several (``torchrun --nnodes N``): a run of it alone waits for nodes that
    will not join (torchrun's rendezvous); None for a command run whole."""
    try:
        node, nodes = node_of(command)
    except ValueError:
        return None
    if nodes < 2:
        return None
    return (
        f"not run again to check the failure: this is node {node} of a job of {nodes} "
        "nodes, and a run of it alone would wait for nodes that do not join"
    )


class Peers:
    def __init__(self, directory: str, command: list[str]) -> None:
        self.dir = Path(directory)
        try:
            self.node, self.nnodes = node_of(command)
            self.dir.mkdir(parents=True, exist_ok=True)
        except (ValueError, OSError) as exc:
            raise UsageError(f"--peers {directory}: {exc}") from None
        if self.nnodes < 2:
            raise UsageError("--peers is for a job of several nodes (torchrun --nnodes N)")

    def share(self, step: str, mine: dict[str, object]) -> list[dict[str, Any]]:
        """Say what this node saw at ``step``; what every node saw, in node order."""
        d = self.dir / step
        d.mkdir(parents=True, exist_ok=True)
        write_json(d / f"node-{self.node}.json", mine)
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            found = sorted(d.glob("node-*.json"))
            if len(found) >= self.nnodes:
                break
            if CANCEL.is_set():
                raise KeyboardInterrupt
            if time.monotonic() > deadline:
                raise UsageError(
                    f"--peers: {len(found)} of {self.nnodes} nodes reached step {step} "
                    f"in {WAIT_SECONDS:.0f}s"
                )
            time.sleep(0.2)
        out = []
        for p in found:
            try:
                out.append(json.loads(p.read_text()))
            except (OSError, ValueError):  # being written (atomically): read it again
                time.sleep(0.2)
                out.append(json.loads(p.read_text()))
        return out


def share_baseline(
    peers: Peers, base: RunReport, counts: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Several nodes: every node's baseline failures, so that all of them bisect the
    same failure (it may show on another node's rank only)."""
    shared = peers.share(
        "baseline",
        {
            "failures": [f.to_json() for f in base.failures],
            "exit_code": base.exit_code,
            "explanation": base.explanation,
            "counts": counts,
        },
    )
    base.failures = sorted(
        (Failure.from_json(f) for d in shared for f in d["failures"]),
        key=lambda f: (f.rank if f.rank is not None else -1, f.graph or 0),
    )
    if base.failures:
        base.exit_code = int(ExitCode.COMPILER_FAILURE)
    elif any(d["exit_code"] != ExitCode.NOT_COMPILER for d in shared):
        base.exit_code = int(ExitCode.OK)
    return next((d["counts"] for d in shared if d["failures"] and d["counts"]), counts)

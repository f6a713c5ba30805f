"""The graph format of the one search problem (problem.py).

A case is an FX graph with its inputs (graph.py's :class:`Case`); its key is the
graph's canonical text, its size the node count (then the inputs' size), and a
candidate is judged only when smaller than the best.  The oracle gets its own copies
of the inputs (an oracle may mutate them).  Passes (passes.py) ask the problem to test
candidates one at a time, in a binary search, or in ddmin order; with ``jobs > 1`` it
evaluates candidates concurrently but *decides* exactly as the sequential search would
(speculative evaluation of the same decision tree), so the answer never depends on
``jobs``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .gate import Gate, Stop
from .graph import Case, own_copy
from .problem import Problem as _OneProblem
from .problem import Stopped
from .verdict import GraphOracle, Verdict

__all__ = [
    "Gate", "GraphFormat", "MinifyError", "MinifyResult", "Problem", "Progress", "Step", "Stop",
    "Stopped",
]  # fmt: skip


class MinifyError(Exception):
    """The search cannot start (the starting graph does not fail) or went wrong;
    ``verdict``: what the oracle said of the starting graph, when that is the reason."""

    def __init__(self, message: str, verdict: Verdict | None = None) -> None:
        super().__init__(message)
        self.verdict = verdict


@dataclasses.dataclass
class Progress:
    nodes: int
    calls: int
    pass_name: str
    best_nodes: int


@dataclasses.dataclass
class Step:
    pass_name: str
    nodes_before: int
    nodes_after: int
    calls: int


@dataclasses.dataclass
class MinifyResult:
    gm: Any
    inputs: list[Any]
    calls: int
    history: list[Step]
    nodes_before: int
    nodes_after: int
    cache_hits: int
    seconds: float
    stopped: bool = False
    verified: bool = True
    final_verdict: Verdict = Verdict.SAME_FAILURE
    # per pass: oracle calls, candidates kept, seconds (the gate's statistics)
    passes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


Oracle = GraphOracle  # the name the engine's API has always had


class GraphFormat:
    """A graph case, as the one problem sees it."""

    def key(self, case: Case) -> str:
        return case.key

    def size(self, case: Case) -> Any:
        return case.order_key()

    def admit(self, raw: Case, best: Case, grow: bool) -> Case | None:
        return raw if raw.order_key() < best.order_key() else None

    def prepare(self, case: Case) -> None:
        case.gm  # noqa: B018  generate its code here: a worker would fight for the GIL

    def oracle_input(self, case: Case) -> tuple[Any, list[Any]]:
        return case.gm, [own_copy(x) for x in case.inputs]

    def step(self, pass_name: str, what: str, before: Case, after: Case, calls: int) -> Step:
        return Step(pass_name, before.size, after.size, calls)


class Problem(_OneProblem[Case]):
    """The one problem over graphs: ``oracle(gm, inputs)``; ``checkpoint(case,
    history, calls)`` after every step taken (the gate's best-so-far hook);
    ``on_progress`` as the search moves."""

    def __init__(
        self,
        start: Case,
        oracle: Oracle,
        *,
        jobs: int = 1,
        stop: Stop | Callable[[], bool] | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        checkpoint: Callable[[Case, list[Step], int], None] | None = None,
    ) -> None:
        super().__init__(
            GraphFormat(),
            start,
            lambda arg: oracle(*arg),
            jobs=jobs,
            limits=stop,
            on_best=None
            if checkpoint is None
            else (lambda case: checkpoint(case, self.history, self.calls)),
            recheck=True,
        )
        self.on_progress = on_progress
        # nodes an earlier truncate_suffix ended a case at (passes.truncate_suffix)
        self.ends_found: set[str] = set()

    def progress(self) -> None:
        if self.on_progress is not None:
            size = self.best.size
            self.on_progress(Progress(size, self.calls, self.pass_name, size))

    def start_does_not_fail(self, verdict: Verdict) -> None:
        raise MinifyError(
            f"the starting graph does not fail (oracle said {verdict.value}); nothing to minify",
            verdict,
        )

"""A row of ``failures[]``: one compiler failure, classified, in one place.

Made by the parent (runner.py) out of the child's events; rendered by the CLI; its
:meth:`Failure.to_json` is the public ``--json`` shape (fields are only ever added).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .signature import FailureSignature

# fields of failures[] present only when they say something
_OPTIONAL = (
    "pid",
    "phase",
    "user_stack",
    "record",
    "not_a_compiler_bug",
    "rank",
    "local_rank",
    "world_size",
    "node",
    "divergence",
    "limitation",
    "ranks_raised",
    "before_aot_compile",
    "pattern",
    "more_precise",
    "passes_without",
)
DIST_FIELDS = ("rank", "local_rank", "world_size", "node")


@dataclasses.dataclass
class Failure:
    graph: int | None  # the Dynamo graph's index; None before any graph exists
    graph_kind: str  # dynamo | forward | backward | inference | joint: where it showed
    signature: FailureSignature
    message: str = ""  # the first lines of the error, for people
    frame: str = ""  # where: the innermost user frame, or "run of graph N"
    pid: int | None = None  # the process, when several compiled
    phase: str | None = None  # compile / run / check: what a crashed process was doing
    user_stack: list[str] | None = None  # a capture failure's user stack
    record: str | None = None  # a capture failure's frame, for `tcompile replay`
    not_a_compiler_bug: bool | None = None
    # not yet checked against a run without torch.compile (the parent decides)
    unconfirmed: bool = False
    # its place in a distributed job (torchrun): which rank, on which node
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    node: int | None = None
    # an accuracy failure's first divergent node, op, source line and kernel (localize.py)
    divergence: dict[str, Any] | None = None
    # a capture failure that is a documented limitation of Dynamo: what the docs advise
    limitation: str | None = None
    # a failure outside any graph in a launched job: every rank whose process raised
    ranks_raised: list[int] | None = None
    # a compile failure raised once AOTAutograd had the graph but before the AOT-level
    # compile of its forward/inference graph began (tracing, joint-graph passes, the
    # partitioner): no AOT-level minify can reach it (build.aot_kind_of_failure)
    before_aot_compile: bool | None = None
    # the inductor pattern that was rewriting the graph when a compile failed
    # (child/patterns.py: ``post_grad.pointless_cumsum_replacement``)
    pattern: str | None = None
    # a failure outside any graph: the graphs whose results differ from eager by being
    # closer to float64 (the program may be comparing with eager): ``{"graph", "text"}``
    more_precise: list[dict[str, Any]] | None = None
    # a failure outside any graph in a compiler subsystem's own words (CUDA graph trees'):
    # that subsystem, where the program passed with its every application off (one run,
    # repro/jobs/owned.py) -- bisect's culprit, no search
    passes_without: str | None = None

    @property
    def kind(self) -> str:
        return self.signature.kind

    @property
    def stage(self) -> str:
        return self.signature.stage

    @property
    def text(self) -> str:
        """The signature as people read it: ``stage/kind: ExcType: message``."""
        return str(self.signature)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "graph": self.graph,
            "graph_kind": self.graph_kind,
            "kind": self.kind,
            "stage": self.stage,
            "signature": self.text,
            "signature_fields": self.signature.to_json(),
            "message": self.message,
            "frame": self.frame,
        }
        for key in _OPTIONAL:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Failure:
        return cls(
            graph=data.get("graph"),
            graph_kind=data.get("graph_kind") or "dynamo",
            signature=FailureSignature.from_json(data.get("signature_fields") or {}),
            message=data.get("message") or "",
            frame=data.get("frame") or "",
            **{k: data.get(k) for k in _OPTIONAL},
        )


def group(failures: list[Failure]) -> list[dict[str, Any]]:
    """Failures with the same signature (across graphs, processes, ranks) as one bug:
    its count and where it showed, in order of first appearance."""
    groups: dict[str, dict[str, Any]] = {}
    for f in failures:
        g = groups.setdefault(
            f.text,
            {
                "signature": f.text,
                "kind": f.kind,
                "exc_type": f.signature.exc_type,
                "stage": f.stage,
                "count": 0,
                "graphs": [],
                "graph_kinds": [],
                "pids": [],
                "ranks": [],
                "message": f.message,
            }
            | ({"limitation": f.limitation} if f.limitation else {}),
        )
        g["count"] += 1
        for key, value in (
            ("graphs", f.graph),
            ("graph_kinds", f.graph_kind),
            ("pids", f.pid),
            *(("ranks", r) for r in (f.ranks_raised or [f.rank])),  # every rank that raised
        ):
            if value is not None and value not in g[key]:
                g[key].append(value)
    for g in groups.values():
        g["ranks"].sort()
    return list(groups.values())


def rank_summary(failures: list[Failure]) -> str | None:
    """In a distributed job: do all ranks fail the same way, or only some?  None when
    the failures carry no ranks."""
    sizes = {f.world_size for f in failures if f.world_size}
    if not sizes:
        return None
    world = max(sizes)
    lines = []
    for g in group(failures):
        ranks = g["ranks"]
        if not ranks:
            continue
        if len(ranks) == world:
            who = f"all {world} ranks"
        else:
            who = ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
            who += f" only (of {world})"
        lines.append(f"{who}: {g['signature']}")
    return "; ".join(lines) if lines else None


def dist_of(e: dict[str, Any]) -> dict[str, Any]:
    """An event's (or a graph's) place in a distributed job (rank, local_rank, world_size, node)."""
    return {k: e[k] for k in DIST_FIELDS if e.get(k) is not None}

"""The culprit of a failure, as one record every command reports (issue 60).

Bisect finds it; report, triage and the pages repeat it.  Before this record each of
them rebuilt the culprit from bisect's fields with its own rules, and one failure could
get two culprits (bisect: ``lowerings slice_scatter_default``; triage: the op where the
minimal graph's values first went wrong, ``sum``).  Now:

- ``KINDS`` is the one table of culprit kinds (as torch's ``BACKENDS`` is of backends):
  which bisector subsystem each is, at which stage it lives, whether its application
  is an op, and how a person reads it.  A kind of culprit is added here, in
  compiler/stack.py (``SUBSYSTEMS`` or ``TOGGLES``: what bisect searches) and in
  compiler/child/subsystems.py (the hook that counts and turns it off); words,
  ``--without`` and triage's clustering follow from the record.
- ``Culprit.of_bisect`` builds it from bisect's answer, the only source; the op is
  the culprit application's own where it names one (a lowering, a decomposition),
  and where the values first went wrong is kept apart (``first_wrong``), never in its
  place.
- ``Culprit.key`` is what "the same culprit" compares, across commands and scripts.

Pure: no torch import (tests build records from dicts).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from .opname import op_base
from .stack import application_name, stage_words, without_of


@dataclasses.dataclass(frozen=True)
class CulpritKind:
    """One kind of culprit: ``subsystem`` is torch's CompilerBisector subsystem (or
    ``config`` for a toggle; None for a stage or a capture), ``stage`` the stage it
    belongs to, ``names_op`` whether an application is an op (so that its op is the
    culprit's op), ``words`` what it is in a sentence."""

    name: str
    subsystem: str | None
    stage: str | None
    names_op: bool
    words: str


KINDS: dict[str, CulpritKind] = {
    k.name: k
    for k in (
        CulpritKind("capture", None, None, False, "Dynamo could not capture the frame"),
        CulpritKind("stage", None, None, False, "the first stage the failure shows at"),
        CulpritKind(
            "decomposition", "decomposition", "aot_eager_decomp_partition", True,
            "the decomposition of an op",
        ),
        CulpritKind("pre_grad_pass", "pre_grad_passes", "inductor", False, "a pre-grad FX pass"),
        CulpritKind(
            "joint_graph_pass", "joint_graph_passes", "inductor", False,
            "a joint-graph pass (pattern rewrites of forward and backward)",
        ),
        CulpritKind(
            "post_grad_pass", "post_grad_passes", "inductor", False,
            "a post-grad pass (pattern rewrites of the AOT graphs)",
        ),
        CulpritKind("cudagraphs", "cudagraphs", "inductor", False, "CUDA graph trees"),
        CulpritKind("lowering", "lowerings", "inductor", True, "inductor's lowering of an op"),
        CulpritKind("config", "config", None, False, "a config entry (a toggle torch's bisector tries, or a whole optimization)"),
    )
}  # fmt: skip

_BY_SUBSYSTEM = {k.subsystem: k for k in KINDS.values() if k.subsystem}

# CUDA graph trees' operations (torch/_inductor/cudagraph_trees.py), told by the error
# torch raises in each (its own words, torch 2.11-2.14): (what its message says, the
# operation, what went wrong in it).  A cudagraphs culprit names the operation where
# its failure's text is one of these; otherwise only ``cudagraphs``.
CUDAGRAPH_OPERATIONS: tuple[tuple[str, str, str], ...] = (
    (r"accessing gradient tensor output of CUDAGraphs that has been overwritten",
     "replay", "a later run freed a .grad buffer allocated while recording"),
    (r"accessing tensor output of CUDAGraphs that has been overwritten",
     "replay", "a later run of the tree reused the memory of an output still read"),
    (r"static input data pointer changed",
     "replay", "a static input moved since the graph was recorded"),
    (r"cudagraph managed tensor data pointer changed",
     "replay", "an input the tree manages moved since the graph was recorded"),
    (r"expected dead indices before graph are live",
     "replay", "outputs of an earlier node still alive where the tree expected them freed"),
    (r"in the cudagraph pool not tracked as outputs",
     "record", "a live allocation in the tree's memory pool is not an output"),
    (r"operation not permitted when stream is capturing|stream ?capture|capture.{0,20}invalidated",
     "record", "a CUDA call that is not allowed while a graph is recorded"),
)  # fmt: skip


def cudagraph_operation(text: str | None) -> str | None:
    """``replay: a later run ...``: the CUDA-graph-tree operation a failure's text (its
    signature or message, torch's words) belongs to, and what went wrong; None: none
    of CUDAGRAPH_OPERATIONS."""
    for pattern, operation, what in CUDAGRAPH_OPERATIONS:
        if text and re.search(pattern, text, re.IGNORECASE):
            return f"{operation}: {what}"
    return None


def kind_of(subsystem: str | None, *, captured: bool = True) -> CulpritKind:
    """The kind of a bisect answer: its subsystem's, or a stage's (a capture failure:
    ``captured`` False).  KeyError: a subsystem this table does not know."""
    if subsystem:
        return _BY_SUBSYSTEM[subsystem]
    return KINDS["stage" if captured else "capture"]


@dataclasses.dataclass(frozen=True)
class Culprit:
    """What to blame, where, and the switch that turns it off.

    ``stage``: the first stage the failure shows at (``eager`` = Dynamo); ``graph`` and
    ``graph_kind``: the graph (its number in the run; forward, backward, ...);
    ``rank``: a launched job's rank; ``subsystem``, ``application`` (its number in the
    compile) and ``detail`` (as the hooks named it: ``sum_3``); ``op``: the op it is
    of, base name (opname.op_base); ``pattern``: an inductor pattern the error names;
    ``effects``: what the application did in the baseline (inductor's counters);
    ``switch``: ``tcompile run --without``'s argument; ``first_wrong``: the op where
    the values first went wrong (an accuracy failure), evidence, never the culprit."""

    category: str
    stage: str | None = None
    graph: int | None = None
    graph_kind: str | None = None
    rank: int | None = None
    subsystem: str | None = None
    application: int | None = None
    detail: str | None = None
    op: str | None = None
    pattern: str | None = None
    effects: Mapping[str, int] | None = dataclasses.field(default=None, compare=False)
    switch: str | None = None
    first_wrong: str | None = None
    # a cudagraphs culprit: the tree's operation that failed (cudagraph_operation)
    operation: str | None = None
    # applications after this one, each enough for the failure: the graph passes only
    # with all of them off too (capture_bisect.more_culprits), as ``NAME #N detail``
    also: tuple[str, ...] | None = None

    @classmethod
    def of_bisect(
        cls, found: Mapping[str, Any], *, first_wrong: Mapping[str, Any] | None = None
    ) -> Culprit | None:
        """The culprit of bisect's answer (its JSON's fields, or a BisectReport's);
        None where bisect named none (no stage: it found no failure).
        ``first_wrong``: a divergence (``{"op": ...}``) to prefer over bisect's own,
        the minimal graph's."""
        stage = found.get("stage")
        if not stage and not found.get("record"):
            return None
        subsystem = found.get("subsystem")
        kind = kind_of(
            subsystem, captured=found.get("graph") is not None or not found.get("record")
        )
        detail = found.get("detail") if subsystem else None
        op = op_base(detail) if kind.names_op and detail else None
        div = first_wrong or found.get("divergence") or {}
        wrong = None if div.get("grads") and not first_wrong else div.get("op")
        return cls(
            category=kind.name,
            stage=stage,
            graph=found.get("graph"),
            graph_kind=found.get("graph_kind"),
            rank=found.get("rank"),
            subsystem=subsystem,
            application=found.get("application"),
            detail=detail,
            op=op,
            pattern=found.get("pattern"),
            effects=dict(found.get("effects") or {}) or None,
            switch=found.get("without") or without_of(subsystem, detail),
            first_wrong=op_base(wrong) if wrong else None,
            operation=cudagraph_operation(found.get("signature") or found.get("message"))
            if kind.name == "cudagraphs"
            else None,
            also=tuple(
                f"{a['subsystem']} #{a['application']} {a.get('detail') or ''}".strip()
                for a in found.get("also") or []
            )
            or None,
        )

    @property
    def kind(self) -> CulpritKind:
        return KINDS[self.category]

    @property
    def name(self) -> str | None:
        """The application as any program names it (``sum_3`` -> ``sum``)."""
        if not self.subsystem or not self.detail:
            return None
        return application_name(self.subsystem, self.detail)

    def key(self, *, graph: bool = False) -> tuple[str | int | None, ...]:
        """What "the same culprit" compares: stage, subsystem, the application's name,
        the op and the pattern; ``graph``: also which graph (one script's commands)."""
        base = (self.stage, self.subsystem, self.name, self.op, self.pattern, self.operation)
        return (*base, self.graph, self.graph_kind) if graph else base

    def text(self) -> str:
        """``inductor / lowerings / sum``; ``dynamo`` for a failure that shows with
        backend=eager; a pass with what it did; the pattern an error names."""
        said = "dynamo" if self.stage == "eager" else self.stage
        named = self.op or (self.detail if self.subsystem else None)
        parts: list[str] = [str(p) for p in (said, self.subsystem, named) if p]
        did = self.effects or {}
        if self.subsystem and did and not self.kind.names_op:
            from .collect import meaningful

            useful = sorted(k for k in meaningful(dict(did)) if k != f"pattern {self.pattern}")
            if useful:
                parts[-1] = f"{parts[-1]} ({', '.join(useful)})"
        if not self.subsystem and self.first_wrong:
            parts.append(self.first_wrong)
        if self.operation:  # the CUDA-graph tree's operation
            parts.append(self.operation)
        if self.pattern and self.pattern not in " ".join(parts):
            # the pattern of a pass that fired or raised (child/patterns.py); where bisect
            # named no pass, one the error's text names
            parts.append(
                f"pattern {self.pattern}" + ("" if self.subsystem else " (named in the error)")
            )
        return " / ".join(parts)

    def words(self) -> str:
        """A sentence: the stage in words, then the kind and the application."""
        where = stage_words(self.stage) or "?"
        if not self.subsystem:
            return where
        if self.operation:
            return f"{where}: {self.kind.words}, {self.operation}"
        return f"{where}: {self.kind.words}, {self.name}" if self.name else where

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["effects"] = dict(self.effects) if self.effects else None
        out["text"] = self.text()
        out["words"] = self.words()
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Culprit:
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in doc.items() if k in names}
        if fields.get("also") is not None:
            fields["also"] = tuple(fields["also"])
        return cls(**fields)

"""Bisect guided by where the values first go wrong (issue 26).

An accuracy failure found by the check comes with its first divergent node
(child/localize.py): the op whose compiled value is wrong first.  Its lowering (or
decomposition) is the likely culprit, so the binary search over every toggle and
application asks first at that op's applications: with everything before the op's
application enabled, does it pass, and with the application too, does it fail?  Two
runs for one candidate, whatever the graph's size and the program's number of graphs
(no run compiling only the failing graph is needed: applications are numbered over
the whole program, as torch's own hooks number them); then the usual confirmation.
Every point asked is a point of the binary search, so a wrong guess costs little: the
first answer says on which side of the op the culprit is (a post-grad pass comes
before every lowering), and the search goes on there.
"""

from __future__ import annotations

from tcompile.compiler.opname import op_base
from tcompile.compiler.probe import Item


def _base(name: str) -> str:
    """``aten.relu.default`` / ``relu_3`` / ``torch.relu`` / ``relu_`` -> ``relu``: an op
    and its in-place form are matched as one (opname.op_base, lower case)."""
    return op_base(name).lower().strip("_")


def candidates(items: list[Item], op: str | None) -> list[int]:
    """Indices of the applications (lowerings, decompositions) that name ``op``."""
    if not op:
        return []
    want = _base(op)
    if not want:
        return []
    return [
        i
        for i, it in enumerate(items)
        if it.kind == "application"
        and it.name in ("lowerings", "decomposition")
        and _base(it.detail if "op='" in it.detail else it.detail.split(" ")[0]) == want
    ]


def guesses(items: list[Item], op: str | None) -> list[int]:
    """The binary search's first points (``minifier.interval.first_failing``'s guesses):
    k = c and k = c + 1 for each application c of the op (items[:k] enabled), asked the
    lowest first, then halving: a right guess ends with hi = lo + 1 = c + 1 in two runs
    for one candidate; a wrong one has still halved the interval at the op's place in
    the pipeline (a pass before the lowerings: the interval is the items before them)."""
    return sorted({p for c in candidates(items, op) for p in (c, c + 1)})

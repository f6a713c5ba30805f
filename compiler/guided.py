"""Bisect guided by where the values first go wrong (issue 26).

An accuracy failure found by the check comes with its first divergent node
(child/localize.py): the op whose compiled value is wrong first.  Its lowering (or
decomposition) is the likely culprit, so before the blind binary search over every
toggle and application, bisect asks one question: does the program pass with every
application that names that op disabled, and everything else as it is?  If it does,
the culprit is among them (usually one; several are split in halves), and two runs
confirm it with the same prefix configurations the binary search would have reported
(TORCH_BISECT_MAX culprit-1 passes, culprit fails).  Runs: the question, the halving,
the two confirmations -- 3 for a single candidate, whatever the graph's size and the
program's number of graphs (no run compiling only the failing graph is needed:
applications are numbered over the whole program, as torch's own hooks number them).
If the question's answer is no, or a confirmation disagrees, the binary search runs as
before (those runs are the price of a wrong guess).
"""

from __future__ import annotations

import re
from typing import Any

from .probe import Item, prefix_config


def _base(name: str) -> str:
    """``aten.relu.default`` / ``relu_3`` / ``torch.relu`` -> ``relu``."""
    name = str(name).strip().lower()
    m = re.search(r"op='([\w.]+)'", name)  # "<OpOverload(op='aten.silu', overload='default')>"
    if m:
        name = m.group(1)
    name = re.sub(r"^(torch\.ops\.)?(aten|prims|torch)\.", "", name)
    name = re.sub(r"\.(default|tensor|scalar|int|dim\w*|self|out)$", "", name)
    name = re.sub(r"_\d+$", "", name)
    return name.strip("_")


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


def skip_config(items: list[Item], skip: list[int]) -> dict[str, Any]:
    """Everything as in the program, but these applications disabled."""
    by_sub: dict[str, list[int]] = {}
    for i in skip:
        by_sub.setdefault(items[i].name, []).append(items[i].index)
    return {"limits": {}, "toggles": {}, "skip": by_sub}


def guided_search(
    probe: Any, stage: str, stage_arg: str | None, items: list[Item], op: str | None
) -> int | None:
    """k such that enabling items[:k] fails and items[:k-1] passes (the binary search's
    answer), found from the op's applications; None when the guess does not hold.
    ``probe(label, config) -> bool`` (does the failure show)."""
    cands = candidates(items, op)
    if not cands:
        return None

    def fails(label: str, bisect: dict[str, Any]) -> bool:
        return probe(label, {"stage": stage_arg, "gate": None, "bisect": bisect})

    if fails(f"guided: {len(cands)} application(s) of {op} disabled", skip_config(items, cands)):
        return None
    while len(cands) > 1:
        half = cands[: len(cands) // 2]
        if fails(f"guided: {len(half)} of them disabled", skip_config(items, half)):
            cands = cands[len(half) :]
        else:
            cands = half
    k = cands[0] + 1
    if not fails(f"guided: confirm, enable {k} of {len(items)}", prefix_config(stage, items, k)):
        return None
    if fails(
        f"guided: confirm, enable {k - 1} of {len(items)}", prefix_config(stage, items, k - 1)
    ):
        return None
    return k

"""Delta debugging (Zeller's ddmin) over the one search problem: a case's items
removed a chunk at a time while the failure stays -- subsets first (keep one chunk),
then complements (remove one) -- each round's candidates judged in order through
``Problem.first_failing`` (so ``jobs`` at a time, cached, within the limits).

The graph passes use it (passes.py: delete_nodes, drop_outputs); any format can.
Pure: imports only the problem (tests/unit/test_layers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .problem import Problem

C = TypeVar("C")


def ddmin(
    problem: Problem[C],
    case: C,
    items: Callable[[C], list[str]],
    without: Callable[[C, list[str]], C | None],
    name: str,
) -> C | None:
    """Delta debugging: remove chunks of items while the failure stays."""
    problem.pass_name = name
    best: C | None = None
    current = case
    n = 2
    while True:
        names = items(current)
        if len(names) < 2:
            break
        n = min(n, len(names))
        chunks = _split(names, n)
        # subsets first (keep one chunk), then complements (remove one chunk)
        subsets = [
            (lambda ch=ch, cur=current, ns=names: without(cur, [x for x in ns if x not in ch]))
            for ch in chunks
        ]
        found = problem.first_failing(subsets)
        if found is not None:
            current = best = found
            problem.accept(found)
            n = 2
            continue
        if n > 2:
            comp = [(lambda ch=ch, cur=current: without(cur, ch)) for ch in chunks]
            found = problem.first_failing(comp)
            if found is not None:
                current = best = found
                problem.accept(found)
                n = max(n - 1, 2)
                continue
        if n >= len(names):
            break
        n = min(2 * n, len(names))
    return best


def _split(items: list[str], n: int) -> list[list[str]]:
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        if end > start:
            out.append(items[start:end])
        start = end
    return out

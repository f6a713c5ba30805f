"""Passes that shrink a whole program (the program-level minify, DESIGN.md mechanism
12): the source engine's passes (source_passes.py) work on the module when the search
has no function name; these add what only a program has -- numbers that size its
work (loop counts, training steps, shapes, batch sizes, layer counts) and the
program's own functions, inlined where they are called."""

from __future__ import annotations

import ast
from collections.abc import Callable

from .source_case import Hints, Proposal, Proposals, Search
from .source_passes import (
    branches,
    calls_to_arguments,
    delete_statements,
    drop_call_arguments,
    forward_copies,
    inline_calls,
    loops,
)


def _numbers(tree: ast.AST) -> list[ast.Constant]:
    """Integer literals above 1 (a bool is not a number here)."""
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and type(n.value) is int and n.value > 1
    ]


def shrink_numbers(search: Search, best: str, hints: Hints) -> Proposals:
    """Integer literals to 1, many at once then one at a time (ddmin), then halved: a
    loop of 100 steps runs once, a batch of 64 is 1, a model of 12 layers has one."""
    count = len(_numbers(ast.parse(best)))
    chunk = count
    while chunk >= 1:
        for start in range(0, count, chunk):
            cand = ast.parse(best)
            for node in _numbers(cand)[start : start + chunk]:
                node.value = 1
            yield Proposal(cand, f"{min(chunk, count - start)} number(s) -> 1")
        chunk //= 2
    for i in range(count):
        cand = ast.parse(best)
        node = _numbers(cand)[i]
        node.value //= 2
        yield Proposal(cand, f"a number halved ({node.value * 2} -> {node.value})")


def inline_functions(search: Search, best: str, hints: Hints) -> Proposals:
    """A call of one of the program's own functions (a straight-line body ending in a
    return) -> that body, its parameters bound."""
    tree = ast.parse(best)
    callees = {
        n.name: {"source": ast.unparse(n), "kind": "function"}
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and not n.decorator_list
    }
    if callees:
        yield from inline_calls(search, best, Hints(callees=callees))


PROGRAM_SCHEDULE: tuple[Callable[[Search, str, Hints], Proposals], ...] = (
    delete_statements,
    shrink_numbers,
    loops,
    branches,
    inline_functions,
    calls_to_arguments,
    forward_copies,
    drop_call_arguments,
)

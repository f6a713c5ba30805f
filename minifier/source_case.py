"""A candidate of the source engine, and the gate in front of its oracle (source.py).

A candidate is a module source: the function, helpers the passes introduce, and the
``__bindings__`` / ``__inputs__`` literals the oracle reads.  Helpers here read and
edit candidates as ASTs; passes (source_passes.py) only propose, through ``Search``.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
from collections.abc import Callable
from typing import Any

from .verdict import Verdict, as_verdict

SourceOracle = Callable[[str], Any]
BINDINGS, INPUTS = "__bindings__", "__inputs__"


def size(source: str) -> tuple[int, int]:
    """Smaller is better: AST nodes of the functions, then their characters."""
    tree = ast.parse(source)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return (sum(1 for f in fns for _ in ast.walk(f)), sum(len(ast.unparse(f)) for f in fns))


@dataclasses.dataclass
class Hints:
    """What the oracle's side knows about the frame, for the passes that need it."""

    callees: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    attrs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    lengths: dict[str, int] = dataclasses.field(default_factory=dict)
    values: Callable[[str], dict[str, Any]] | None = None  # locals of a candidate run


class Search:
    def __init__(
        self, oracle: SourceOracle, name: str, max_calls: int, stop: Callable[[], bool]
    ) -> None:
        self.oracle, self.name, self.max_calls, self.stop = oracle, name, max_calls, stop
        self.calls = 0
        self.seen: dict[str, bool] = {}
        self.history: list[str] = []

    def exhausted(self) -> bool:
        return self.calls >= self.max_calls or self.stop()

    def fails(self, candidate: ast.Module, best: str, what: str, grow: bool = False) -> str | None:
        """The candidate's source when it is smaller (or, for an enabling step, ``grow``)
        and fails the same way: the one gate in front of the oracle."""
        try:
            src = ast.unparse(ast.fix_missing_locations(candidate)) + "\n"
            compile(src, "<candidate>", "exec")
        except (SyntaxError, ValueError, TypeError):
            return None
        if src == best or (size(src) >= size(best) and not grow):
            return None
        if src in self.seen:
            return src if self.seen[src] else None
        if self.exhausted():
            return None
        self.calls += 1
        try:
            ok = as_verdict(self.oracle(src)) is Verdict.SAME_FAILURE
        except Exception:
            ok = False
        self.seen[src] = ok
        if ok:
            self.history.append(what)
            return src
        return None


# ---- helpers on candidates --------------------------------------------------------
def function_def(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def get_literal(tree: ast.Module, key: str) -> dict[str, Any]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == key:
            return dict(ast.literal_eval(node.value))
    return {}


def set_literal(tree: ast.Module, key: str, value: dict[str, Any]) -> None:
    tree.body = [
        n for n in tree.body if not (isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == key)
    ]
    if value:
        node = ast.parse(f"{key} = {value!r}").body[0]
        tree.body.insert(0, node)


def blocks_of(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list in the function (its body, branches, loops, with, try)."""
    out = []
    for node in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
    return out


def replace_stmt(tree: ast.AST, old: ast.stmt, new: list[ast.stmt]) -> bool:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(s is old for s in block):
                i = next(j for j, s in enumerate(block) if s is old)
                block[i : i + 1] = new
                return True
    return False


def nth(tree: ast.Module, name: str, kind: Any, i: int) -> Any:
    return [n for n in ast.walk(function_def(tree, name)) if isinstance(n, kind)][i]


def params_of(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]


def add_param(fn: ast.FunctionDef, name: str) -> None:
    """A new positional parameter (before any with a default)."""
    fn.args.args.insert(len(fn.args.args) - len(fn.args.defaults), ast.arg(arg=name))


def fresh_name(taken: set[str], hint: str) -> str:
    base = re.sub(r"\W+", "_", hint).strip("_") or "v"
    base = re.sub(r"^self_", "", base)
    name, i = base, 1
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    return name


def names_in(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)
    }


class Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, ast.expr]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in self.mapping and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(self.mapping[node.id])
        return node


def function_lines(source: str, name: str) -> int:
    """Lines of the function (and helpers) in a candidate, without the literals."""
    tree = ast.parse(source)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    return sum(ast.unparse(f).count("\n") + 1 for f in fns)


def literals(source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A candidate's ``__bindings__`` and ``__inputs__``."""
    tree = ast.parse(source)
    return get_literal(tree, BINDINGS), get_literal(tree, INPUTS)


def with_inputs(source: str, inputs: dict[str, Any]) -> str:
    """The candidate with its ``__inputs__`` replaced (input shrinking)."""
    tree = ast.parse(source)
    set_literal(tree, INPUTS, inputs)
    return ast.unparse(tree) + "\n"

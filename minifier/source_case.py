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
from collections.abc import Callable, Iterator
from typing import Any

from .problem import Candidate, Problem
from .verdict import SourceOracle, Verdict

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
    # anchors (the source level): for each source line of the minimal graph's nodes,
    # the names it calls; a candidate that calls none of one anchor's names is never
    # judged (it lost the op that fails)
    keep: list[frozenset[str]] = dataclasses.field(default_factory=list)
    # a program: the source line its failure is raised from (what follows it at
    # module level never runs: dead_code.py)
    raising: str = ""
    # a program: what one run of a candidate shows about its driver code (observe.py's
    # facts; None: the run did not fail the same way)
    observe: Callable[[str], dict[str, Any] | None] | None = None


class Proposal(Candidate):
    """A candidate a pass proposes: its tree, what it did, and whether it is an enabling
    step that may grow the candidate (inlining, unrolling); ``index``: its place in the
    pass's own order (set by resumed(), source.py)."""

    def __init__(self, tree: ast.Module, what: str, grow: bool = False, index: int = 0) -> None:
        super().__init__(tree, what, grow, index)

    @property
    def tree(self) -> ast.Module:
        return self.make


Proposals = Iterator[Proposal]


class SourceFormat:
    """A module's source as a case of the one problem (problem.py): its key is the
    text; a proposal (a tree) is judged only when it unparses to a program that
    compiles, is smaller than the best (unless an enabling step), binds every name it
    reads (a whole program), and still calls one of each anchor's names."""

    def __init__(self, name: str | None, keep: list[frozenset[str]]) -> None:
        self.name = name
        self.keep = keep

    def key(self, case: str) -> str:
        return case

    def size(self, case: str) -> tuple[int, ...]:
        return program_size(case) if self.name is None else size(case)

    def admit(self, raw: ast.Module | str, best: str, grow: bool) -> str | None:
        tree = ast.parse(raw) if isinstance(raw, str) else raw
        try:
            src = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
            compile(src, "<candidate>", "exec")
        except (SyntaxError, ValueError, TypeError, RecursionError):
            return None
        if src == best or (self.size(src) >= self.size(best) and not grow):
            return None
        if self.name is None and unbound_names(tree) - unbound_names(ast.parse(best)):
            return None  # a program reading a name it no longer defines: a NameError
        if self.keep:
            called = called_names(tree)
            if any(not (k & called) for k in self.keep):
                return None  # an anchor's op is gone: it cannot fail the same way
        return src

    def prepare(self, case: str) -> None:
        pass

    def oracle_input(self, case: str) -> str:
        return case

    def step(self, pass_name: str, what: str, before: str, after: str, calls: int) -> str:
        return what


class Search(Problem[str]):
    """The one problem over a module's source (problem.py), and the scope the passes
    read: candidates that are not admitted or were tried never reach the oracle; the
    rest are judged ``jobs`` at a time (in parallel when more than one), and the first
    that fails the same way, in the pass's own order, is taken.

    ``name``: the function a capture candidate is about; None for a whole program (the
    passes then work on the module, and size counts all of it)."""

    def __init__(
        self,
        oracle: SourceOracle,
        name: str | None,
        max_calls: int,
        stop: Callable[[], bool],
        jobs: int = 1,
        keep: list[frozenset[str]] | None = None,
        on_best: Callable[[str], None] | None = None,
        start: str = "",
    ) -> None:
        self.name = name
        super().__init__(
            SourceFormat(name, [k for k in keep or [] if k]),
            start,
            oracle,
            jobs=jobs,
            limits=stop,
            max_calls=max_calls,
            on_error=Verdict.OTHER_FAILURE,
            reraise=(),
            on_best=on_best,
        )
        # a capture candidate's inlined form is the point (its bindings make it stand
        # alone): every step it takes is kept; a program's growth steps can be taken back
        self.take_back = name is None

    def scope(self, tree: ast.Module) -> ast.AST:
        """What the passes work on: the function, or the whole program."""
        return tree if self.name is None else function_def(tree, self.name)

    def nth(self, tree: ast.Module, kind: Any, i: int) -> Any:
        return [n for n in ast.walk(self.scope(tree)) if isinstance(n, kind)][i]


def called_names(tree: ast.AST) -> set[str]:
    """The names a tree calls: ``f`` of ``f(x)``, ``relu`` of ``torch.relu(x)`` and of
    ``x.relu()``."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute):
                out.add(f.attr)
    return out


def unbound_names(tree: ast.AST) -> set[str]:
    """Names a program reads that nothing in it binds (nor builtins): a cut that leaves
    one fails with NameError, whatever the oracle would say -- never worth a run.  A
    ``global``/``nonlocal``, ``del``, ``exec`` or star import makes the answer unsure:
    then nothing is said."""
    import builtins

    bound: set[str] = set(dir(builtins)) | {"__file__", "__name__", "__builtins__", "__doc__"}
    loads: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Global, ast.Nonlocal)) or (
            isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
        ):
            return set()
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.alias):
            continue
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id
            in (
                "exec",
                "eval",
                "globals",
                "locals",
                "vars",
            )
        ):
            return set()
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and getattr(n, "name", None):
            bound.add(n.name)
    return loads - bound


def program_size(source: str) -> tuple[int, int, int]:
    """A whole program's size: AST nodes, then characters (comments are gone already),
    then the sum of its integer literals (a loop of 100 steps is bigger than one of 50)."""
    tree = ast.parse(source)
    numbers = sum(
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int
    )
    return (sum(1 for _ in ast.walk(tree)), len(ast.unparse(tree)), numbers)


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

"""Passes that shrink a whole program (the program-level minify, DESIGN.md mechanism
12): the source engine's passes (source_passes.py) work on the module when the search
has no function name; these add what only a program has -- numbers that size its
work (loop counts, training steps, shapes, batch sizes, layer counts) and the
program's own functions, inlined where they are called."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any

from .class_passes import hoist_submodules, instances_to_globals, tidy_names, unwrap_module_lists
from .dead_code import BOLD, remove_dead_code
from .observed_passes import observed_branches, observed_loops, observed_values
from .source_case import (
    Hints,
    Proposal,
    Proposals,
    Search,
)
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
    """Integer literals to 1, many at once then one at a time (ddmin): a loop of 100
    steps runs once, a batch of 64 is 1, a model of 12 layers has one."""
    count = len(_numbers(ast.parse(best)))
    chunk = count
    while chunk >= 1:
        for start in range(0, count, chunk):
            cand = ast.parse(best)
            for node in _numbers(cand)[start : start + chunk]:
                node.value = 1
            yield Proposal(cand, f"{min(chunk, count - start)} number(s) -> 1")
        chunk //= 2


def halve_numbers(search: Search, best: str, hints: Hints) -> Proposals:
    """Integer literals that could not be 1, halved (a shape of 64 that must stay even
    is 32, then 16, ...)."""
    count = len(_numbers(ast.parse(best)))
    for i in range(count):
        cand = ast.parse(best)
        node = _numbers(cand)[i]
        node.value //= 2
        yield Proposal(cand, f"a number halved ({node.value * 2} -> {node.value})")


def dead_code(search: Search, best: str, hints: Hints) -> Proposals:
    """What the program no longer needs, found by reading it (dead_code.py): every bold
    step at once, then the safe removals alone, then each bold step on top of them --
    one run each, where ddmin would spend one per statement."""
    for bold in (set(BOLD), set(), *({b} for b in BOLD)):
        cand = ast.parse(best)
        if remove_dead_code(cand, bold, hints.raising):
            what = "all" if len(bold) > 1 else (next(iter(bold)) if bold else "safe")
            yield Proposal(cand, f"dead code removed ({what})")


def inline_functions(search: Search, best: str, hints: Hints) -> Proposals:
    """A call of one of the program's own functions, methods or modules -> that body,
    its parameters bound (source_passes.inline_calls: a body ending in its only
    return, or one that returns nothing called as a statement)."""
    callees = program_callees(ast.parse(best))
    if callees:
        yield from inline_calls(search, best, Hints(callees=callees))


def _plain(fn: ast.stmt) -> bool:
    return isinstance(fn, ast.FunctionDef) and not fn.decorator_list


def _assigned(tree: ast.Module) -> dict[str, set[ast.expr]]:
    """Each name or attribute (``v``, ``self.v``) the program assigns -> the values
    assigned to it, anywhere in the program."""
    out: dict[str, set[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, (ast.Name, ast.Attribute)):
                    out.setdefault(ast.unparse(t), set()).add(node.value)
    return out


def _class_of(values: set[ast.expr]) -> str:
    """The class every value constructs (``C(...)``), else ``""``."""
    made = {ast.unparse(v.func) if isinstance(v, ast.Call) else "" for v in values}
    return made.pop() if len(made) == 1 else ""


def program_callees(tree: ast.Module) -> dict[str, dict[str, str]]:
    """What a call can be inlined from, by the text of the called expression:

    * ``f(...)``: a module-level function;
    * ``v.m(...)``: a method of class C, where the program binds ``v = C(...)`` (once,
      or always to C) -- also ``self.v = C(...)`` for ``self.v.m(...)``;
    * ``v(...)``: C's ``forward``, where C defines one (an ``nn.Module``: its hooks do
      not run then, and the oracle says whether the failure needed them).

    Dunder methods, decorated ones (properties, static methods) and generators are not
    callees."""
    callees: dict[str, dict[str, str]] = {
        n.name: {"source": ast.unparse(n), "kind": "function"} for n in tree.body if _plain(n)
    }
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    for var, values in _assigned(tree).items():
        cls = classes.get(_class_of(values))
        if cls is None or var in callees:
            continue
        for m in cls.body:
            if not _plain(m) or m.name.startswith("__"):  # type: ignore[attr-defined]
                continue
            src = ast.unparse(m)
            if m.name == "forward":  # type: ignore[attr-defined]
                callees[var] = {"source": src, "kind": "module"}
            callees[f"{var}.{m.name}"] = {"source": src, "kind": "method"}  # type: ignore[attr-defined]
    return callees


def _literal(node: ast.expr | None) -> bool:
    try:
        ast.literal_eval(node)  # type: ignore[arg-type]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return node is not None


def _fields(tree: ast.Module) -> dict[str, dict[str, ast.expr]]:
    """Each class -> the literals its body gives names (dataclass defaults, constants)."""
    out: dict[str, dict[str, ast.expr]] = {}
    for c in tree.body:
        if not isinstance(c, ast.ClassDef):
            continue
        for st in c.body:
            target = st.target if isinstance(st, ast.AnnAssign) else None
            if isinstance(st, ast.Assign) and len(st.targets) == 1:
                target = st.targets[0]
            if isinstance(target, ast.Name) and _literal(st.value):  # type: ignore[attr-defined]
                out.setdefault(c.name, {})[target.id] = st.value  # type: ignore[attr-defined]
    return out


def _receivers(tree: ast.Module, fields: dict[str, dict[str, ast.expr]]) -> dict[str, dict]:
    """Names that always hold an object of one of those classes (``cfg = Config(...)``,
    or a parameter ``cfg: Config``) -> the literal of each field it reads: the class's,
    or a literal keyword of its one constructor call (a keyword that is not a literal
    takes the field out)."""
    assigned = {k: v for k, v in _assigned(tree).items() if "." not in k}
    annotated: dict[str, set[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            ann = ast.unparse(node.annotation).strip("'\"")
            annotated.setdefault(node.arg, set()).add(ast.Call(ast.Name(ann), [], []))
    out: dict[str, dict] = {c: dict(f) for c, f in fields.items() if c not in assigned}
    for name in assigned.keys() | annotated.keys():
        values = assigned.get(name, set())
        cls = _class_of(values | annotated.get(name, set()))
        if cls not in fields:
            continue
        literals = dict(fields[cls])
        calls = {ast.unparse(v): v for v in values if isinstance(v, ast.Call)}
        if len(calls) == 1:
            for k in next(iter(calls.values())).keywords:
                if k.arg in literals and ast.unparse(k.value) != f"{cls}.{k.arg}":
                    if _literal(k.value):
                        literals[k.arg] = k.value
                    else:
                        literals.pop(k.arg)
        out[name] = literals
    return out


class _FieldsToLiterals(ast.NodeTransformer):
    def __init__(self, receivers: dict[str, dict], group: set[str]) -> None:
        self.receivers, self.group = receivers, group

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name):
            if f"{node.value.id}.{node.attr}" in self.group:
                return copy.deepcopy(self.receivers[node.value.id][node.attr])
        return node


def fields_to_literals(search: Search, best: str, hints: Hints) -> Proposals:
    """``cfg.width`` -> ``64``, where the program binds ``cfg = Config(...)`` or takes
    ``cfg: Config``, and Config's class body gives ``width`` a literal (a dataclass
    field's default, a class constant); a literal keyword of the constructor call wins
    (``Config.width`` itself, the class's, too).
    All of a class's reads at once, then one field at a time: once nothing reads
    ``cfg``, the class and the object go the way of any unused code."""
    tree = ast.parse(best)
    fields = _fields(tree)
    yield from _reads_replaced(best, _receivers(tree, fields) if fields else {}, "literals")


def _reads_replaced(best: str, table: dict[str, dict[str, ast.expr]], what: str) -> Proposals:
    """Each ``name.attr`` the program reads, where ``table[name][attr]`` is known ->
    that expression: all of them at once, then one at a time."""
    tree = ast.parse(best)
    reads = sorted(
        {
            f"{n.value.id}.{n.attr}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name)
            and n.attr in table.get(n.value.id, {})
        }
    )
    groups = [reads] + ([[r] for r in reads] if len(reads) > 1 else []) if reads else []
    for group in groups:
        cand = _FieldsToLiterals(table, set(group)).visit(ast.parse(best))
        more = " ..." if len(group) > 3 else ""
        yield Proposal(cand, f"{', '.join(group[:3])}{more} -> {what}")


def _options(tree: ast.Module) -> dict[str, dict[str, ast.expr]]:
    """``args = parser.parse_args()`` of ``parser = argparse.ArgumentParser(...)`` ->
    each option's default as an expression: ``default=``'s, False for ``store_true``,
    True for ``store_false``, else None (what argparse gives when the option is not
    on the command line)."""
    parsers = {
        name
        for name, values in _assigned(tree).items()
        if _class_of(values).split(".")[-1] == "ArgumentParser"
    }
    defaults: dict[str, dict[str, ast.expr]] = {}
    for n in ast.walk(tree):
        call = n if isinstance(n, ast.Call) else None
        if call is None or not isinstance(call.func, ast.Attribute):
            continue
        owner = ast.unparse(call.func.value)
        if owner not in parsers or call.func.attr != "add_argument":
            continue
        flags = [a.value for a in call.args if isinstance(a, ast.Constant)]
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        longs = [f for f in flags if isinstance(f, str) and f.startswith("--")]
        if "dest" in kw and isinstance(kw["dest"], ast.Constant):
            dest = str(kw["dest"].value)
        elif longs:
            dest = longs[0][2:].replace("-", "_")
        else:
            continue  # a positional argument: its value is on the command line
        action = kw.get("action")
        act = action.value if isinstance(action, ast.Constant) else None
        if act == "store_true":
            value: ast.expr = ast.Constant(False)
        elif act == "store_false":
            value = ast.Constant(True)
        else:
            value = copy.deepcopy(kw.get("default", ast.Constant(None)))
        defaults.setdefault(owner, {})[dest] = value
    out: dict[str, dict[str, ast.expr]] = {}
    for name, values in _assigned(tree).items():
        calls = [v for v in values if isinstance(v, ast.Call)]
        if "." in name or len(calls) != len(values) or not calls:
            continue
        owners = {
            ast.unparse(c.func.value)
            for c in calls
            if isinstance(c.func, ast.Attribute) and c.func.attr == "parse_args"
        }
        if len(owners) == 1 and len(calls) == 1 and owners <= defaults.keys():
            out[name] = defaults[owners.pop()]
    return out


def options_to_defaults(search: Search, best: str, hints: Hints) -> Proposals:
    """``args.steps`` -> the option's default (``args = parser.parse_args()``): the
    command line the program was minified with rarely sets them all, and a training
    script's argument parsing is then unused code.  All at once, then one at a time."""
    yield from _reads_replaced(best, _options(ast.parse(best)), "the option's default")


Pass = Callable[[Search, str, Hints], Proposals]

# Two phases, each to its fixed point: first the passes that take whole statements,
# definitions and iterations away; then, on what is left, also those that shave
# expressions (a call -> its argument, a copy forwarded, an argument dropped, a number
# halved).  In one phase from the start, a 200-line program spent as many runs
# dropping keyword arguments as deleting statements, and ran out of runs with dead
# code in it.
_REMOVING: tuple[Pass, ...] = (
    dead_code,
    delete_statements,
    options_to_defaults,
    fields_to_literals,
    shrink_numbers,
    loops,
    branches,
    inline_functions,
    observed_loops,
    observed_branches,
    observed_values,
    hoist_submodules,
    unwrap_module_lists,
    instances_to_globals,
)
PROGRAM_PHASES: tuple[tuple[Pass, ...], ...] = (
    _REMOVING,
    (
        *_REMOVING,
        calls_to_arguments,
        forward_copies,
        drop_call_arguments,
        halve_numbers,
        tidy_names,
    ),
)
PROGRAM_SCHEDULE = PROGRAM_PHASES[-1]

# passes that resume where they last succeeded (source.minify_source)
RESUMABLE = frozenset(
    f.__name__
    for f in (
        delete_statements,
        shrink_numbers,
        halve_numbers,
        loops,
        branches,
        calls_to_arguments,
        forward_copies,
        drop_call_arguments,
    )
)

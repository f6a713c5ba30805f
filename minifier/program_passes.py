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
    """A call of one of the program's own functions, methods or modules -> that body,
    its parameters bound (source_passes.inline_calls: a body ending in its only
    return, or one that returns nothing called as a statement)."""
    callees = program_callees(ast.parse(best))
    if callees:
        yield from inline_calls(search, best, Hints(callees=callees))


def _plain(fn: ast.stmt) -> bool:
    return isinstance(fn, ast.FunctionDef) and not fn.decorator_list


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
    bound: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            cls = ast.unparse(node.value.func)
            for t in node.targets:
                if isinstance(t, (ast.Name, ast.Attribute)):
                    bound.setdefault(ast.unparse(t), set()).add(cls)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, (ast.Name, ast.Attribute)):
                    bound.setdefault(ast.unparse(t), set()).add("")
    for var, kinds in bound.items():
        if len(kinds) != 1 or next(iter(kinds)) not in classes or var in callees:
            continue
        cls = classes[next(iter(kinds))]
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


def fields_to_literals(search: Search, best: str, hints: Hints) -> Proposals:
    """``cfg.width`` -> ``64``, where the program binds ``cfg = Config(...)`` or takes
    ``cfg: Config``, and Config's class body gives ``width`` a literal (a dataclass
    field's default, a class constant); a literal keyword of the constructor call wins.
    All of a class's reads at once, then one field at a time: once nothing reads
    ``cfg``, the class and the object go the way of any unused code."""
    tree = ast.parse(best)
    fields: dict[str, dict[str, ast.expr]] = {}
    for c in tree.body:
        if isinstance(c, ast.ClassDef):
            for st in c.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    if _literal(st.value):
                        fields.setdefault(c.name, {})[st.target.id] = st.value  # type: ignore[assignment]
                elif isinstance(st, ast.Assign) and len(st.targets) == 1:
                    t = st.targets[0]
                    if isinstance(t, ast.Name) and _literal(st.value):
                        fields.setdefault(c.name, {})[t.id] = st.value
    if not fields:
        return
    # receivers: name -> (class, the constructor's literal keywords)
    kinds: dict[str, set[tuple[str, str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            call = node.value
            cls = ast.unparse(call.func) if isinstance(call, ast.Call) else ""
            key = cls if cls in fields else ""
            for t in node.targets:
                if isinstance(t, ast.Name):
                    kinds.setdefault(t.id, set()).add((key, ast.unparse(call) if key else ""))
        elif isinstance(node, ast.arg) and node.annotation is not None:
            ann = ast.unparse(node.annotation).strip("'\"")
            kinds.setdefault(node.arg, set()).add((ann if ann in fields else "", ""))
    receivers: dict[str, tuple[str, dict[str, ast.expr]]] = {}
    for name, ks in kinds.items():
        classes = {k for k, _ in ks}
        if len(classes) != 1 or "" in classes:
            continue
        cls = next(iter(classes))
        values = dict(fields[cls])
        calls = {c for _, c in ks if c}
        if len(calls) == 1:  # one constructor call: its literal keywords win
            call = ast.parse(next(iter(calls)), mode="eval").body
            for k in call.keywords:  # type: ignore[attr-defined]
                if k.arg in values:
                    if _literal(k.value):
                        values[k.arg] = k.value
                    else:
                        values.pop(k.arg)
        receivers[name] = (cls, values)
    reads = [
        (n, i)
        for i, n in enumerate(ast.walk(tree))
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and isinstance(n.value, ast.Name)
        and n.value.id in receivers
        and n.attr in receivers[n.value.id][1]
    ]
    if not reads:
        return
    groups = [sorted({f"{n.value.id}.{n.attr}" for n, _ in reads})]  # type: ignore[attr-defined]
    groups += [[g] for g in groups[0]] if len(groups[0]) > 1 else []
    for group in groups:
        cand = ast.parse(best)
        for node in list(ast.walk(cand)):
            for field, value in ast.iter_fields(node):
                items = value if isinstance(value, list) else [value]
                for j, item in enumerate(items):
                    if (
                        isinstance(item, ast.Attribute)
                        and isinstance(item.ctx, ast.Load)
                        and isinstance(item.value, ast.Name)
                        and f"{item.value.id}.{item.attr}" in group
                    ):
                        lit = receivers[item.value.id][1][item.attr]
                        if isinstance(value, list):
                            value[j] = lit
                        else:
                            setattr(node, field, lit)
        yield Proposal(
            cand, f"{', '.join(group[:3])}{' ...' if len(group) > 3 else ''} -> literals"
        )


PROGRAM_SCHEDULE: tuple[Callable[[Search, str, Hints], Proposals], ...] = (
    delete_statements,
    fields_to_literals,
    shrink_numbers,
    loops,
    branches,
    inline_functions,
    calls_to_arguments,
    forward_copies,
    drop_call_arguments,
)

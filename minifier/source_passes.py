"""The passes of the source engine (source.py); each proposes candidates and asks
``Search.fails`` -- the gate -- whether one still fails the same way.  The rules are
those of minifier/passes.py: small, named, testable alone; the schedule is data."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from typing import Any

from .source_case import (
    BINDINGS,
    INPUTS,
    Hints,
    Proposal,
    Proposals,
    Rename,
    Search,
    add_param,
    blocks_of,
    fresh_name,
    get_literal,
    names_in,
    params_of,
    replace_stmt,
    set_literal,
)


def delete_statements(search: Search, best: str, hints: Hints) -> Proposals:
    tree = ast.parse(best)
    for b, block in enumerate(blocks_of(search.scope(tree))):
        n = len(block)
        optional = any(block is getattr(node, "orelse", None) for node in ast.walk(tree))
        chunk = n if optional else max(1, n // 2)
        while chunk >= 1:
            for start in range(0, n, chunk):
                cand = ast.parse(best)
                target = blocks_of(search.scope(cand))[b]
                if chunk >= n and not optional:  # a block keeps one statement: `pass`
                    if n == 1 and not isinstance(target[0], ast.Pass):
                        target[:] = [ast.Pass()]
                    else:
                        continue
                else:  # an else block may go entirely
                    del target[start : start + chunk]
                yield Proposal(cand, f"delete {chunk} statement(s)")
            chunk //= 2


def branches(search: Search, best: str, hints: Hints) -> Proposals:
    tree = ast.parse(best)
    count = sum(1 for n in ast.walk(search.scope(tree)) if isinstance(n, ast.If))
    for i in range(count):
        for side in ("body", "orelse"):
            cand = ast.parse(best)
            node = search.nth(cand, ast.If, i)
            if getattr(node, side) and replace_stmt(cand, node, getattr(node, side)):
                yield Proposal(cand, f"if -> its {side}")


def loops(search: Search, best: str, hints: Hints) -> Proposals:
    tree = ast.parse(best)
    count = sum(1 for n in ast.walk(search.scope(tree)) if isinstance(n, ast.For))
    for i in range(count):
        for once in (True, False):
            cand = ast.parse(best)
            node = search.nth(cand, ast.For, i)
            if once:
                first = ast.Assign(
                    targets=[node.target],
                    value=ast.Call(
                        ast.Name("next", ast.Load()),
                        [ast.Call(ast.Name("iter", ast.Load()), [node.iter], [])],
                        [],
                    ),
                )
                new: list[ast.stmt] = [first, *node.body]
            else:
                new = [ast.Pass()]
            if replace_stmt(cand, node, new):
                yield Proposal(cand, "loop run once" if once else "loop dropped")


def unroll_loops(search: Search, best: str, hints: Hints) -> Proposals:
    tree = ast.parse(best)
    fors = [n for n in ast.walk(search.scope(tree)) if isinstance(n, ast.For)]
    for i, node in enumerate(fors):
        it = ast.unparse(node.iter)
        if it not in hints.lengths or not isinstance(node.target, ast.Name) or node.orelse:
            continue
        cand = ast.parse(best)
        loop = search.nth(cand, ast.For, i)
        body: list[ast.stmt] = []
        for k in range(hints.lengths[it]):
            item = ast.parse(f"{it}[{k}]", mode="eval").body
            body += [Rename({loop.target.id: item}).visit(copy.deepcopy(s)) for s in loop.body]
        if replace_stmt(cand, loop, body or [ast.Pass()]):
            yield Proposal(cand, f"unroll {it}", True)


def calls_to_arguments(search: Search, best: str, hints: Hints) -> Proposals:
    """A call -> one of its arguments that is a plain name (``h = F.linear(t, w)`` ->
    ``h = t``): the call is not what fails; its input stands in for its output."""
    tree = ast.parse(best)
    count = sum(1 for n in ast.walk(search.scope(tree)) if isinstance(n, ast.Call))
    for i in range(count):
        call = search.nth(tree, ast.Call, i)
        names = [a.id for a in call.args if isinstance(a, ast.Name)]
        for name in dict.fromkeys(names):
            cand = ast.parse(best)
            old = search.nth(cand, ast.Call, i)
            _swap_expr(search.scope(cand), old, ast.Name(name, ast.Load()))
            yield Proposal(cand, f"{ast.unparse(call.func)}(...) -> {name}")


class _Subst(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.old and isinstance(node.ctx, ast.Load):
            return ast.Name(self.new, ast.Load())
        return node


def forward_copies(search: Search, best: str, hints: Hints) -> Proposals:
    """``v = w`` (two names) goes, and the statements after it read ``w`` for ``v``, up
    to the one that assigns ``v`` again (its value side included)."""
    tree = ast.parse(best)
    for b, block in enumerate(blocks_of(search.scope(tree))):
        for i, stmt in enumerate(block):
            if not (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Name)
            ):
                continue
            old, new = stmt.targets[0].id, stmt.value.id
            cand = ast.parse(best)
            target = blocks_of(search.scope(cand))[b]
            rest = target[i + 1 :]
            del target[i:]
            subst = _Subst(old, new)
            for j, later in enumerate(rest):
                assigns = any(
                    isinstance(n, ast.Name) and n.id == old and isinstance(n.ctx, ast.Store)
                    for n in ast.walk(later)
                )
                if assigns and isinstance(later, ast.Assign):
                    later.value = subst.visit(later.value)
                    target += rest[j:]
                    break
                target.append(subst.visit(later))
            if not target:
                target.append(ast.Pass())
            yield Proposal(cand, f"{old} = {new} forwarded")


def drop_call_arguments(search: Search, best: str, hints: Hints) -> Proposals:
    """A call's trailing positional arguments and its keyword arguments, one at a time
    (``F.linear(x, w, b)`` -> ``F.linear(x, w)``): optional ones go, and with them the
    parameters only they read."""
    tree = ast.parse(best)
    count = sum(1 for n in ast.walk(search.scope(tree)) if isinstance(n, ast.Call))
    for i in range(count):
        call = search.nth(tree, ast.Call, i)
        options = [("keyword", k) for k in range(len(call.keywords))]
        options += [("positional", len(call.args) - 1)] if len(call.args) > 1 else []
        for kind, k in options:
            cand = ast.parse(best)
            c = search.nth(cand, ast.Call, i)
            if kind == "keyword":
                del c.keywords[k]
            else:
                del c.args[k]
            yield Proposal(cand, f"drop a {kind} argument of {ast.unparse(call.func)}")


def drop_arguments(search: Search, best: str, hints: Hints) -> Proposals:
    tree = ast.parse(best)
    fn = search.scope(tree)
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    unused = [a for a in params_of(fn) if a not in used]
    if not unused:
        return None
    cand = ast.parse(best)
    f = search.scope(cand)
    f.args.posonlyargs = [a for a in f.args.posonlyargs if a.arg not in unused]
    f.args.args = [a for a in f.args.args if a.arg not in unused]
    f.args.kwonlyargs = [a for a in f.args.kwonlyargs if a.arg not in unused]
    f.args.defaults, f.args.kw_defaults = [], [None] * len(f.args.kwonlyargs)
    f.args.vararg = f.args.vararg if f.args.vararg and f.args.vararg.arg in used else None
    f.args.kwarg = f.args.kwarg if f.args.kwarg and f.args.kwarg.arg in used else None
    for key in (BINDINGS, INPUTS):
        lit = get_literal(cand, key)
        set_literal(cand, key, {k: v for k, v in lit.items() if k not in unused})
    yield Proposal(cand, f"drop argument(s) {', '.join(unused)}")


class _AttrSwap(ast.NodeTransformer):
    """Attribute reads named in ``attrs`` -> literals (constants) or new parameters
    bound to them (tensors); ``only`` limits it to one of the two."""

    def __init__(self, attrs: dict[str, Any], only: str | None, taken: set[str]) -> None:
        self.attrs, self.only, self.taken = attrs, only, taken
        self.bound: dict[str, str] = {}

    def generic_visit(self, node: ast.AST) -> Any:
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(
            getattr(node, "ctx", None), ast.Load
        ):
            key = ast.unparse(node)
            what = self.attrs.get(key)
            if what and (self.only is None or self.only in what):
                if "constant" in what:
                    return ast.parse(what["constant"], mode="eval").body
                name = next((k for k, v in self.bound.items() if v == key), None)
                if name is None:
                    name = fresh_name(self.taken, key)
                    self.taken.add(name)
                    self.bound[name] = key
                return ast.Name(name, ast.Load())
        return super().generic_visit(node)


def attrs_to_inputs(search: Search, best: str, hints: Hints) -> Proposals:
    """Module attributes the function reads become parameters (tensors) or literals
    (numbers): all at once, then constants alone, then tensors alone."""
    if not hints.attrs:
        return None
    for only in (None, "constant", "tensor"):
        cand = ast.parse(best)
        fn = search.scope(cand)
        swap = _AttrSwap(hints.attrs, only, names_in(cand))
        fn.body = [swap.visit(s) for s in fn.body]
        if ast.unparse(cand) == ast.unparse(ast.parse(best)):
            continue
        for p in swap.bound:
            add_param(fn, p)
        set_literal(cand, BINDINGS, {**get_literal(cand, BINDINGS), **swap.bound})
        yield Proposal(cand, f"attributes to inputs ({only or 'all'})")


def values_to_inputs(search: Search, best: str, hints: Hints) -> Proposals:
    """``v = <expr>`` (v assigned once, a tensor or a number) -> v a fresh input."""
    if hints.values is None:
        return None
    values = hints.values(best)
    tree = ast.parse(best)
    fn = search.scope(tree)
    counts: dict[str, int] = {}
    for n in ast.walk(fn):
        for t in getattr(n, "targets", []) or []:
            for name in ast.walk(t):
                if isinstance(name, ast.Name):
                    counts[name.id] = counts.get(name.id, 0) + 1
    params = set(params_of(fn))
    simple = [
        (i, s.targets[0].id)
        for i, s in enumerate(fn.body)
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and counts.get(s.targets[0].id) == 1
        and s.targets[0].id not in params
        and s.targets[0].id in values
    ]
    for i, name in reversed(simple):  # nearest the failure first
        cand = ast.parse(best)
        f = search.scope(cand)
        del f.body[i]
        if not f.body:
            f.body = [ast.Pass()]
        add_param(f, name)
        inputs = get_literal(cand, INPUTS)
        what = values[name]
        inputs[name] = (
            what["tensor"] if "tensor" in what else {"value": ast.literal_eval(what["constant"])}
        )
        inputs[name].pop("values", None)
        set_literal(cand, INPUTS, inputs)
        yield Proposal(cand, f"{name} as an input")


def inline_calls(search: Search, best: str, hints: Hints) -> Proposals:
    """A call to a known callee -> its body, parameters bound; one inside an expression
    is lifted into an assignment first."""
    if not hints.callees:
        return None
    tree = ast.parse(best)
    calls = [
        n
        for n in ast.walk(search.scope(tree))
        if isinstance(n, ast.Call) and ast.unparse(n.func) in hints.callees
    ]
    for i in range(len(calls)):
        cand = ast.parse(best)
        fn = search.scope(cand)
        call = [
            n
            for n in ast.walk(fn)
            if isinstance(n, ast.Call) and ast.unparse(n.func) in hints.callees
        ][i]
        dotted = ast.unparse(call.func)
        stmt = _statement_of(fn, call)
        if stmt is None:
            continue
        taken = names_in(cand)
        if not (isinstance(stmt, (ast.Assign, ast.Return, ast.Expr)) and stmt.value is call):
            temp = fresh_name(taken, "t")  # lift it: t = call; ... t ...
            lifted = ast.Assign(targets=[ast.Name(temp, ast.Store())], value=call)
            _swap_expr(stmt, call, ast.Name(temp, ast.Load()))
            replace_stmt(cand, stmt, [lifted, stmt])
            stmt = lifted
        body = _inlined(hints.callees[dotted], call, stmt, taken)
        if body is None or not replace_stmt(cand, stmt, body):
            continue
        yield Proposal(cand, f"inline {dotted}", True)


def _statement_of(fn: ast.FunctionDef, target: ast.AST) -> ast.stmt | None:
    """The innermost statement holding ``target`` (not inside a nested def/lambda)."""
    found = None
    for block in blocks_of(fn):
        for stmt in block:
            if any(n is target for n in ast.walk(stmt)):
                found = stmt
    if found is not None and isinstance(found, (ast.If, ast.For, ast.While, ast.With)):
        head = getattr(found, "test", None) or getattr(found, "iter", None)
        if head is None or not any(n is target for n in ast.walk(head)):
            return None
    return found


def _swap_expr(root: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for node in ast.walk(root):
        for field, value in ast.iter_fields(node):
            if value is old:
                setattr(node, field, new)
            elif isinstance(value, list):
                for j, item in enumerate(value):
                    if item is old:
                        value[j] = new


def _bind(
    fn: ast.FunctionDef, call: ast.Call, actual: list[ast.expr]
) -> dict[str, ast.expr] | None:
    """The callee's parameters -> the caller's expressions: positional, then keywords by
    name, then the defaults; None when a parameter stays unbound or the call passes
    ``*args``/``**kwargs``."""
    args = fn.args
    if args.vararg or args.kwarg or args.posonlyargs:
        return None
    if any(isinstance(a, ast.Starred) for a in actual) or any(k.arg is None for k in call.keywords):
        return None
    params = [a.arg for a in args.args]
    if len(actual) > len(params):
        return None
    bound: dict[str, ast.expr] = dict(zip(params, actual))
    kwonly = [a.arg for a in args.kwonlyargs]
    for k in call.keywords:
        if k.arg in bound or k.arg not in params + kwonly:
            return None
        bound[str(k.arg)] = k.value
    defaults = dict(zip(params[len(params) - len(args.defaults) :], args.defaults))
    defaults.update({a: d for a, d in zip(kwonly, args.kw_defaults) if d is not None})
    for name in params + kwonly:
        if name not in bound:
            if name not in defaults:
                return None
            bound[name] = defaults[name]
    return bound


def _inlined(
    callee: dict[str, Any], call: ast.Call, stmt: ast.stmt, taken: set[str]
) -> list[ast.stmt] | None:
    """The callee's body for ``stmt``: ``v = call`` / ``return call`` of a body that
    ends in its only return, or ``call`` as a statement of a body that returns nothing
    (or only at its end)."""
    fn = ast.parse(callee["source"]).body[0]
    if not isinstance(fn, ast.FunctionDef):
        return None
    actual: list[ast.expr] = list(call.args)
    kind = callee.get("kind", "function")
    if kind == "module":  # self.layer(x): the module is the callee's self
        actual = [call.func, *actual]
    elif kind == "method":  # self.helper(x)
        if not isinstance(call.func, ast.Attribute):
            return None
        actual = [call.func.value, *actual]
    mapping = _bind(fn, call, actual)
    if mapping is None:
        return None
    body = list(fn.body)
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # its docstring
    own = [n for s in body for n in _walk_own(s)]
    if any(
        isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal)) for n in own
    ):
        return None
    returns = [n for n in own if isinstance(n, ast.Return)]
    ends = bool(body) and isinstance(body[-1], ast.Return)
    if isinstance(stmt, ast.Expr) and stmt.value is call:
        if returns and not (len(returns) == 1 and ends):
            return None
    elif not (ends and len(returns) == 1):
        return None
    # the callee's own locals get names the caller does not use
    local = {
        n.id
        for s in body
        for n in _walk_own(s)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    } - set(mapping)
    for name in sorted(local):
        new = fresh_name(taken, name)
        taken.add(new)
        mapping[name] = ast.Name(new, ast.Load())
    renamer = _RenameAll(mapping)
    new_body = [renamer.visit(copy.deepcopy(s)) for s in body]
    if isinstance(stmt, ast.Expr):
        last = new_body[-1] if new_body else None
        if isinstance(last, ast.Return):
            new_body[-1:] = [ast.Expr(last.value)] if last.value is not None else []
        return new_body or [ast.Pass()]
    last = new_body[-1]
    assert isinstance(last, ast.Return)
    if isinstance(stmt, ast.Return):
        return new_body
    assert isinstance(stmt, ast.Assign)
    new_body[-1] = ast.Assign(targets=stmt.targets, value=last.value or ast.Constant(None))
    return new_body


def _walk_own(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` that does not enter nested functions, lambdas and classes (their
    returns and locals are their own)."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        for child in ast.iter_child_nodes(n):
            if not isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
            ):
                todo.append(child)


class _RenameAll(Rename):
    """Parameters -> the caller's expressions (loads); the callee's locals renamed
    (loads and stores)."""

    def visit_Name(self, node: ast.Name) -> Any:
        new = self.mapping.get(node.id)
        if new is None:
            return node
        if isinstance(node.ctx, ast.Load):
            return copy.deepcopy(new)
        if isinstance(new, ast.Name):
            return ast.Name(new.id, node.ctx)
        return node


SCHEDULE: tuple[Callable[[Search, str, Hints], str | None], ...] = (
    inline_calls,
    unroll_loops,
    attrs_to_inputs,
    values_to_inputs,
    branches,
    loops,
    delete_statements,
    calls_to_arguments,
    forward_copies,
    drop_call_arguments,
    drop_arguments,
)

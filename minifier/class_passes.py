"""Program passes that take the program's classes apart once inlining has emptied
them: a submodule's layers hoisted into its parent, a one-layer module list unwrapped,
a plain instance turned into variables and functions -- and, last, the names inlining
suffixed put back.  Pure AST; the oracle judges each candidate."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any

from .dead_code import remove_dead_code
from .observed_passes import _own_exits
from .source_case import (
    Hints,
    Proposal,
    Proposals,
    Rename,
    Search,
    fresh_name,
    names_in,
    replace_stmt,
)


class _Hoisted(ast.NodeTransformer):
    """``<x>.field.attr`` -> ``<x>.field_attr`` for the hoisted class's attributes."""

    def __init__(self, field: str, names: dict[str, str]) -> None:
        self.field, self.names = field, names

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self.generic_visit(node)
        inner = node.value
        if (
            isinstance(inner, ast.Attribute)
            and inner.attr == self.field
            and node.attr in self.names
        ):
            return ast.Attribute(inner.value, self.names[node.attr], node.ctx)
        return node


def hoist_submodules(search: Search, best: str, hints: Hints) -> Proposals:
    """A class whose only method is ``__init__`` setting attributes (an ``nn.Module``
    of layers whose forward was inlined already), built once as ``self.ff =
    FeedForward(d, h)`` -> its layers set on the parent (``self.ff_up = nn.Linear(d,
    h)``), and ``.ff.up`` read as ``.ff_up`` everywhere.  The class is then dead code."""
    tree = ast.parse(best)
    classes = [c for c in tree.body if isinstance(c, ast.ClassDef)]
    for cls in classes:
        methods = [m for m in cls.body if isinstance(m, ast.FunctionDef)]
        if len(methods) != 1 or methods[0].name != "__init__" or methods[0].decorator_list:
            continue
        if any(not isinstance(m, (ast.FunctionDef, ast.Pass, ast.Expr)) for m in cls.body):
            continue
        init = methods[0]
        me = init.args.args[0].arg if init.args.args else "self"
        made = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == cls.name
        ]
        if len(made) != 1:
            continue
        cand = ast.parse(best)
        call = next(
            n
            for n in ast.walk(cand)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == cls.name
        )
        st = next(
            (
                s
                for s in ast.walk(cand)
                if isinstance(s, ast.Assign)
                and s.value is call
                and len(s.targets) == 1
                and isinstance(s.targets[0], ast.Attribute)
            ),
            None,
        )
        if st is None or init.args.vararg or init.args.kwarg:
            continue
        holder: ast.Attribute = st.targets[0]  # type: ignore[assignment]
        params = [a.arg for a in init.args.args[1:]]
        bound: dict[str, ast.expr] = dict(zip(params, call.args))
        defaults = init.args.defaults
        for p, d in zip(params[len(params) - len(defaults) :], defaults):
            bound.setdefault(p, d)
        bound.update({k.arg: k.value for k in call.keywords if k.arg})
        if set(params) - set(bound) or len(call.args) > len(params):
            continue
        taken = names_in(cand) | {n.attr for n in ast.walk(cand) if isinstance(n, ast.Attribute)}
        names: dict[str, str] = {}
        body: list[ast.stmt] = []
        ok = True
        for s in copy.deepcopy(init.body):
            if (
                isinstance(s, ast.Expr)
                and isinstance(s.value, ast.Call)
                and "super" in ast.unparse(s.value.func)
            ):
                continue
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue
            t = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else None
            if not (
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me
            ):
                ok = False
                break
            if t.attr not in names:
                names[t.attr] = fresh_name(taken, f"{holder.attr}_{t.attr}")
                taken.add(names[t.attr])
            value = Rename(bound).visit(s.value)
            if any(isinstance(n, ast.Name) and n.id == me for n in ast.walk(value)):
                ok = False
                break
            body.append(
                ast.Assign(
                    [ast.Attribute(copy.deepcopy(holder.value), names[t.attr], ast.Store())], value
                )
            )
        if not ok or not body:
            continue
        replace_stmt(cand, st, body)
        cand = _Hoisted(holder.attr, names).visit(cand)
        if any(isinstance(n, ast.Attribute) and n.attr == holder.attr for n in ast.walk(cand)):
            continue  # the submodule is used whole somewhere: not hoistable
        ast.fix_missing_locations(cand)
        remove_dead_code(cand, set(), hints.raising)  # the class, unused now
        yield Proposal(cand, f"{cls.name}'s layers hoisted into its parent", True)


def _is_module_list(call: ast.expr) -> ast.expr | None:
    """The one element of ``nn.ModuleList(C(...) for _ in range(1))`` (or ``[C(...)]``)."""
    if not (
        isinstance(call, ast.Call)
        and ast.unparse(call.func).endswith("ModuleList")
        and len(call.args) == 1
        and not call.keywords
    ):
        return None
    arg = call.args[0]
    if isinstance(arg, ast.List) and len(arg.elts) == 1:
        return arg.elts[0]
    if isinstance(arg, (ast.GeneratorExp, ast.ListComp)) and len(arg.generators) == 1:
        gen = arg.generators[0]
        if (
            not gen.ifs
            and isinstance(gen.target, ast.Name)
            and ast.unparse(gen.iter) == "range(1)"
            and gen.target.id not in {n.id for n in ast.walk(arg.elt) if isinstance(n, ast.Name)}
        ):
            return arg.elt
    return None


class _OneOfList(ast.NodeTransformer):
    """``<x>.blocks[0]`` / ``[-1]`` -> ``<x>.blocks``; ``for b in <x>.blocks:`` -> ``b =
    <x>.blocks`` and the body."""

    def __init__(self, field: str) -> None:
        self.field = field

    def _ours(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == self.field

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        self.generic_visit(node)
        if self._ours(node.value) and ast.unparse(node.slice) in ("0", "-1"):
            return node.value
        return node

    def visit_For(self, node: ast.For) -> Any:
        self.generic_visit(node)
        if self._ours(node.iter) and not node.orelse and not _own_exits(node.body):
            t = node.target
            if isinstance(t, ast.Name) and not any(
                isinstance(n, ast.Name) and n.id == t.id and not isinstance(n.ctx, ast.Load)
                for s in node.body
                for n in ast.walk(s)
            ):  # the layer read where the loop variable was
                return [Rename({t.id: node.iter}).visit(s) for s in node.body]
            return [ast.Assign([node.target], node.iter), *node.body]
        return node


def unwrap_module_lists(search: Search, best: str, hints: Hints) -> Proposals:
    """A module list of one layer (the layer count cut to 1) -> that layer:
    ``self.blocks = nn.ModuleList(Block() for _ in range(1))`` -> ``self.blocks =
    Block()``, ``for b in self.blocks:`` -> ``b = self.blocks``, ``.blocks[-1]`` ->
    ``.blocks``; its forward can then be inlined, its layers hoisted."""
    tree = ast.parse(best)
    fields = [
        n.targets[0].attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Attribute)
        and _is_module_list(n.value) is not None
    ]
    for field in fields:
        cand = ast.parse(best)
        for n in ast.walk(cand):
            if (
                isinstance(n, ast.Assign)
                and isinstance(n.targets[0], ast.Attribute)
                and n.targets[0].attr == field
                and _is_module_list(n.value) is not None
            ):
                n.value = _is_module_list(n.value)  # type: ignore[assignment]
        cand = _OneOfList(field).visit(cand)
        yield Proposal(cand, f"the one-layer list .{field} -> its layer")


def instances_to_globals(search: Search, best: str, hints: Hints) -> Proposals:
    """A plain class (no bases) built once at module level, ``scaler = Scaler(2.0)``,
    and used only through its attributes -> its fields as variables (``scaler_scale =
    2.0``), its methods as functions (``def scaler_hook(module, grad)``), ``scaler.x``
    read and written as ``scaler_x``.  The class is then dead code."""
    tree = ast.parse(best)
    classes = {
        c.name: c
        for c in tree.body
        if isinstance(c, ast.ClassDef) and not c.bases and not c.keywords and not c.decorator_list
    }
    for i, st in enumerate(tree.body):
        if not (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.Call)
            and isinstance(st.value.func, ast.Name)
            and st.value.func.id in classes
        ):
            continue
        cand = _instance_out(ast.parse(best), i, classes[st.value.func.id].name)
        if cand is not None:
            ast.fix_missing_locations(cand)
            remove_dead_code(cand, set(), hints.raising)  # the class, unused now
            yield Proposal(cand, f"the {st.value.func.id} instance -> variables and functions")


def _instance_out(tree: ast.Module, i: int, cls_name: str) -> ast.Module | None:
    st: ast.Assign = tree.body[i]  # type: ignore[assignment]
    var = st.targets[0].id  # type: ignore[attr-defined]
    call: ast.Call = st.value  # type: ignore[assignment]
    cls = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == cls_name)
    made = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id == cls_name and isinstance(n.ctx, ast.Load)
    ]
    binds = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == var]
    attr_of = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    if len(made) != 1 or any(id(n) not in attr_of and n is not st.targets[0] for n in binds):
        return None  # built again elsewhere, or used whole (passed, compared, rebound)
    methods = [m for m in cls.body if isinstance(m, ast.FunctionDef)]
    if any(m.decorator_list or not m.args.args for m in methods) or any(
        not isinstance(m, (ast.FunctionDef, ast.Expr, ast.Pass)) for m in cls.body
    ):
        return None
    for fn in ast.walk(tree):  # ``var.x = ...`` inside a function would bind a local
        if isinstance(fn, (ast.FunctionDef, ast.Lambda)) and any(
            isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == var
            and not isinstance(n.ctx, ast.Load)
            for n in ast.walk(fn)
        ):
            return None
    taken = names_in(tree)
    names: dict[str, str] = {}

    def name_of(attr: str) -> str:
        if attr not in names:
            names[attr] = fresh_name(taken, f"{var}_{attr}")
            taken.add(names[attr])
        return names[attr]

    init = next((m for m in methods if m.name == "__init__"), None)
    if any(m.name.startswith("__") and m is not init for m in methods):
        return None
    new: list[ast.stmt] = []
    if init is not None:
        me = init.args.args[0].arg
        params = [a.arg for a in init.args.args[1:]]
        if init.args.vararg or init.args.kwarg or len(call.args) > len(params):
            return None
        bound: dict[str, ast.expr] = dict(zip(params, call.args))
        for p, d in zip(params[len(params) - len(init.args.defaults) :], init.args.defaults):
            bound.setdefault(p, d)
        bound.update({k.arg: k.value for k in call.keywords if k.arg})
        if set(params) - set(bound):
            return None
        for s in init.body:
            t = s.targets[0] if isinstance(s, ast.Assign) and len(s.targets) == 1 else None
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue
            if not (
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me
            ):
                return None
            if any(isinstance(n, ast.Name) and n.id == me for n in ast.walk(s.value)):
                return None
            value = Rename(bound).visit(copy.deepcopy(s.value))
            new.append(ast.Assign([ast.Name(name_of(t.attr), ast.Store())], value))
    elif call.args or call.keywords:
        return None
    for m in methods:
        if m is init:
            continue
        me = m.args.args[0].arg
        fn = copy.deepcopy(m)
        fn.args.args = fn.args.args[1:]
        fn.name = name_of(m.name)
        for n in ast.walk(fn):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me:
                if not isinstance(n.ctx, ast.Load):
                    return None  # a method that sets a field: a global then
        if any(
            isinstance(n, ast.Name) and n.id == me and not _under_attr(fn, n) for n in ast.walk(fn)
        ):
            return None
        new.insert(0, _SelfAttrs(me, name_of).visit(fn))
    tree.body[i : i + 1] = new
    tree = _SelfAttrs(var, name_of).visit(tree)
    return tree


def _under_attr(root: ast.AST, name: ast.Name) -> bool:
    return any(isinstance(n, ast.Attribute) and n.value is name for n in ast.walk(root))


class _SelfAttrs(ast.NodeTransformer):
    """``<var>.x`` -> the name ``name_of(x)``."""

    def __init__(self, var: str, name_of: Callable[[str], str]) -> None:
        self.var, self.name_of = var, name_of

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == self.var:
            return ast.Name(self.name_of(node.attr), node.ctx)
        return node


def tidy_names(search: Search, best: str, hints: Hints) -> Proposals:
    """Names inlining suffixed back to the program's own (``x_1`` -> ``x``,
    ``scaler_1_hook`` -> ``scaler_hook``, where nothing else is called that): one candidate, a repro that reads as the user wrote it."""
    import builtins
    import keyword
    import re

    tree = ast.parse(best)
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(tree)):
        return
    units = _scopes(tree)
    taken = set().union(*(names for names, _ in units))
    mapping: dict[str, str] = {}
    for name in sorted(taken):
        base = re.sub(r"(?<=[A-Za-z])(?:_\d+)+(?=_|$)", "", name)
        if base == name or not base.isidentifier():
            continue
        if base in mapping.values() or keyword.iskeyword(base):
            continue
        if any(_clash(name, base, names, local) for names, local in units):
            continue
        if hasattr(builtins, base):
            continue
        mapping[name] = base
    if not mapping:
        return
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in mapping:
            n.id = mapping[n.id]
        elif isinstance(n, ast.arg) and n.arg in mapping:
            n.arg = mapping[n.arg]
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in mapping:
            n.name = mapping[n.name]
    yield Proposal(tree, f"{len(mapping)} name(s) back to the program's own")


def _scopes(tree: ast.Module) -> list[tuple[set[str], set[str] | None]]:
    """The module's own names (outside function bodies; local None), then each
    outermost function's names (nested ones included) and the names it binds."""
    module: set[str] = set()
    units: list[tuple[set[str], set[str] | None]] = [(module, None)]
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if not isinstance(child, ast.Lambda):
                    module.add(child.name)
                    module.update(names_in(ast.Module(child.decorator_list, [])))
                local = {a.arg for a in ast.walk(child.args) if isinstance(a, ast.arg)}
                local |= {
                    n.id
                    for n in ast.walk(child)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                }
                inner = {
                    n.name
                    for n in ast.walk(child)
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and n is not child
                }
                units.append((names_in(child) | inner, local | inner))
                continue
            if isinstance(child, ast.ClassDef):
                module.add(child.name)
            if isinstance(child, ast.Name):
                module.add(child.id)
            todo.append(child)
    return units


def _clash(name: str, base: str, names: set[str], local: set[str] | None) -> bool:
    """Renaming ``name`` to ``base`` would change what a name means in this scope: both
    used in it, or ``base`` read there from outside (a function that does not bind it)."""
    if base not in names:
        return False
    return name in names or local is None or base not in local

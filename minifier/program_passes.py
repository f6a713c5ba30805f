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

from .dead_code import BOLD, remove_dead_code
from .observe import assigned, driver, facts_keys, fresh_tensor
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


# ---- passes from what one run showed (observe.py) ---------------------------------
MAX_UNROLL = 4  # a loop that ran more often is cut by the number passes first


def _facts(best: str, hints: Hints) -> dict[str, dict[int, Any]] | None:
    if hints.observe is None:
        return None
    got = hints.observe(best)
    return facts_keys(got) if got else None


def _own_exits(body: list[ast.stmt]) -> bool:
    """A ``break`` or ``continue`` of this loop (not of a loop nested in it)."""
    todo = list(body)
    while todo:
        st = todo.pop()
        if isinstance(st, (ast.Break, ast.Continue)):
            return True
        if isinstance(st, (ast.For, ast.While, ast.FunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            todo.extend(getattr(st, field, []) or [])
        for h in getattr(st, "handlers", []) or []:
            todo.extend(h.body)
    return False


def observed_loops(search: Search, best: str, hints: Hints) -> Proposals:
    """A driver loop written out as many times as the run entered its body (at most
    MAX_UNROLL): ``while step < n:`` -> its body twice; ``for x, y in batches():`` ->
    ``x, y = next(it)`` and the body, each time.  A loop the run never entered goes.
    The copies are then judged apart: the next run says which ``if`` each one took and
    what each bound (observed_branches, observed_values)."""
    facts = _facts(best, hints)
    if facts is None:
        return
    count = len(driver(ast.parse(best)))
    for i in range(count):
        cand = ast.parse(best)
        st = driver(cand)[i]
        if not isinstance(st, (ast.For, ast.While)) or st.orelse or _own_exits(st.body):
            continue
        n = facts["loops"].get(i, {}).get("n", 0)
        if n > MAX_UNROLL:
            continue
        item = facts["loops"].get(i, {})
        made = fresh_tensor(item.get("spec", {})) if item.get("same") else None
        tries: list[list[ast.stmt]] = []
        if isinstance(st, ast.For) and n and made is not None:
            # the items as fresh tensors of the observed shape: the iterable goes too
            fresh = ast.Assign([copy.deepcopy(st.target)], ast.parse(made, mode="eval").body)
            tries.append([s for _ in range(n) for s in (fresh, *st.body)])
        if isinstance(st, ast.For) and n:
            it = fresh_name(names_in(cand), "it")
            new: list[ast.stmt] = [ast.parse(f"{it} = iter({ast.unparse(st.iter)})").body[0]]
            step = ast.Assign(
                [copy.deepcopy(st.target)], ast.parse(f"next({it})", mode="eval").body
            )
            tries.append(new + [s for _ in range(n) for s in (step, *st.body)])
        elif isinstance(st, ast.While) or not n:
            tries.append([s for _ in range(n) for s in st.body])
        for body in tries:
            one = ast.parse(best)
            target = driver(one)[i]
            if replace_stmt(one, target, [copy.deepcopy(s) for s in body] or [ast.Pass()]):
                ast.fix_missing_locations(one)
                remove_dead_code(one, set(), hints.raising)  # the data class it no longer uses
                yield Proposal(one, f"loop written out ({n} time(s), as the run went)", True)


def observed_branches(search: Search, best: str, hints: Hints) -> Proposals:
    """Each driver ``if`` -> the side the run took every time (or nothing, where the
    run never reached it): all of them at once, then one at a time."""
    facts = _facts(best, hints)
    if facts is None:
        return
    stmts = driver(ast.parse(best))
    picks: list[tuple[int, str]] = []
    for i, st in enumerate(stmts):
        if isinstance(st, ast.If):
            body, other = facts["ifs"].get(i, [0, 0])
            if body and other:
                continue
            picks.append((i, "body" if body else "orelse" if other else ""))
    if not picks:
        return
    groups = [picks] + ([[p] for p in picks] if len(picks) > 1 else [])
    for group in groups:
        cand = ast.parse(best)
        nodes = driver(cand)
        done = 0
        for i, side in sorted(group, reverse=True):  # inner ones before the ifs holding them
            kept = getattr(nodes[i], side) if side else []
            done += replace_stmt(cand, nodes[i], kept or [ast.Pass()])
        if done:
            what = "each if" if len(group) > 1 else "an if"
            yield Proposal(cand, f"{what} -> the side the run took")


_CONSTRUCTORS = {"randn", "rand", "randint", "zeros", "ones", "full", "empty", "arange", "tensor"}


def _made_by_autograd(spec: dict[str, Any]) -> bool:
    """A value computed from parameters (it has a ``grad_fn``): a fresh leaf in its place
    cuts the graph a backward needs -- almost never the same failure, never worth a run."""
    return bool(spec.get("made")) or any(_made_by_autograd(s) for s in spec.get("seq", []))


def _fresh_already(value: ast.expr) -> bool:
    """``torch.randn(4, 8)`` and the like, with literal arguments: nothing to gain."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _CONSTRUCTORS
        and all(_literal(a) for a in value.args)
    )


def observed_values(search: Search, best: str, hints: Hints) -> Proposals:
    """A driver assignment whose value was a tensor (or a tuple of them), the same
    shape and type each time, not computed by autograd and not a constructor already ->
    a fresh random tensor like it: data loading, a dataset's
    generator, a batch from an iterator become ``torch.randn``/``torch.randint`` of the
    observed shape, dtype and range.  All at once, then one at a time."""
    facts = _facts(best, hints)
    if facts is None:
        return
    stmts = driver(ast.parse(best))
    picks: list[tuple[int, str]] = []
    for i, st in enumerate(stmts):
        seen = facts["values"].get(i)
        if assigned(st) is None or not seen or not seen.get("same"):
            continue
        if _made_by_autograd(seen["spec"]) or _fresh_already(st.value):  # type: ignore[attr-defined]
            continue
        made = fresh_tensor(seen["spec"])
        if made is not None and ast.unparse(st.value) != ast.unparse(ast.parse(made).body[0]):  # type: ignore[attr-defined]
            picks.append((i, made))
    groups = [picks] + ([[p] for p in picks] if len(picks) > 1 else [])
    for group in groups:
        if not group:
            continue
        cand = ast.parse(best)
        nodes = driver(cand)
        for i, made in group:
            nodes[i].value = ast.parse(made, mode="eval").body  # type: ignore[attr-defined]
        ast.fix_missing_locations(cand)
        remove_dead_code(cand, set(), hints.raising)  # what made the values, if unused now
        what = "values" if len(group) > 1 else "a value"
        yield Proposal(cand, f"{what} -> fresh tensor(s) of the observed shape")


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
    taken = names_in(tree) | {
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    }
    mapping: dict[str, str] = {}
    for name in sorted(taken):
        base = re.sub(r"(?<=[A-Za-z])(?:_\d+)+(?=_|$)", "", name)
        if base == name or not base.isidentifier():
            continue
        if base in taken or base in mapping.values() or keyword.iskeyword(base):
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


Pass = Callable[[Search, str, Hints], Proposals]

# Two phases, each to its fixed point: first the passes that take whole statements,
# definitions and iterations away; then, on what is left, also those that shave
# expressions (a call -> its argument, a copy forwarded, an argument dropped, a number
# halved).  In one phase from the start, a 200-line program spent as many runs
# dropping keyword arguments as deleting statements, and ran out of runs with dead
# code in it.
PROGRAM_PHASES: tuple[tuple[Pass, ...], ...] = (
    (
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
    ),
    (
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

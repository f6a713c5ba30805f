"""Code a program no longer needs, found by reading it (the program-level minify).

After inlining and deleting, a program keeps definitions nothing calls, imports
nothing reads, statements after a ``return``, parameters its functions ignore, and
values nobody reads.  ddmin would find each by a run; here one pass of reading finds
them all and proposes them as one candidate (or a few), so the oracle is asked once
where ddmin would ask dozens of times.

What follows, at module level, the statement the failure is raised from never runs:
it goes first.  Then two strengths, each a fixed point (removing ``cfg`` from a constructor may leave
``Config`` unused, whose removal leaves ``import dataclasses`` unused):

* *safe* -- statements after ``return``/``raise``/``break``/``continue``; functions,
  classes and imports whose name the program never reads; methods never named, of a
  class without bases (an ``nn.Module``'s method may override one torch calls);
  parameters never read, with the argument of every call of them (where every use of
  the function is a plain call);
* *each bolder step on top* -- decorated definitions and methods of derived classes
  never named (an override torch calls, a registering decorator), assignments to names
  nobody reads (their value may have run for its effect), objects only ever told to do
  something (``history.append(v)``, a parser's ``add_argument``: an optimizer's
  ``step()`` matters, so this step stands alone), ``self.x = ...`` where nothing reads
  ``.x``, and annotations.

Constant conditions fold in the safe pass (``m if not False else raw`` -> ``m``).

The oracle judges every candidate: a bolder step that mattered is refused, and the
safe one still stands.  Pure AST; no run.
"""

from __future__ import annotations

import ast

from .source_case import blocks_of

# what torch or Python calls on an object without the program naming it
_IMPLICIT = {"forward", "backward", "setup_context", "jvp", "vjp", "vmap"}
_TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)
BOLD = ("decorated", "overrides", "assignments", "write_only", "attributes", "annotations")


def _reads(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names read (loads, dels) and attribute names used anywhere."""
    names = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)
    }
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    # a string may name one (``getattr(m, "w")``, ``__all__``)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    strings = {s for s in strings if isinstance(s, str) and s.isidentifier()}
    return names | strings, attrs | strings


def _unreachable(tree: ast.Module) -> bool:
    """Statements after a return (raise, break, continue); docstrings; a ``pass``
    beside other statements."""
    changed = False
    for block in blocks_of(tree):
        for i, st in enumerate(block):
            if isinstance(st, _TERMINAL) and i + 1 < len(block):
                del block[i + 1 :]
                changed = True
                break
        doc = [
            s
            for s in block
            if isinstance(s, ast.Pass)
            or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
        ]
        if not doc or (len(block) == 1 and isinstance(block[0], ast.Pass)):
            continue
        block[:] = [s for s in block if not any(s is d for d in doc)] or [ast.Pass()]
        changed = True
    return changed


def _bases(c: ast.ClassDef) -> bool:
    return any(ast.unparse(b) != "object" for b in c.bases) or bool(c.keywords)


def _unused_defs(tree: ast.Module, bold: set[str]) -> bool:
    names, attrs = _reads(tree)
    changed = False
    for owner in [tree, *(c for c in ast.walk(tree) if isinstance(c, ast.ClassDef))]:
        in_class = isinstance(owner, ast.ClassDef)
        keep: list[ast.stmt] = []
        for st in owner.body:
            drop = False
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                used = st.name in (attrs if in_class else names)
                if in_class and isinstance(st, ast.ClassDef):
                    used = used or st.name in names
                decorated = bool(st.decorator_list)
                implicit = in_class and (
                    st.name.startswith("__") or st.name in _IMPLICIT or _bases(owner)  # type: ignore[arg-type]
                )
                drop = not used
                if decorated and "decorated" not in bold:
                    drop = False
                if implicit and not (
                    "overrides" in bold
                    and not st.name.startswith("__")
                    and st.name not in _IMPLICIT
                ):
                    drop = False
            elif isinstance(st, (ast.Import, ast.ImportFrom)) and not in_class:
                if any(a.name == "*" for a in st.names) or (
                    isinstance(st, ast.ImportFrom) and st.module == "__future__"
                ):
                    keep.append(st)
                    continue
                alive = [a for a in st.names if (a.asname or a.name).split(".")[0] in names]
                if len(alive) < len(st.names):
                    changed = True
                    if alive:
                        st.names = alive
                    else:
                        drop = True
            if drop:
                changed = True
            else:
                keep.append(st)
        owner.body = keep or [ast.Pass()]
    return changed


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef, ast.ClassDef | None]]:
    out: list[tuple[ast.FunctionDef, ast.ClassDef | None]] = [
        (f, None) for f in tree.body if isinstance(f, ast.FunctionDef)
    ]
    for c in tree.body:
        if isinstance(c, ast.ClassDef):
            out += [(f, c) for f in c.body if isinstance(f, ast.FunctionDef)]
    return out


def _calls_of(
    tree: ast.Module, fn: ast.FunctionDef, cls: ast.ClassDef | None
) -> list[ast.Call] | None:
    """Every call of ``fn`` -- None when the function is used any other way (passed as a
    callback, its signature is not the program's to change) or is ambiguous."""
    if fn.decorator_list:
        return None
    if cls is None:
        name, by_attr = fn.name, False
    elif fn.name == "__init__":
        if cls.decorator_list or any(
            isinstance(c, ast.ClassDef) and any(ast.unparse(b) == cls.name for b in c.bases)
            for c in ast.walk(tree)
        ):
            return None
        name, by_attr = cls.name, False
    elif fn.name.startswith("__") or fn.name in _IMPLICIT or _bases(cls):
        return None
    else:
        name, by_attr = fn.name, True
        defined = [
            f
            for c in ast.walk(tree)
            if isinstance(c, ast.ClassDef)
            for f in c.body
            if isinstance(f, ast.FunctionDef) and f.name == name
        ]
        if len(defined) != 1:
            return None
    calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    out = []
    for n in ast.walk(tree):
        hit = (
            isinstance(n, ast.Attribute) and n.attr == name
            if by_attr
            else isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        )
        if not hit:
            continue
        call = calls.get(id(n))
        if call is None:
            if not by_attr and _in_annotation(tree, n):
                continue
            return None
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return None
        out.append(call)
    return out


def _in_annotation(tree: ast.Module, target: ast.AST) -> bool:
    for n in ast.walk(tree):
        ann = getattr(n, "annotation", None) or getattr(n, "returns", None)
        if ann is not None and any(x is target for x in ast.walk(ann)):
            return True
    return False


def _unused_params(tree: ast.Module) -> bool:
    changed = False
    for fn, cls in _functions(tree):
        a = fn.args
        if a.vararg or a.kwarg or a.posonlyargs:
            continue
        method = cls is not None and not any(
            ast.unparse(d) == "staticmethod" for d in fn.decorator_list
        )
        skip = 1 if method else 0
        body_reads = {
            n.id
            for st in fn.body
            for n in ast.walk(st)
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)
        }
        positional = [p.arg for p in a.args]
        unused = [p for p in positional[skip:] if p not in body_reads]
        unused_kw = [p.arg for p in a.kwonlyargs if p.arg not in body_reads]
        if not unused and not unused_kw:
            continue
        calls = _calls_of(tree, fn, cls)
        if calls is None:
            continue
        for p in reversed(unused):
            i = positional.index(p)
            pos = i - skip
            first_default = len(a.args) - len(a.defaults)
            if i >= first_default:
                del a.defaults[i - first_default]
            del a.args[i]
            for call in calls:
                if len(call.args) > pos:
                    del call.args[pos]
                call.keywords = [k for k in call.keywords if k.arg != p]
            changed = True
        for p in unused_kw:
            j = [k.arg for k in a.kwonlyargs].index(p)
            del a.kwonlyargs[j]
            del a.kw_defaults[j]
            for call in calls:
                call.keywords = [k for k in call.keywords if k.arg != p]
            changed = True
    return changed


def _unread_assignments(tree: ast.Module) -> bool:
    names, _ = _reads(tree)
    changed = False
    for block in blocks_of(tree):
        for st in list(block):
            targets = (
                st.targets
                if isinstance(st, ast.Assign)
                else [st.target]
                if isinstance(st, ast.AnnAssign) and st.value is not None
                else None
            )
            if not targets:
                continue
            if _inside_class_body(tree, block):
                continue  # a class's fields: a dataclass reads them
            if _split_pairs(st, names):
                changed = True
                continue
            flat = [e for t in targets for e in ast.walk(t) if isinstance(e, ast.Name)]
            if all(isinstance(t, (ast.Name, ast.Tuple, ast.List)) for t in targets) and not any(
                e.id in names for e in flat
            ):
                block.remove(st)
                changed = True
        if not block:
            block.append(ast.Pass())
    return changed


def _split_pairs(st: ast.stmt, names: set[str]) -> bool:
    """``step, t0 = (0, time.perf_counter())`` where nothing reads ``t0`` -> ``step = 0``."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
        return False
    t, v = st.targets[0], st.value
    if not (isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) and len(t.elts) == len(v.elts)):
        return False
    if not all(isinstance(e, ast.Name) for e in t.elts) or any(
        isinstance(e, ast.Starred) for e in v.elts
    ):
        return False
    pairs = [(e, x) for e, x in zip(t.elts, v.elts) if e.id in names]  # type: ignore[attr-defined]
    if not pairs or len(pairs) == len(t.elts):
        return False
    if len(pairs) == 1:
        st.targets, st.value = [pairs[0][0]], pairs[0][1]
    else:
        t.elts, v.elts = [p[0] for p in pairs], [p[1] for p in pairs]
    return True


def _write_only(tree: ast.Module) -> bool:
    """A name whose only reads are statements calling its methods (``history = []``;
    ``history.append(v)``; a parser and its ``add_argument`` calls): it goes, with
    them."""
    stores: dict[str, int] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    calls: dict[str, list[ast.stmt]] = {}
    receivers: set[int] = set()
    for st in ast.walk(tree):
        if (
            isinstance(st, ast.Expr)
            and isinstance(st.value, ast.Call)
            and isinstance(st.value.func, ast.Attribute)
            and isinstance(st.value.func.value, ast.Name)
        ):
            calls.setdefault(st.value.func.value.id, []).append(st)
            receivers.add(id(st.value.func.value))
    other_reads = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in receivers
    }
    dead = {name for name in calls if name not in other_reads and stores.get(name) == 1}
    if not dead:
        return False
    gone = {id(st) for name in dead for st in calls[name]}
    for block in blocks_of(tree):
        for st in list(block):
            simple = isinstance(st, ast.Assign) and [ast.unparse(t) for t in st.targets]
            if id(st) in gone or (simple and len(simple) == 1 and simple[0] in dead):
                block.remove(st)
        if not block:
            block.append(ast.Pass())
    return True


class _Fold(ast.NodeTransformer):
    """``a if not False else b`` -> ``a``; ``if False: ...`` -> its else."""

    @staticmethod
    def _const(test: ast.expr) -> object:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = _Fold._const(test.operand)
            return None if inner is None else not inner
        if isinstance(test, ast.Constant) and isinstance(test.value, (bool, int, type(None))):
            return bool(test.value)
        return None

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        value = self._const(node.test)
        return node if value is None else (node.body if value else node.orelse)

    def visit_If(self, node: ast.If) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        value = self._const(node.test)
        if value is None:
            return node
        return (node.body if value else node.orelse) or [ast.Pass()]


def _fold(tree: ast.Module) -> bool:
    before = ast.dump(tree)
    _Fold().visit(tree)
    return ast.dump(tree) != before


def _inside_class_body(tree: ast.Module, block: list[ast.stmt]) -> bool:
    return any(isinstance(c, ast.ClassDef) and c.body is block for c in ast.walk(tree))


def _unread_attributes(tree: ast.Module) -> bool:
    """``self.x = ...`` where nothing anywhere reads an attribute ``x``."""
    read = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Store)
    }
    read |= _reads(tree)[0]
    changed = False
    for block in blocks_of(tree):
        for st in list(block):
            if (
                isinstance(st, ast.Assign)
                and len(st.targets) == 1
                and isinstance(st.targets[0], ast.Attribute)
                and ast.unparse(st.targets[0].value) == "self"
                and st.targets[0].attr not in read
            ):
                block.remove(st)
                changed = True
        if not block:
            block.append(ast.Pass())
    return changed


def _annotations(tree: ast.Module) -> bool:
    changed = False
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs:
                if a.annotation is not None:
                    a.annotation, changed = None, True
            if n.returns is not None:
                n.returns, changed = None, True
    for block in blocks_of(tree):
        if _inside_class_body(tree, block):
            continue
        for i, st in enumerate(block):
            if isinstance(st, ast.AnnAssign) and st.value is not None and st.simple:
                block[i] = ast.Assign(targets=[st.target], value=st.value, lineno=0)
                changed = True
    return changed


def _normal(line: str) -> str:
    try:
        return ast.unparse(ast.parse(line.strip()))
    except SyntaxError:
        return line.strip()


def _after_failure(tree: ast.Module, raising: str) -> bool:
    """The module-level statements after the last one holding the line the failure is
    raised from: the failure was raised before they ran (the same check written out
    twice, as a loop written out leaves it, raises from one copy -- the last is the
    only safe cut).  A ``try`` around it may go on: then nothing is said."""
    want = {raising.strip(), _normal(raising)} - {""}
    if not want:
        return False
    last = None
    for i, st in enumerate(tree.body):
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        inner = [n for n in ast.walk(st) if isinstance(n, ast.stmt)]
        lines = {x.strip() for n in inner for x in ast.unparse(n).splitlines()}
        if lines & want:
            if any(isinstance(n, ast.Try) for n in inner):
                return False
            last = i
    if last is not None and last + 1 < len(tree.body):
        del tree.body[last + 1 :]
        return True
    return False


def remove_dead_code(
    tree: ast.Module,
    bold: set[str] = frozenset(),  # type: ignore[assignment]
    raising: str = "",
) -> bool:
    """Remove, in place and to a fixed point, what the program does not need; ``bold``
    names the bolder steps (BOLD) to take too; ``raising``: the source line the
    failure is raised from.  True when anything went."""
    any_change = _after_failure(tree, raising)
    for _ in range(50):
        changed = _unreachable(tree)
        changed |= _fold(tree)
        changed |= _unused_params(tree)
        changed |= _unused_defs(tree, bold)
        if "assignments" in bold:
            changed |= _unread_assignments(tree)
        if "write_only" in bold:
            changed |= _write_only(tree)
        if "attributes" in bold:
            changed |= _unread_attributes(tree)
        if "annotations" in bold:
            changed |= _annotations(tree)
        if not changed:
            break
        any_change = True
    return any_change

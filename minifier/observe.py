"""What one run of a program shows about its own driver code (the program-level
minify): how many times each loop ran, which side of each ``if`` was taken, and what
each assignment bound -- so that passes propose what the run proves instead of what
reading guesses (observed_passes.py).

The *driver* is the code Python runs at module level: top-level statements and the
blocks nested in them (``if``, ``for``, ``while``, ``with``, ``try``), never a function
or class body -- Dynamo traces functions, so recording calls there would change what
it captures; module-level code it never sees.  Each driver statement has an index:
its place in ``driver(tree)``'s pre-order, the same on the program and on its
instrumented form.

``instrument(source, path)`` adds recording statements *between* the program's own
(no line of the program changes, so the raising line the oracle compares stays as it
was), wraps the module in ``try/finally`` and writes the facts as JSON to ``path`` at
exit -- also when the program dies of its failure:

* ``loops``: ``{index: {"n": iterations begun, "item": spec of the loop variable on
  the first iteration, "same": every iteration's spec was the first's}}``;
* ``ifs``: ``{index: [times the body ran, times the else ran]}``;
* ``values``: ``{index: {"spec": ..., "same": ..., "n": ...}}`` for ``name = ...`` and
  ``a, b = ...``.

A spec is ``{"shape", "dtype", "device", "grad", "made", "lo", "hi"}`` for a tensor
(``made``: autograd made it -- it has a ``grad_fn``; ``lo``/``hi``: its range, integer
tensors), ``{"seq": [spec, ...]}`` for a tuple or list, or
``{"type": name}``.  Pure AST here; the oracle's side runs it (repro/jobs/program_job.py).
"""

from __future__ import annotations

import ast
import copy
from typing import Any

_COMPOUND = (ast.If, ast.For, ast.While, ast.With, ast.Try)

RECORDER = """
class _TcObserved:
    def __init__(self, path):
        self.path, self.loops, self.ifs, self.values = path, {}, {}, {}

    def spec(self, v, depth=0):
        import sys
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(v, torch.Tensor):
            s = {"shape": list(v.shape), "dtype": str(v.dtype), "device": str(v.device),
                 "grad": bool(v.requires_grad), "made": v.grad_fn is not None}
            if v.numel() and not v.is_floating_point() and not v.is_complex():
                try:
                    s["lo"], s["hi"] = int(v.min()), int(v.max())
                except Exception:
                    pass
            return s
        if isinstance(v, (tuple, list)) and depth < 2 and len(v) <= 16:
            return {"seq": [self.spec(x, depth + 1) for x in v]}
        return {"type": type(v).__name__}

    def _note(self, table, k, v):
        s = self.spec(v)
        got = table.get(k)
        if got is None:
            table[k] = {"n": 1, "spec": s, "same": True}
        else:
            got["n"] += 1
            got["same"] = got["same"] and got["spec"] == s

    def loop(self, k, v=None):
        self._note(self.loops, k, v)

    def value(self, k, v):
        self._note(self.values, k, v)

    def hit(self, k, side):
        self.ifs.setdefault(k, [0, 0])[side] += 1

    def dump(self):
        import json
        with open(self.path, "w") as f:
            json.dump({"loops": self.loops, "ifs": self.ifs, "values": self.values}, f)


__tc_observed__ = _TcObserved(PATH)
"""


def driver(tree: ast.Module) -> list[ast.stmt]:
    """The program's module-level statements, nested blocks included (not function or
    class bodies), in pre-order."""
    out: list[ast.stmt] = []

    def walk(block: list[ast.stmt]) -> None:
        for st in block:
            out.append(st)
            if isinstance(st, _COMPOUND):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(st, field, []) or [])
                for h in getattr(st, "handlers", []) or []:
                    walk(h.body)

    walk(tree.body)
    return out


def _load(target: ast.expr) -> ast.expr | None:
    """``target`` as an expression that reads it (names and tuples of names only)."""
    if isinstance(target, ast.Name):
        return ast.Name(target.id, ast.Load())
    if isinstance(target, (ast.Tuple, ast.List)):
        elts = [_load(e) for e in target.elts]
        if all(e is not None for e in elts):
            return ast.Tuple(elts, ast.Load())  # type: ignore[arg-type]
    return None


def _call(method: str, *args: ast.expr) -> ast.stmt:
    f = ast.Attribute(ast.Name("__tc_observed__", ast.Load()), method, ast.Load())
    return ast.Expr(ast.Call(f, list(args), []))


def assigned(st: ast.stmt) -> ast.expr | None:
    """What a one-target assignment binds, read back (None: not one the facts cover)."""
    if isinstance(st, ast.Assign) and len(st.targets) == 1:
        return _load(st.targets[0])
    return None


def instrument(source: str, path: str) -> str:
    """``source`` with its driver recording what it does (module docstring)."""
    tree = ast.parse(source)
    stmts = driver(tree)
    index = {id(st): i for i, st in enumerate(stmts)}
    after: dict[int, ast.stmt] = {}
    for st in stmts:
        k = ast.Constant(index[id(st)])
        if isinstance(st, (ast.For, ast.While)):
            item = _load(st.target) if isinstance(st, ast.For) else None
            st.body.insert(0, _call("loop", k, *([item] if item is not None else [])))
        elif isinstance(st, ast.If):
            st.body.insert(0, _call("hit", k, ast.Constant(0)))
            st.orelse.insert(0, _call("hit", copy.deepcopy(k), ast.Constant(1)))
        else:
            read = assigned(st)
            if read is not None:
                after[id(st)] = _call("value", k, read)

    def place(block: list[ast.stmt]) -> None:
        i = 0
        while i < len(block):
            st = block[i]
            for field in ("body", "orelse", "finalbody"):
                if isinstance(st, _COMPOUND):
                    place(getattr(st, field, []) or [])
            for h in getattr(st, "handlers", []) or []:
                place(h.body)
            if id(st) in after:
                block.insert(i + 1, after[id(st)])
                i += 1
            i += 1

    place(tree.body)
    head: list[ast.stmt] = []
    body = list(tree.body)
    while body and (
        (isinstance(body[0], ast.ImportFrom) and body[0].module == "__future__")
        or (not head and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant))
    ):
        head.append(body.pop(0))
    recorder = ast.parse(RECORDER.replace("PATH", repr(path))).body
    guarded = ast.Try(
        body=body or [ast.Pass()],
        handlers=[],
        orelse=[],
        finalbody=[_call("dump")],
    )
    tree.body = [*head, *recorder, guarded]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def facts_keys(facts: dict[str, Any]) -> dict[str, dict[int, Any]]:
    """JSON's string keys back to driver indices."""
    return {
        table: {int(k): v for k, v in (facts.get(table) or {}).items()}
        for table in ("loops", "ifs", "values")
    }


def fresh_tensor(spec: dict[str, Any]) -> str | None:
    """A constructor for a fresh tensor like the one ``spec`` describes (None: none)."""
    if "seq" in spec:
        parts = [fresh_tensor(s) for s in spec["seq"]]
        if not parts or any(p is None for p in parts):
            return None
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"  # type: ignore[arg-type]
    if "shape" not in spec:
        return None
    shape = tuple(spec["shape"])
    dtype, device = spec["dtype"], spec["device"]
    kw = []
    if device != "cpu":
        kw.append(f"device={device.split(':')[0]!r}")
    if "complex" in dtype:
        return None
    if "float" in dtype or "bfloat" in dtype:
        if dtype != "torch.float32":
            kw.append(f"dtype={dtype}")
        if spec.get("grad"):
            kw.append("requires_grad=True")
        return f"torch.randn({', '.join([repr(shape), *kw])})"
    lo, hi = spec.get("lo", 0), spec.get("hi", 0)
    if dtype == "torch.bool":
        if lo == hi:
            return f"torch.full({', '.join([repr(shape), repr(bool(lo)), *kw])})"
        return f"torch.randint(0, 2, {', '.join([repr(shape), *kw])}).bool()"
    if dtype != "torch.int64":
        kw.append(f"dtype={dtype}")
    if lo == hi:
        return f"torch.full({', '.join([repr(shape), repr(lo), *kw])})"
    return f"torch.randint({lo}, {hi + 1}, {', '.join([repr(shape), *kw])})"

"""What the capture worker tells the source minifier and the repro writer about a
frame (capture_worker.py): callees whose source is known, module attributes, module
list lengths, the values of a candidate's locals, and what the final function reads.
Runs only inside the worker's interpreter."""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import textwrap
import types
from typing import TYPE_CHECKING, Any, cast

from .capture_entries import Entry, call_args, function_source, is_user_file, tensor_spec

if TYPE_CHECKING:
    from typing import TypedDict

    from _typeshed import TraceFunction

    from .capture_entries import TensorSpec

    # what a value is, for a repro (one of these kinds; "import" is a keyword): the
    # source minifier's passes and repro/capture_writer.py read it
    What = TypedDict(
        "What",
        {
            "import": str,  # a module's name
            "import_from": list[str],  # [module, name]
            "constant": str,  # its repr
            "source": str,
            "tensor": TensorSpec,
            "module": str,  # an nn.Module's class name
            "unknown": str,  # its type's name
            "fill": str,  # a tensor parameter's: random | recorded
            "marks": list[int],  # a tensor parameter's dims marked dynamic
        },
        total=False,
    )

    class Callee(TypedDict):
        source: str
        kind: str  # module | method | function

    class ModuleInfo(TypedDict):
        """:func:`module_info`'s answer."""

        callees: dict[str, Callee]
        attrs: dict[str, What]
        lengths: dict[str, int]

    class Described(TypedDict):
        """:func:`describe`'s answer."""

        params: dict[str, What]
        names: dict[str, What]
        history: list[dict[str, What]]  # the parameters of the earlier calls


def _expr(base: str, path: str) -> str:
    out = base
    for part in path.split(".") if path else []:
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out


def module_info(entry: Entry, torch: types.ModuleType) -> ModuleInfo:
    """For the passes: callees whose source is known (a module's forward, a method, a
    function of the program), tensor and constant attributes of the entry's modules,
    and the lengths of its module lists."""
    callees: dict[str, Callee] = {}
    attrs: dict[str, What] = {}
    lengths: dict[str, int] = {}
    for param, value in entry.recorded.items():
        if not isinstance(value, torch.nn.Module):
            continue
        for path, m in value.named_modules(remove_duplicate=False):
            expr = _expr(param, path)
            if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
                lengths[expr] = len(m)
            for name, t in list(m.named_parameters(recurse=False)) + list(
                m.named_buffers(recurse=False)
            ):
                if t is not None:
                    attrs[f"{expr}.{name}"] = {"tensor": tensor_spec(t, torch)}
            for name, v in vars(m).items():
                if not name.startswith("_") and isinstance(v, (bool, int, float, type(None))):
                    attrs[f"{expr}.{name}"] = {"constant": repr(v)}
                elif not name.startswith("_") and isinstance(v, (tuple, list)):
                    if all(isinstance(x, (bool, int, float)) for x in v):
                        attrs[f"{expr}.{name}"] = {"constant": repr(v)}
            if not isinstance(m, torch.nn.ModuleList):
                _add_callee(callees, entry, expr, type(m).forward, torch, "module", owner=m)
            for name, fn in vars(type(m)).items():
                if (
                    isinstance(fn, types.FunctionType)
                    and name != "forward"
                    and not name.startswith("__")
                ):
                    if is_user_file(fn.__code__.co_filename):
                        _add_callee(callees, entry, f"{expr}.{name}", fn, torch, "method")
    for name, value in list(entry.namespace.items()):
        if isinstance(value, types.FunctionType) and is_user_file(value.__code__.co_filename):
            _add_callee(callees, entry, name, value, torch, "function")
    return {"callees": callees, "attrs": attrs, "lengths": lengths}


def _add_callee(
    callees: dict[str, Callee],
    entry: Entry,
    key: str,
    fn: object,
    torch: types.ModuleType,
    kind: str,
    owner: object = None,
) -> None:
    """``key`` -> its source, when the names it reads can join the entry's globals
    (the same object, or a name the entry does not have)."""
    if not isinstance(fn, types.FunctionType):
        return
    try:
        source = function_source(fn, torch, owner)
    except (OSError, TypeError, SyntaxError):
        return
    needed: dict[str, object] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in fn.__globals__:
            needed[node.id] = fn.__globals__[node.id]
    for name, value in needed.items():
        if name in entry.namespace and entry.namespace[name] is not value:
            return  # another object by that name where the callee would be inlined
    entry.namespace.update(needed)
    callees[key] = {"source": source, "kind": kind}


def local_values(entry: Entry, source: str, torch: types.ModuleType) -> dict[str, What]:
    """The candidate run eagerly: each local's value as it returned (tensors as specs,
    numbers as literals), for the pass that turns a computed value into an input."""
    scope = dict(entry.namespace)
    exec(compile(source, "<candidate>", "exec"), scope)  # noqa: S102
    fn = scope[entry.name]
    kwargs = call_args(entry, fn, scope, torch)
    seen: dict[str, What] = {}

    def tracer(frame: types.FrameType, event: str, arg: object) -> TraceFunction | None:
        if frame.f_code is not fn.__code__:
            return None
        if event == "return":
            for k, v in frame.f_locals.items():
                if isinstance(v, torch.Tensor):
                    seen[k] = {"tensor": tensor_spec(v, torch)}
                elif isinstance(v, (bool, int, float)):
                    seen[k] = {"constant": repr(v)}
        return tracer

    sys.settrace(tracer)
    try:
        with torch.no_grad():
            fn(**kwargs)
    except Exception:
        pass
    finally:
        sys.settrace(None)
    return seen


def describe(entry: Entry, source: str, torch: types.ModuleType) -> Described:
    """What the final candidate reads, for a standalone repro.py: its parameters
    (tensor specs, literals) and the global names it uses (imports, constants,
    helper functions' source)."""
    scope = dict(entry.namespace)
    exec(compile(source, "<candidate>", "exec"), scope)  # noqa: S102
    fn = scope[entry.name]
    specs = scope.get("__inputs__") or {}

    def described(kwargs: dict[str, object]) -> dict[str, What]:
        params: dict[str, What] = {}
        for name, value in kwargs.items():
            what = _what(value, torch, name)
            if "tensor" in what:
                what["fill"] = "random" if name in specs else "recorded"
                what["marks"] = entry.marks.get(name, [])
            params[name] = what
        return params

    kwargs = call_args(entry, fn, scope, torch)
    params = described(kwargs)
    history = [described(call_args(entry, fn, scope, torch, h)) for h in entry.history]
    tree = ast.parse(source)
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assigned = {
        t.id for n in ast.walk(tree) for t in getattr(n, "targets", []) if isinstance(t, ast.Name)
    }
    loaded = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    names: dict[str, What] = {}
    for n in sorted(loaded - set(kwargs) - assigned - defined):
        if n in entry.namespace and n not in ("__builtins__",):
            if getattr(builtins, n, _MISSING) is entry.namespace[n]:
                continue  # the builtin itself: a repro needs no import for it
            names[n] = _what(entry.namespace[n], torch, n)
    return {"params": params, "names": names, "history": history}


_MISSING = object()


def _what(value: Any, torch: types.ModuleType, name: str = "") -> What:
    if isinstance(value, types.ModuleType):
        return {"import": value.__name__}
    if isinstance(value, torch.Tensor):
        return {"tensor": tensor_spec(value, torch)}
    if isinstance(value, (int, float, bool, str, type(None))):
        return {"constant": repr(value)}
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float, bool)) for v in value):
        return {"constant": repr(value)}
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        mod = getattr(value, "__module__", "") or ""
        if mod.startswith("torch") or mod in ("builtins", "math", "operator", "time"):
            return {"import_from": [mod, value.__name__]}
        try:
            return {"source": textwrap.dedent(inspect.getsource(value))}
        except (OSError, TypeError):
            return {"unknown": cast(str, type(value).__name__)}  # (a str: mypy misreads it)
    if isinstance(value, torch.nn.Module):
        return {"module": type(value).__name__}
    return {"unknown": type(value).__name__}

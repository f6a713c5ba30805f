"""Entries of the capture worker (capture_worker.py): functions the source minifier
may start from.  Entry 0 is the recorded frame (or, when that frame is torch's own
wrapper around a module, the module's ``forward``); ``callee_entries`` runs entry 0
eagerly once and adds the user functions it calls, with their arguments as they
were, so that the search can step into the callee where the failure is raised.
Runs only inside the worker's interpreter."""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import sys
import textwrap
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TypedDict, TypeVar

    from torch import Tensor

    _T = TypeVar("_T")

    class EntryJson(TypedDict):
        """An entry as the source minifier sees it (:meth:`Entry.to_json`)."""

        entry: int
        name: str
        where: str
        depth: int
        params: list[str]
        lines: int
        source: str
        source_from: str

    class TensorSpec(TypedDict, total=False):
        """A tensor as a spec: :func:`tensor_spec` writes one, :func:`make_tensor` reads
        one (a pass's ``__inputs__``)."""

        shape: list[int]
        dtype: str  # without "torch."
        device: str
        requires_grad: bool
        range: list[int]  # integer tensors: [min, max]
        values: object  # small CPU tensors: their values (nested lists, or a number)


MAX_ENTRIES = 16


@dataclasses.dataclass
class Entry:
    name: str  # the function's name in ``source``
    source: str  # a module source defining it (decorators dropped)
    namespace: dict[str, Any]  # its globals
    recorded: dict[str, Any]  # parameter -> value, as it was called
    where: str  # file:line
    depth: int = 0
    marks: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # mark_dynamic dims
    # the arguments of the frame's earlier compiles, called first (a recompile needs them)
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    source_from: str = "file"  # or "bytecode, decompiled by depyf (...)"

    def to_json(self, index: int) -> EntryJson:
        return {
            "entry": index,
            "name": self.name,
            "where": self.where,
            "depth": self.depth,
            "params": list(self.recorded),
            "lines": self.source.count("\n") + 1,
            "source": self.source,
            "source_from": self.source_from,
        }


def is_user_file(filename: str) -> bool:
    """The program's own file (owners.py: by where it lies; ``<string>`` is no file to
    read a frame's source from)."""
    from ..owners import is_user

    return bool(filename) and not filename.startswith("<") and is_user(filename)


class SourceUnavailable(Exception):
    """A function whose source is neither in its file nor decompilable."""


def source_text(fn: types.FunctionType) -> tuple[str, str]:
    """(the source of ``fn``, where it came from).  From its file while the file still
    holds the code that was recorded (the names it reads agree); otherwise decompiled
    from the recorded bytecode with depyf (an optional dependency), and said so."""
    code = fn.__code__
    try:
        text = textwrap.dedent(inspect.getsource(fn))
        if _reads_same_names(text, code):
            return text, "file"
        why = "changed since the record was written"
    except (OSError, TypeError, SyntaxError):
        why = "gone"
    try:
        import depyf
    except ImportError:
        raise SourceUnavailable(
            f"the source of {code.co_name} ({code.co_filename}) is {why}, and depyf, which "
            "decompiles bytecode, is not installed (pip install depyf)"
        ) from None
    try:
        text = depyf.decompile(code)
        ast.parse(text)
    except Exception as exc:
        raise SourceUnavailable(
            f"the source of {code.co_name} ({code.co_filename}) is {why}, and depyf could "
            f"not decompile its bytecode: {type(exc).__name__}: {str(exc)[:120]}"
        ) from None
    return text, f"bytecode, decompiled by depyf (the file is {why})"


def _reads_same_names(text: str, code: types.CodeType) -> bool:
    """Does ``text`` (a function's source) compile to code that reads the names the
    recorded ``code`` reads?  A cheap check that the file was not edited since."""
    try:
        module = compile(text, "<check>", "exec")
    except SyntaxError:
        return False
    # a closure's free variables are globals once its source is compiled on its own
    free = set(code.co_freevars) | set(code.co_cellvars)
    fns = [c for c in module.co_consts if isinstance(c, type(code))]
    return any(
        c.co_name == code.co_name and set(c.co_names) - free == set(code.co_names) - free
        for c in fns
    )


def function_source(fn: types.FunctionType, torch: types.ModuleType, owner: Any = None) -> str:
    """A module source defining ``fn`` at top level: dedented, decorators dropped.  A
    ``nn.Sequential``'s forward is written out as its calls, one per layer."""
    if owner is not None and isinstance(owner, torch.nn.Sequential):
        lines = [f"    input = self[{i}](input)" for i in range(len(owner))]
        return "def forward(self, input):\n" + "\n".join(lines) + "\n    return input\n"
    text = source_text(fn)[0]
    tree = ast.parse(text)
    node = tree.body[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node.decorator_list = []
    return ast.unparse(tree) + "\n"


def root_entry(
    fn: types.FunctionType,
    args: list[object],
    kwargs: dict[str, object],
    torch: types.ModuleType,
    history: list[tuple[list[object], dict[str, object]]] | None = None,
) -> Entry:
    """The recorded frame as an entry.  torch wraps a compiled module in a function of
    its own (``wrap_inline``): then the entry is the module's ``forward``.  ``history``:
    the (args, kwargs) of the frame's earlier compiles."""
    code = fn.__code__
    target, owner = fn, None
    if not is_user_file(code.co_filename):
        for cell in fn.__closure__ or ():
            value = cell.cell_contents
            if isinstance(value, torch.nn.Module):
                target, owner = type(value).forward, value
                break
            if isinstance(value, types.FunctionType) and is_user_file(value.__code__.co_filename):
                target = value
                break

    def bind(a: list[object], kw: dict[str, object]) -> dict[str, object]:
        lead = [owner] if owner is not None else []
        return dict(inspect.signature(target).bind(*lead, *a, **kw).arguments)

    bound = bind(args, kwargs)
    namespace = target.__globals__
    for name, cell in zip(target.__code__.co_freevars, target.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents  # the closure's values, as globals
        except ValueError:
            pass
    entry = Entry(
        name=target.__name__,
        source=function_source(target, torch, owner),
        source_from="file"
        if owner is not None and isinstance(owner, torch.nn.Sequential)
        else source_text(target)[1],
        namespace=namespace,
        recorded=bound,
        where=f"{target.__code__.co_filename}:{target.__code__.co_firstlineno}",
    )
    entry.marks = _marks_of(entry.recorded, torch)
    for a, kw in history or []:
        try:
            entry.history.append(bind(a, kw))
        except TypeError:
            pass  # an earlier call this entry cannot take
    return entry


def _marks_of(recorded: dict[str, Any], torch: types.ModuleType) -> dict[str, list[int]]:
    return {
        k: sorted(v._dynamo_dynamic_indices)
        for k, v in recorded.items()
        if isinstance(v, torch.Tensor) and getattr(v, "_dynamo_dynamic_indices", None)
    }


def callee_entries(root: Entry, torch: types.ModuleType, user_stack: list[str]) -> list[Entry]:
    """The user functions entry 0 calls when it runs eagerly, each with its arguments
    as they were on its first call: the frames on the failure's user stack first
    (innermost first), then the others, deepest first."""
    fn = _function(root.source, root.name, root.namespace)
    calls: dict[types.CodeType, Entry | None] = {}
    depth = [0]
    root_code = fn.__code__

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        code = frame.f_code
        if code is root_code or not is_user_file(code.co_filename):
            return
        if event == "return":
            depth[0] -= 1
            return
        if event != "call":
            return
        depth[0] += 1
        if code in calls or len(calls) >= 4 * MAX_ENTRIES:
            return
        try:
            calls[code] = _entry_from_frame(frame, depth[0], torch)
        except Exception:
            pass

    args = {k: _fresh(v) for k, v in root.recorded.items()}
    sys.setprofile(profile)
    try:
        with torch.no_grad():
            fn(**args)
    except Exception:
        pass
    finally:
        sys.setprofile(None)
    entries = [e for e in calls.values() if e is not None]
    on_stack = {s.rsplit(" in ", 1)[0] for s in user_stack}

    def order(e: Entry) -> tuple[int, int]:
        code_lines = e.source.count("\n")
        file, _, first = e.where.rpartition(":")
        hit = any(
            f == file and int(first) <= int(ln) <= int(first) + code_lines
            for f, _, ln in (s.rpartition(":") for s in on_stack)
            if ln.isdigit() and first.isdigit()
        )
        return (0 if hit else 1, -e.depth)

    entries.sort(key=order)
    for e in entries:  # a size marked dynamic in the program stays dynamic below
        e.marks = _propagate_marks(root, e, torch)
    return entries[:MAX_ENTRIES]


def _entry_from_frame(frame: types.FrameType, depth: int, torch: types.ModuleType) -> Entry | None:
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    params = code.co_varnames[:n]
    if code.co_flags & 0x20 or code.co_name == "<lambda>":  # generators, lambdas
        return None
    recorded = {p: copy.deepcopy(frame.f_locals[p]) for p in params if p in frame.f_locals}
    namespace = frame.f_globals
    for name in code.co_freevars:
        if name in frame.f_locals:
            namespace = dict(namespace)
            namespace[name] = frame.f_locals[name]
    source = textwrap.dedent(inspect.getsource(code))
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        return None
    node.decorator_list = []
    return Entry(
        name=code.co_name,
        source=ast.unparse(tree) + "\n",
        namespace=namespace,
        recorded=recorded,
        where=f"{code.co_filename}:{code.co_firstlineno}",
        depth=depth,
    )


def _propagate_marks(root: Entry, entry: Entry, torch: types.ModuleType) -> dict[str, list[int]]:
    sizes = {root.recorded[k].shape[d] for k, dims in root.marks.items() for d in dims}
    if not sizes:
        return {}
    out: dict[str, list[int]] = {}
    for k, v in entry.recorded.items():
        if isinstance(v, torch.Tensor):
            dims = [d for d, s in enumerate(v.shape) if s in sizes]
            if dims:
                out[k] = dims
    return out


def _function(source: str, name: str, namespace: Mapping[str, object]) -> types.FunctionType:
    scope = dict(namespace)
    exec(compile(source, "<candidate>", "exec"), scope)  # noqa: S102
    fn = scope[name]
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"{name} is not a function")
    return fn


def _fresh(value: _T, memo: dict[int, object] | None = None) -> _T:
    try:
        return copy.deepcopy(value, memo)
    except Exception:
        return value


def make_tensor(spec: TensorSpec, torch: types.ModuleType) -> Tensor:
    """A fresh tensor from a spec (shape, dtype, device, requires_grad, range)."""
    dtype = getattr(torch, spec["dtype"])
    shape = tuple(spec["shape"])
    device = spec.get("device", "cpu")
    if dtype == torch.bool:
        t = torch.rand(shape, device=device) > 0.5
    elif dtype.is_floating_point or dtype.is_complex:
        t = torch.randn(shape, device=device, dtype=dtype)
    else:
        lo, hi = spec.get("range") or (0, 9)
        t = torch.randint(int(lo), int(hi) + 1, shape, device=device, dtype=dtype)
    if spec.get("requires_grad"):
        t.requires_grad_()
    return t


def tensor_spec(t: Tensor, torch: types.ModuleType) -> TensorSpec:
    spec: TensorSpec = {
        "shape": list(t.shape),
        "dtype": str(t.dtype).replace("torch.", ""),
        "device": str(t.device),
        "requires_grad": bool(t.requires_grad),
    }
    if not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool):
        if t.numel():
            spec["range"] = [int(t.min()), int(t.max())]
    if t.numel() <= 16 and t.device.type == "cpu":
        spec["values"] = t.detach().tolist()
    return spec


def call_args(
    entry: Entry,
    fn: Callable[..., object],
    scope: dict[str, Any],
    torch: types.ModuleType,
    recorded: dict[str, object] | None = None,
    memo: dict[int, object] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for a candidate: fresh copies of the recorded ones (or of
    ``recorded``: an earlier call's), values bound by ``__bindings__``, tensors made
    from ``__inputs__``; dims marked dynamic.  Calls that share ``memo`` share the
    copy of an object they were both given (one module called twice stays one)."""
    bindings = scope.get("__bindings__") or {}
    specs = scope.get("__inputs__") or {}
    base = entry.recorded if recorded is None else recorded
    recorded = {k: _fresh(v, memo) for k, v in base.items()}
    torch.manual_seed(0)
    out: dict[str, Any] = {}
    for name, p in inspect.signature(fn).parameters.items():
        if name in specs:
            spec = specs[name]
            out[name] = make_tensor(spec, torch) if "shape" in spec else spec["value"]
        elif name in bindings:
            out[name] = eval(bindings[name], {"__builtins__": {}}, recorded)  # noqa: S307
        elif name in recorded:
            out[name] = recorded[name]
        elif p.default is not inspect.Parameter.empty:
            continue
        else:
            raise KeyError(f"no value for parameter {name!r}")
        marks = entry.marks.get(name)
        if marks and isinstance(out[name], torch.Tensor):
            for d in marks:
                if d < out[name].dim():
                    torch._dynamo.mark_dynamic(out[name], d)
    return out

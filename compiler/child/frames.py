"""Capturing frames that fail in TorchDynamo, and writing their records.

Dynamo converts a frame in ``torch._dynamo.convert_frame._compile(code, globals,
locals, builtins, closure, ...)``.  A wrapper around it attaches a snapshot of those
(references, a shallow copy of the locals) to any exception leaving it.  The first
wrapper an exception leaves is the innermost frame being converted; Dynamo runs
nothing of the frame before converting it, so its locals are the frame's arguments as
the program passed them.  The record (compiler/record_format.py) is written when
tcompile reports the failure, or at once for every failing frame under
``tcompile run --record``.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from .. import layout
from ..protocol import Event
from ..record_format import write_record
from ..signature import FailureSignature, guard_failures, scrub_guards
from .recorder import STARTED
from .session import guard_reasons
from .torch_config import module_diffs

if TYPE_CHECKING:
    import inspect
    from collections.abc import Callable
    from types import CellType, CodeType
    from typing import TypedDict

    from .backend import TcompileBackend
    from .session import Session

    class CompileOptions(TypedDict):
        """The torch.compile call's options, as a record keeps them."""

        fullgraph: bool
        dynamic: bool | None
        mode: str | None
        options: dict[str, object] | None


_written = 0


@dataclasses.dataclass
class FrameState:
    """What Dynamo was converting when it failed (references; serialised on write)."""

    code: CodeType
    closure: tuple[CellType, ...] | None
    f_globals: dict[str, object]
    f_locals: dict[str, object]
    f_builtins: dict[str, object]
    one_graph: bool
    backend: TcompileBackend | None  # the TcompileBackend of the torch.compile call, if found
    # the arguments of the frame's earlier compiles (a recompile failure needs them)
    history: list[dict[str, object]] = dataclasses.field(default_factory=list)
    guards: list[str] = dataclasses.field(default_factory=list)  # as Dynamo wrote them


# Earlier compiles of a frame whose arguments a record keeps: enough for torch's default
# recompile_limit (8).  They are kept only where a recompilation can raise (fullgraph,
# error_on_recompile, fail_on_recompile_limit_hit): elsewhere they would only hold memory.
MAX_HISTORY = 8


def _recompile_can_raise(state: FrameState) -> bool:
    import torch._dynamo.config as dynamo_config

    return bool(
        state.one_graph
        or getattr(dynamo_config, "error_on_recompile", False)
        or getattr(dynamo_config, "fail_on_recompile_limit_hit", False)
    )


def install(session: Callable[[], Session]) -> None:
    """Wrap ``convert_frame._compile`` so a failing frame can be recorded.
    ``session`` is a function returning the process's Session (made on first use)."""
    import inspect

    import torch._dynamo.convert_frame as convert_frame

    original = convert_frame._compile  # noqa: SLF001
    if getattr(original, "_tcompile_wrapped", False):
        return
    try:
        sig = inspect.signature(original)
    except (TypeError, ValueError):
        return

    history: dict[CodeType, list[dict[str, object]]] = {}

    def _compile(*args: Any, **kwargs: Any) -> Any:
        code = args[0] if args else kwargs.get("code")
        seen_guards = len(guard_reasons(code))
        try:
            out = original(*args, **kwargs)
        except Exception as exc:
            if getattr(exc, "_tcompile_frame", None) is None:
                try:
                    state = _state_from_call(sig, args, kwargs)
                    state.history = list(history.get(state.code, []))
                    # the guards that failed when this compile began (a recompilation)
                    state.guards = guard_reasons(code)[seen_guards:]
                    exc._tcompile_frame = state  # type: ignore[attr-defined]
                    if session().config.record == "all":
                        write_from_exception(session(), exc)
                except Exception:
                    pass  # recording must never change what the program does
            raise
        try:  # the arguments it was compiled for (references, the last few)
            state = _state_from_call(sig, args, kwargs)
            if not _recompile_can_raise(state):
                return out  # keep no references a failure could never need
            names = argument_names(state.code)
            seen = history.setdefault(state.code, [])
            seen.append({n: v for n, v in state.f_locals.items() if n in names})
            del seen[:-MAX_HISTORY]
        except Exception:
            pass
        return out

    _compile._tcompile_wrapped = True  # type: ignore[attr-defined]
    convert_frame._compile = _compile  # noqa: SLF001


def _state_from_call(
    sig: inspect.Signature, args: tuple[object, ...], kwargs: dict[str, object]
) -> FrameState:
    bound = sig.bind_partial(*args, **kwargs).arguments
    return FrameState(
        code=bound["code"],
        closure=bound.get("closure"),
        f_globals=bound.get("globals") or {},
        f_locals=dict(bound.get("locals") or {}),
        f_builtins=bound.get("builtins") or {},
        one_graph=bool(bound.get("one_graph")),
        backend=_find_backend(bound.get("compiler_fn")),
    )


def _find_backend(fn: object) -> TcompileBackend | None:
    from .backend import TcompileBackend

    for _ in range(8):
        if fn is None or isinstance(fn, TcompileBackend):
            return fn
        fn = (
            getattr(fn, "_torchdynamo_orig_backend", None)
            or getattr(fn, "_inner_fn", None)
            or getattr(fn, "compiler_fn", None)
        )
    return None


def frame_of(exc: BaseException) -> FrameState | None:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        state = getattr(e, "_tcompile_frame", None)
        if state is not None:
            return state
        e = e.__cause__ or e.__context__
    return None


def write_from_exception(session: Session, exc: BaseException) -> str | None:
    """Write the record of the frame ``exc`` left (if any); its path, or None."""
    global _written
    state = frame_of(exc)
    if state is None or getattr(state, "written", None):
        return getattr(state, "written", None)
    sig = FailureSignature.from_exception("eager", "capture", exc)
    _written += 1
    name = layout.record_name(_written)
    path = os.path.join(session.config.dir, f"{os.getpid()}-{name}")
    meta, payload = snapshot(state, exc, sig)
    write_record(path, meta, payload)
    state.written = path  # type: ignore[attr-defined]
    session.recorder.emit(
        Event.RECORD, path=path, function=meta["function"], signature_text=str(sig)
    )
    return path


def argument_names(code: CodeType) -> list[str]:
    """The parameters of a code object, in order (with *args and **kwargs)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    return list(code.co_varnames[:n])


def _code_names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _reachable_names(
    names: set[str], f_globals: dict[str, object], arguments: dict[str, object]
) -> set[str]:
    """The globals the frame can reach: those its code names, and those named by the
    functions and classes of its own module that it reaches -- through those globals or
    through the modules it was called with (``Head.forward`` calling a helper of the
    script): the replayed frame runs them too, in a fresh ``__main__``."""
    import torch

    module = f_globals.get("__name__", "__main__")
    todo: list[object] = []
    for value in arguments.values():
        if isinstance(value, torch.nn.Module):
            todo += [type(m) for m in value.modules()]
    out = set(names)
    todo += [f_globals[n] for n in names if n in f_globals]
    seen: set[int] = set()
    while todo:
        value = todo.pop()
        if id(value) in seen or getattr(value, "__module__", None) != module:
            continue
        seen.add(id(value))
        codes = []
        if isinstance(value, type):
            codes = [f.__code__ for f in vars(value).values() if hasattr(f, "__code__")]
        elif hasattr(value, "__code__"):
            codes = [value.__code__]
        for code in codes:
            for name in _code_names(code) - out:
                out.add(name)
                if name in f_globals:
                    todo.append(f_globals[name])
    return out


class _Parts:
    """The record's parts, each pickled on its own: one that cannot be pickled is
    listed under ``unrecorded`` and the rest is still written."""

    def __init__(self) -> None:
        self.parts: dict[str, bytes] = {}
        self.unrecorded: dict[str, str] = {}
        self.tensors = 0
        self.tensor_bytes = 0

    def put(self, key: str, value: object) -> bool:
        import dill

        try:
            self.parts[key] = dill.dumps(value, recurse=True)
            return True
        except Exception as e:  # an object pickle cannot carry
            self.unrecorded[key] = f"{type(e).__name__}: {str(e)[:160]}"
            return False

    def count(self, value: object) -> None:
        import torch

        if isinstance(value, torch.Tensor):
            self.tensors += 1
            self.tensor_bytes += value.numel() * value.element_size()
        elif isinstance(value, torch.nn.Module):
            for t in list(value.parameters()) + list(value.buffers()):
                self.count(t)
        elif isinstance(value, (list, tuple)):
            for v in value:
                self.count(v)
        elif isinstance(value, dict):
            for v in value.values():
                self.count(v)


def _put_frame(parts: _Parts, state: FrameState) -> dict[str, object]:
    """Code, arguments, closure cells, the globals and builtins the code names.
    Returns the arguments."""
    import builtins

    code = state.code
    names = _code_names(code)
    parts.put("code", code)
    parts.put("module", state.f_globals.get("__name__", "__main__"))
    arguments = {n: v for n, v in state.f_locals.items() if n in argument_names(code)}
    for name, value in arguments.items():
        if parts.put(f"local:{name}", value):
            parts.count(value)
    for i, cell in enumerate(state.closure or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue  # an empty cell
        parts.put(f"cell:{i}", value)
    for i, earlier in enumerate(state.history):  # a recompile needs the earlier calls
        for name, value in earlier.items():
            # the very object of this call (the module, mostly): named, not copied, so
            # that it stays one object when loaded (Dynamo guards on its identity)
            same = next((n for n, v in arguments.items() if v is value), None)
            if same is not None:
                parts.put(f"historyref:{i}:{name}", same)
            else:
                parts.put(f"history:{i}:{name}", value)
    for name in sorted(_reachable_names(names, state.f_globals, arguments)):
        if name in state.f_globals and not name.startswith("__"):
            parts.put(f"global:{name}", state.f_globals[name])
    b = state.f_builtins if isinstance(state.f_builtins, dict) else vars(builtins)
    user_builtins = {
        n: b[n] for n in names if n in b and getattr(builtins, n, object()) is not b[n]
    }
    if user_builtins:
        parts.put("builtins", user_builtins)
    return arguments


def _put_options(
    parts: _Parts, state: FrameState
) -> tuple[CompileOptions, str | Callable[..., object]]:
    """The torch.compile options, the config that differs, where to import from."""
    backend = state.backend
    options: CompileOptions = {
        "fullgraph": state.one_graph,
        "dynamic": getattr(backend, "dynamic", None),
        "mode": getattr(backend, "mode", None),
        "options": getattr(backend, "options", None),
    }
    user_backend = getattr(backend, "user_backend", "inductor")
    parts.put("compile", dict(options, backend=user_backend))
    parts.put("dynamo_config", module_diffs("torch._dynamo.config"))
    parts.put("inductor_config", module_diffs("torch._inductor.config"))
    script_dir = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
    parts.put("sys_path", [p for p in [script_dir, os.getcwd(), *sys.path] if p])
    return options, user_backend


def snapshot(
    state: FrameState, exc: BaseException, sig: FailureSignature
) -> tuple[dict[str, object], bytes]:
    """(metadata, payload) of a frame's record."""
    import pickle

    import torch

    from tcompile import __version__

    parts = _Parts()
    arguments = _put_frame(parts, state)
    options, user_backend = _put_options(parts, state)
    payload = pickle.dumps(parts.parts, protocol=pickle.HIGHEST_PROTOCOL)
    code = state.code
    stack = getattr(exc, "real_stack", None) or []
    inner = stack[-1] if stack else None
    meta: dict[str, object] = {
        "tcompile": __version__,
        "torch": torch.__version__,
        "python": ".".join(map(str, sys.version_info[:3])),
        "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "function": code.co_qualname if hasattr(code, "co_qualname") else code.co_name,
        "file": code.co_filename,
        "line": code.co_firstlineno,
        "failure_at": f"{inner.filename}:{inner.lineno} in {inner.name}"
        if inner
        else f"{code.co_filename}:{code.co_firstlineno} on entry to {code.co_name}",
        "user_stack": [f"{fs.filename}:{fs.lineno} in {fs.name}" for fs in stack][-8:],
        "signature": sig.to_json(),
        "signature_text": str(sig),
        # a recompilation failure: which guards failed (the minifier keeps them failing)
        "guard_failures": scrub_guards(state.guards) or guard_failures(str(exc)),
        "guard_failures_text": state.guards or guard_failures(str(exc), scrub=False),
        "earlier_calls": len(state.history),  # their arguments are in the payload
        "compile": {
            **{k: v for k, v in options.items() if k != "options"},
            "backend": user_backend
            if isinstance(user_backend, str)
            else getattr(user_backend, "__name__", type(user_backend).__name__),
            "options": sorted((options["options"] or {}).keys()),
        },
        "arguments": {n: describe(v) for n, v in arguments.items()},
        "unrecorded": parts.unrecorded,
        "sizes": {
            "tensors": parts.tensors,
            "tensor_bytes": parts.tensor_bytes,
            "parts": len(parts.parts),
        },
        "seconds_into_program": round(time.monotonic() - STARTED, 2),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
    }
    return meta, payload


def describe(value: object) -> str:
    """A short description of a value, for the metadata."""
    import torch

    if isinstance(value, torch.Tensor):
        shape = "x".join(map(str, value.shape)) or "scalar"
        grad = ", requires_grad" if value.requires_grad else ""
        return f"Tensor {str(value.dtype).replace('torch.', '')}[{shape}] on {value.device}{grad}"
    if isinstance(value, torch.nn.Module):
        n = sum(p.numel() for p in value.parameters())
        nb = sum(1 for _ in value.buffers())
        return f"{type(value).__name__} (nn.Module, {n} parameter values, {nb} buffer(s))"
    text = repr(value)
    return f"{type(value).__name__}: {text[:60]}{'...' if len(text) > 60 else ''}"

"""Records of frames that failed in TorchDynamo: the file format, and the child side.

A record holds one Python frame as Dynamo saw it when it started converting it: the
code object, the closure, the globals and builtins the code names, the arguments
(tensors with their values, modules with their state), the ``torch.compile`` options,
the Dynamo and inductor config that differ from torch's defaults, and the failure's
signature.  ``tcompile replay`` rebuilds a function from it and compiles only that.

File format (version 1)::

    TCOMPILE-RECORD 1\\n        magic and format version
    {...}\\n                     metadata: one line of JSON, read without unpickling
    <payload>                    dill pickle of {part name: dill pickle of the part}

The metadata holds the payload's size and SHA-256, so a truncated or altered file is
refused before a byte of it is unpickled.  Each part is pickled on its own: a local
that cannot be pickled (a generator, an open file) is listed under ``unrecorded`` and
the rest of the record is still written.  Code objects do not carry across Python
minor versions; the metadata says which one wrote the record.

Where the frame comes from: Dynamo converts a frame in
``torch._dynamo.convert_frame._compile(code, globals, locals, builtins, closure, ...)``.
A wrapper around it attaches a snapshot of those (references, a shallow copy of the
locals) to any exception leaving it.  The first wrapper an exception leaves is the
innermost frame being converted; Dynamo runs nothing of the frame before converting
it, so its locals are the frame's arguments as the program passed them.  The record is
written when tcompile reports the failure (the program dies of it), or at once for
every failing frame under ``tcompile run --record``.

pickletools is used to look at a pickle (torch's own records) without executing it.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import io
import json
import os
import pickletools
import sys
import time
from pathlib import Path
from typing import Any

MAGIC = b"TCOMPILE-RECORD"
FORMAT = 1
MAX_HEADER = 1 << 20  # the metadata line is small; a longer "line" is not a record


class RecordError(Exception):
    """A file that cannot be used as a record (said in one line; exit 2)."""


@dataclasses.dataclass
class RecordInfo:
    path: str
    kind: str  # "tcompile" | "torch"
    meta: dict[str, Any]
    payload_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, **self.meta}


# ---------------------------------------------------------------- reading and writing


def write_record(path: str | os.PathLike[str], meta: dict[str, Any], payload: bytes) -> None:
    """Atomically: a reader never sees half a record."""
    meta = dict(meta, format=FORMAT, payload_bytes=len(payload))
    meta["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    header = json.dumps(meta, default=str, sort_keys=True).encode()
    tmp = f"{os.fspath(path)}.tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC + b" %d\n" % FORMAT)
        f.write(header + b"\n")
        f.write(payload)
    os.replace(tmp, path)


def read_info(path: str | os.PathLike[str]) -> RecordInfo:
    """The record's metadata; executes and unpickles nothing.  Raises RecordError."""
    p = Path(path)
    if not p.exists():
        raise RecordError(f"record not found: {path}")
    if p.is_dir():
        raise RecordError(f"{path} is a directory, not a record")
    try:
        size = p.stat().st_size
        with open(p, "rb") as f:
            head = f.read(len(MAGIC) + 32)
    except OSError as exc:
        raise RecordError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise RecordError(f"{path} is empty: not a record")
    if head.startswith(MAGIC):
        return _read_tcompile_header(p, size)
    if head[:1] == b"\x80":  # a pickle: maybe torch's own record
        return _read_torch_record(p, size)
    raise RecordError(f"{path} is not a tcompile record (nor one of torch's replay records)")


def _read_tcompile_header(p: Path, size: int) -> RecordInfo:
    with open(p, "rb") as f:
        first = f.readline(64)
        second = f.readline(MAX_HEADER)
        offset = f.tell()
    parts = first.strip().split(b" ")
    if len(parts) != 2 or not parts[1].isdigit():
        raise RecordError(f"{p}: corrupt record (bad first line)")
    version = int(parts[1])
    if version > FORMAT:
        raise RecordError(
            f"{p}: record format {version} is newer than this tcompile reads "
            f"({FORMAT}); upgrade tcompile"
        )
    if not second.endswith(b"\n"):
        raise RecordError(f"{p}: truncated record (the metadata line is cut short)")
    try:
        meta = json.loads(second)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RecordError(f"{p}: corrupt record (the metadata is not JSON)") from None
    if not isinstance(meta, dict) or "payload_bytes" not in meta:
        raise RecordError(f"{p}: corrupt record (the metadata has no payload size)")
    have, want = size - offset, int(meta["payload_bytes"])
    if have < want:
        raise RecordError(f"{p}: truncated record: the payload has {have} of {want} bytes")
    if have > want:
        raise RecordError(f"{p}: corrupt record: {have - want} bytes after the payload")
    return RecordInfo(str(p), "tcompile", meta, offset)


def _read_torch_record(p: Path, size: int) -> RecordInfo:
    """torch's ``replay_record_enabled`` records are dill pickles of ExecutionRecord.
    The opcodes are walked (nothing executed) to check the file is whole and to
    find the class and names it holds; the function, exception type and first line
    are in torch's file name: ``{co_name}_{ExcType}_{co_firstlineno}.rec``."""
    data = p.read_bytes()
    strings: list[str] = []
    try:
        for _op, arg, _pos in pickletools.genops(io.BytesIO(data)):
            if isinstance(arg, str) and len(strings) < 2000:
                strings.append(arg)
    except Exception as exc:  # genops raises ValueError on a cut-short pickle
        raise RecordError(
            f"{p}: not a usable record (a damaged or truncated pickle: {exc})"
        ) from None
    if "ExecutionRecord" not in strings:
        raise RecordError(f"{p} is a pickle but not a record (no ExecutionRecord in it)")
    meta: dict[str, Any] = {"format": None, "payload_bytes": size, "writer": "torch"}
    stem = p.name[: -len(".rec")] if p.name.endswith(".rec") else p.stem
    bits = stem.rsplit("_", 2)
    if len(bits) == 3 and bits[2].isdigit():
        meta.update(
            function=bits[0],
            line=int(bits[2]),
            exc_type=bits[1],
            signature_text=f"{bits[1]} (from the file name)",
        )
    return RecordInfo(str(p), "torch", meta)


def read_payload(info: RecordInfo) -> dict[str, bytes]:
    """The pickled parts of a tcompile record, checked against the metadata first.
    Unpickles only the outer dict of bytes (it holds no objects of the program)."""
    import pickle

    with open(info.path, "rb") as f:
        f.seek(info.payload_offset)
        payload = f.read()
    if hashlib.sha256(payload).hexdigest() != info.meta.get("payload_sha256"):
        raise RecordError(f"{info.path}: corrupt record (the payload's checksum does not match)")
    parts = pickle.loads(payload)
    if not isinstance(parts, dict) or not all(isinstance(v, bytes) for v in parts.values()):
        raise RecordError(f"{info.path}: corrupt record (unexpected payload layout)")
    return parts


# ---------------------------------------------------------------- the child side

_written = 0


@dataclasses.dataclass
class FrameState:
    """What Dynamo was converting when it failed (references; serialised on write)."""

    code: Any
    closure: Any
    f_globals: dict[str, Any]
    f_locals: dict[str, Any]
    f_builtins: Any
    one_graph: bool
    backend: Any  # the TcompileBackend of the torch.compile call, if found


def install(session: Any) -> None:
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

    def _compile(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except Exception as exc:
            if getattr(exc, "_tcompile_frame", None) is None:
                try:
                    state = _state_from_call(sig, args, kwargs)
                    exc._tcompile_frame = state  # type: ignore[attr-defined]
                    if session().config.record == "all":
                        write_from_exception(session(), exc)
                except Exception:
                    pass  # recording must never change what the program does
            raise

    _compile._tcompile_wrapped = True  # type: ignore[attr-defined]
    convert_frame._compile = _compile  # noqa: SLF001


def _state_from_call(sig: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> FrameState:
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


def _find_backend(fn: Any) -> Any:
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


def write_from_exception(session: Any, exc: BaseException) -> str | None:
    """Write the record of the frame ``exc`` left (if any); its path, or None."""
    global _written
    state = frame_of(exc)
    if state is None or getattr(state, "written", None):
        return getattr(state, "written", None)
    from .signature import FailureSignature

    sig = FailureSignature.from_exception("eager", "capture", exc)
    _written += 1
    name = "record.pkl" if _written == 1 else f"record-{_written}.pkl"
    path = os.path.join(session.config.dir, f"{os.getpid()}-{name}")
    meta, payload = snapshot(state, exc, sig)
    write_record(path, meta, payload)
    state.written = path  # type: ignore[attr-defined]
    session.recorder.emit("record", path=path, function=meta["function"], signature_text=str(sig))
    return path


def argument_names(code: Any) -> list[str]:
    """The parameters of a code object, in order (with *args and **kwargs)."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # CO_VARARGS, CO_VARKEYWORDS
    return list(code.co_varnames[:n])


def _code_names(code: Any) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def snapshot(state: FrameState, exc: BaseException, sig: Any) -> tuple[dict[str, Any], bytes]:
    """(metadata, payload) of a frame's record."""
    import builtins
    import pickle

    import dill
    import torch

    from tcompile import __version__

    code = state.code
    names = _code_names(code)
    parts: dict[str, bytes] = {}
    unrecorded: dict[str, str] = {}
    tensors = [0, 0]

    def put(key: str, value: Any) -> bool:
        try:
            parts[key] = dill.dumps(value, recurse=True)
            return True
        except Exception as e:  # an object pickle cannot carry
            unrecorded[key] = f"{type(e).__name__}: {str(e)[:160]}"
            return False

    def count(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            tensors[0] += 1
            tensors[1] += value.numel() * value.element_size()
        elif isinstance(value, torch.nn.Module):
            for t in list(value.parameters()) + list(value.buffers()):
                count(t)
        elif isinstance(value, (list, tuple)):
            for v in value:
                count(v)
        elif isinstance(value, dict):
            for v in value.values():
                count(v)

    put("code", code)
    put("module", state.f_globals.get("__name__", "__main__"))
    arguments = {n: v for n, v in state.f_locals.items() if n in argument_names(code)}
    for name, value in arguments.items():
        if put(f"local:{name}", value):
            count(value)
    for i, cell in enumerate(state.closure or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue  # an empty cell
        put(f"cell:{i}", value)
    for name in sorted(names):
        if name in state.f_globals and not name.startswith("__"):
            put(f"global:{name}", state.f_globals[name])
    b = state.f_builtins if isinstance(state.f_builtins, dict) else vars(builtins)
    user_builtins = {
        n: b[n] for n in names if n in b and getattr(builtins, n, object()) is not b[n]
    }
    if user_builtins:
        put("builtins", user_builtins)
    backend = state.backend
    options = {
        "fullgraph": state.one_graph,
        "dynamic": getattr(backend, "dynamic", None),
        "mode": getattr(backend, "mode", None),
        "options": getattr(backend, "options", None),
    }
    user_backend = getattr(backend, "user_backend", "inductor")
    put("compile", dict(options, backend=user_backend))
    put("dynamo_config", _config_diffs("torch._dynamo.config"))
    put("inductor_config", _config_diffs("torch._inductor.config"))
    script_dir = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""
    put("sys_path", [p for p in [script_dir, os.getcwd(), *sys.path] if p])
    payload = pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL)
    stack = getattr(exc, "real_stack", None) or []
    inner = stack[-1] if stack else None
    meta: dict[str, Any] = {
        "tcompile": __version__,
        "torch": torch.__version__,
        "python": ".".join(map(str, sys.version_info[:3])),
        "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "function": code.co_qualname if hasattr(code, "co_qualname") else code.co_name,
        "file": code.co_filename,
        "line": code.co_firstlineno,
        "failure_at": f"{inner.filename}:{inner.lineno} in {inner.name}" if inner else "",
        "user_stack": [f"{fs.filename}:{fs.lineno} in {fs.name}" for fs in stack][-8:],
        "signature": sig.to_json(),
        "signature_text": str(sig),
        "compile": {
            **{k: v for k, v in options.items() if k != "options"},
            "backend": user_backend
            if isinstance(user_backend, str)
            else getattr(user_backend, "__name__", type(user_backend).__name__),
            "options": sorted((options["options"] or {}).keys()),
        },
        "arguments": {n: describe(v) for n, v in arguments.items()},
        "unrecorded": unrecorded,
        "sizes": {"tensors": tensors[0], "tensor_bytes": tensors[1], "parts": len(parts)},
        "seconds_into_program": round(time.monotonic() - _started(), 2),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
    }
    return meta, payload


def _started() -> float:
    from .hooks import STARTED

    return STARTED


def describe(value: Any) -> str:
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


def _config_diffs(module_name: str) -> dict[str, Any]:
    import importlib

    mod = importlib.import_module(module_name)
    out: dict[str, Any] = {}
    try:
        current = mod.get_config_copy()
        entries = mod._config.items()  # noqa: SLF001
    except AttributeError:
        return out
    for key, entry in entries:
        if key not in current or "cache" in key:
            continue
        value = current[key]
        try:
            same = bool(value == entry.default)
        except Exception:
            same = False
        if not same:
            out[key] = value
    return out

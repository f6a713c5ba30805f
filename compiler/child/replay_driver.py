"""The program ``tcompile replay`` runs: one recorded frame, under torch.compile.

Run under tcompile's hooks like any user program (so its graphs are numbered,
checked and classified the same way, and ``tcompile minify`` can run it)::

    python -c "$REPLAY_DRIVER" RECORD [--no-fullgraph] [--status FILE]   (protocol.py)

From ``-c``, not as a script or ``-m``: the recorded frame's globals go into
``__main__`` (where its script's globals were), which must not be this module.

It rebuilds the frame's function from the record (code object, globals, closure),
applies the recorded Dynamo and inductor config, compiles it with the recorded
``torch.compile`` options and calls it with the recorded arguments.  A capture failure
propagates as it did in the program.  Problems with the record itself (a part that
cannot be unpickled here) are written to ``--status`` as one line and exit 2.

This executes the recorded program's code: replay only records you trust.
"""

from __future__ import annotations

import json
import sys
import types
from typing import TYPE_CHECKING, Any

from ..exitcodes import ExitCode

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping
    from typing import TypedDict

    from ..record_format import RecordInfo

    class _CompileKwargs(TypedDict, total=False):
        """The recorded torch.compile call's keyword arguments."""

        backend: str | Callable[..., object]
        fullgraph: bool
        dynamic: bool | None
        mode: str | None
        options: dict[str, str | int | bool | Callable[..., object]] | None


class BadRecord(Exception):
    pass


def _status(path: str | None, **fields: object) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(fields, f, default=str)


def _load_tcompile(info: RecordInfo, sha256: str | None) -> dict[str, Any]:
    import dill

    from ..record_format import read_payload

    parts = read_payload(info, expect_sha256=sha256)
    # the program's own modules (classes defined next to the script) import from
    # where the program ran
    if "sys_path" in parts:
        try:
            for entry in reversed(dill.loads(parts["sys_path"])[:2]):
                if entry not in sys.path:
                    sys.path.insert(0, entry)
        except Exception:
            pass
    out: dict[str, Any] = {"globals": {}, "locals": {}, "cells": {}}
    for key, blob in parts.items():
        if key == "sys_path":
            continue
        try:
            value = dill.loads(blob)
        except Exception as exc:
            raise BadRecord(
                f"cannot restore {key.replace(':', ' ')} from the record: "
                f"{type(exc).__name__}: {str(exc)[:200]}"
            ) from None
        kind, _, name = key.partition(":")
        if kind in ("history", "historyref"):
            # history:I:NAME, an argument of an earlier compile; historyref:I:NAME, one
            # that was this call's argument VALUE (the same object)
            index, _, arg = name.partition(":")
            if (
                not index.isdigit()
                or not arg
                or (kind == "historyref" and not isinstance(value, str))
            ):
                raise BadRecord(f"malformed record: a history part named {name!r}")
            history = out.setdefault("history", [])
            while len(history) <= int(index):
                history.append({})
            history[int(index)][arg] = value if kind == "history" else _Ref(value)
        elif kind == "global":
            out["globals"][name] = value
        elif kind == "local":
            out["locals"][name] = value
        elif kind == "cell":
            if not name.isdigit():
                raise BadRecord(f"malformed record: a closure cell named {name!r}")
            out["cells"][int(name)] = value
        else:
            out[kind] = value
    for earlier in out.get("history") or []:
        for arg, value in earlier.items():
            if isinstance(value, _Ref):
                if value.name not in out["locals"]:
                    raise BadRecord(f"malformed record: a history part names {value.name!r}")
                earlier[arg] = out["locals"][value.name]
    _check_loaded(out)
    return out


class _Ref:
    """A history argument that is the failing call's argument ``name`` itself."""

    def __init__(self, name: str) -> None:
        self.name = name


# the parts of a record and the types they must have once loaded
_PART_TYPES: dict[str, tuple[type, ...]] = {
    "code": (types.CodeType,),
    "module": (str,),
    "compile": (dict,),
    "builtins": (dict,),
    "dynamo_config": (dict,),
    "inductor_config": (dict,),
}


def _check_loaded(loaded: dict[str, Any]) -> None:
    """A record with a part of the wrong type is malformed (exit 2), not a crash of
    the driver, and never a frame that "runs without a failure"."""
    if "code" not in loaded:
        raise BadRecord("malformed record: it has no code object")
    for key, want in _PART_TYPES.items():
        if key in loaded and not isinstance(loaded[key], want):
            raise BadRecord(
                f"malformed record: its {key} is a {type(loaded[key]).__name__}, "
                f"not a {want[0].__name__}"
            )
    options = loaded.get("compile") or {}
    backend = options.get("backend", "inductor")
    if not (isinstance(backend, str) or callable(backend)):
        raise BadRecord(f"malformed record: its backend is a {type(backend).__name__}")
    for key, want in (("fullgraph", (bool,)), ("dynamic", (bool, type(None)))):
        if key in options and not isinstance(options[key], want):
            raise BadRecord(f"malformed record: compile option {key} is {options[key]!r}")
    code = loaded["code"]
    names = list(code.co_varnames)
    n = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & 0x04 and names[n] in loaded["locals"]:
        if not isinstance(loaded["locals"][names[n]], (tuple, list)):
            raise BadRecord("malformed record: its *args is not a sequence")
        n += 1
    if code.co_flags & 0x08 and names[n] in loaded["locals"]:
        if not isinstance(loaded["locals"][names[n]], dict):
            raise BadRecord("malformed record: its **kwargs is not a dict")


def _load_torch(path: str) -> dict[str, Any]:
    """A record written by torch's ``replay_record_enabled`` (a dill ExecutionRecord)."""
    import importlib

    try:
        import dill
    except ImportError:
        raise BadRecord("reading torch's records needs dill (pip install dill)") from None
    from torch._dynamo.replay_record import DummyModule

    with open(path, "rb") as f:
        try:
            record = dill.load(f)
        except Exception as exc:
            raise BadRecord(
                f"cannot unpickle torch's record: {type(exc).__name__}: {exc}"
            ) from None

    def real(value: object) -> object:
        if isinstance(value, DummyModule):
            try:
                return importlib.import_module(value.name)
            except Exception:
                return value
        return value

    cells: dict[int, object] = {}
    for i, cell in enumerate(record.closure or ()):
        try:
            cells[i] = cell.cell_contents
        except ValueError:
            pass
    return {
        "code": record.code,
        "globals": {k: real(v) for k, v in record.globals.items()},
        "locals": dict(record.locals),
        "cells": cells,
        "builtins": dict(record.builtins),
        "compile": {"backend": "inductor", "fullgraph": False},
    }


def _arguments(
    code: types.CodeType, f_locals: Mapping[str, object]
) -> tuple[list[object], dict[str, object], list[str]]:
    """Positional and keyword arguments from the frame's locals at entry."""
    flags = code.co_flags
    n = code.co_argcount
    k = code.co_kwonlyargcount
    names = list(code.co_varnames)
    missing: list[str] = []

    def get(name: str) -> Any:
        if name not in f_locals:
            missing.append(name)
            return None
        return f_locals[name]

    args = [get(name) for name in names[:n]]
    kwargs = {name: get(name) for name in names[n : n + k]}
    i = n + k
    if flags & 0x04:  # CO_VARARGS
        args.extend(get(names[i]) or ())
        i += 1
    if flags & 0x08:  # CO_VARKEYWORDS
        kwargs.update(get(names[i]) or {})
    return args, kwargs, missing


def build(
    loaded: dict[str, Any],
) -> tuple[types.FunctionType, list[object], dict[str, object], list[str]]:
    import builtins

    code = loaded["code"]
    module = loaded.get("module") or "__main__"
    if module == "__main__":
        # The program's script was __main__: Dynamo finds the globals of inlined
        # functions (and guards on them) through sys.modules["__main__"], so they go
        # there.  The driver runs from `python -c`, whose __main__ is empty.
        import __main__

        namespace = __main__.__dict__
    else:
        namespace = {"__builtins__": builtins, "__name__": module}
    namespace.update(loaded.get("builtins") or {})
    namespace.update(loaded["globals"])
    ncells = len(code.co_freevars)
    cells = tuple(
        types.CellType(loaded["cells"][i]) if i in loaded["cells"] else types.CellType()
        for i in range(ncells)
    )
    fn = types.FunctionType(code, namespace, code.co_name, None, cells or None)
    args, kwargs, missing = _arguments(code, loaded["locals"])
    return fn, args, kwargs, missing


def _eager_fails_same(
    fn: Callable[..., object],
    spare: tuple[list[object], dict[str, object]] | None,
    exc: BaseException,
) -> str:
    """Run the frame without torch.compile; the failure, if it is the same one."""
    import traceback

    if spare is None:
        return ""
    args, kwargs = spare
    try:
        fn(*args, **kwargs)
    except Exception as eager:
        causes: list[BaseException] = []
        e: BaseException | None = exc
        while e is not None and e not in causes:
            causes.append(e)
            e = e.__cause__
        theirs = (type(eager).__name__, str(eager).strip())
        if any((type(c).__name__, str(c).strip()) == theirs for c in causes):
            return f"{theirs[0]}: {theirs[1][:200]}"
        last = traceback.extract_tb(eager.__traceback__)[-1:]
        stack = getattr(exc, "real_stack", None) or []
        if (
            last
            and stack
            and (last[0].filename, last[0].lineno)
            == (
                stack[-1].filename,
                stack[-1].lineno,
            )
        ):
            return f"{theirs[0]} at {last[0].filename}:{last[0].lineno}"
    return ""


def _prepare(
    ns: argparse.Namespace,
) -> tuple[dict[str, Any], types.FunctionType, list[object], dict[str, object], list[str]]:
    """Read the record and rebuild the frame's function and arguments."""
    import torch  # noqa: F401  (tcompile's hooks patch torch.compile on import)

    from ..record_format import RecordError, read_info
    from .torch_config import apply_module_diffs

    try:
        info = read_info(ns.record)
        loaded = (
            _load_tcompile(info, ns.sha256) if info.kind == "tcompile" else _load_torch(ns.record)
        )
    except RecordError as exc:
        raise BadRecord(str(exc)) from None
    apply_module_diffs("torch._dynamo.config", loaded.get("dynamo_config") or {})
    apply_module_diffs("torch._inductor.config", loaded.get("inductor_config") or {})
    fn, args, kwargs, missing = build(loaded)
    return loaded, fn, args, kwargs, missing


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="replay_driver")
    parser.add_argument("record")
    parser.add_argument("--fullgraph", dest="fullgraph", action="store_true", default=None)
    parser.add_argument("--no-fullgraph", dest="fullgraph", action="store_false")
    parser.add_argument("--status")
    parser.add_argument("--sha256")
    ns = parser.parse_args(argv)

    try:
        loaded, fn, args, kwargs, missing = _prepare(ns)
    except BadRecord as exc:
        _status(ns.status, error=str(exc))
        return int(ExitCode.USAGE)
    except Exception as exc:  # the driver's own failure: never "no failure"
        _status(ns.status, driver_error=f"{type(exc).__name__}: {str(exc)[:300]}")
        return int(ExitCode.INTERNAL)
    import torch

    options = dict(loaded.get("compile") or {})
    fullgraph = options.get("fullgraph", False) if ns.fullgraph is None else ns.fullgraph
    kw: _CompileKwargs = {
        "backend": options.get("backend") or "inductor",
        "fullgraph": bool(fullgraph),
        "dynamic": options.get("dynamic"),
    }
    if options.get("mode"):
        kw["mode"] = options["mode"]
    elif options.get("options"):
        kw["options"] = options["options"]
    status = {"missing": missing, "compile": {**kw, "backend": str(kw["backend"])}}
    _status(ns.status, started=True, **status)

    import copy

    try:
        spare = copy.deepcopy((args, kwargs))  # for the eager check, untouched by Dynamo
    except Exception:
        spare = None
    compiled = torch.compile(fn, **kw)
    try:
        for earlier in loaded.get("history") or []:  # a recompilation needs the calls before
            a, k, _ = _arguments(loaded["code"], earlier)
            compiled(*a, **k)
        compiled(*args, **kwargs)
    except Exception as exc:
        same = _eager_fails_same(fn, spare, exc)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raised = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        _status(ns.status, eager_fails_same=same, raised=raised, **status)
        raise
    _status(ns.status, finished=True, **status)
    return 0

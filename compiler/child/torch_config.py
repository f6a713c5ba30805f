"""The compiler configuration in force inside the program, as data a repro or a record
can restate (compiler/configs.py writes it back as Python), and applying it again."""

from __future__ import annotations

import importlib
import inspect
import textwrap
from typing import TYPE_CHECKING, Any

from ..configs import set_dotted

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import CodeType, ModuleType
    from typing import TypedDict

    from torch._ops import OpOverload, OpOverloadPacket

    class FunctionSpec(TypedDict):
        """A function of the program's, as a repro defines it again."""

        function: str  # the name to bind it to
        source: str | None  # None: no source to be had

    class ObjectSpec(TypedDict):
        """A callable object (a CustomGraphPass), as :func:`object_of` describes it."""

        object: str  # its class's name
        source: str | None  # its class's source
        bases: list[str]  # the imports of its bases
        state: dict[str, object] | None  # its __dict__, when that is plain data

    class TableDiffs(TypedDict, total=False):
        """:func:`decomposition_table_diffs`' answer."""

        changed: dict[str, FunctionSpec]  # op name -> the program's function
        removed: list[str]  # op names


def module_diffs(module_name: str, *, plain_only: bool = False) -> dict[str, object]:
    """Entries of a torch config module (``torch._inductor.config``,
    ``torch._dynamo.config``) whose value differs from torch's default.  Cache
    settings are left out: tcompile turns caches off itself, and they never make a bug.

    With ``plain_only``, values that are plain data are kept as they are and a
    function (a custom pass) as ``{"function": name, "source": ...}``; anything else
    is dropped."""
    mod = importlib.import_module(module_name)
    out: dict[str, object] = {}
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
        if same:
            continue
        if not plain_only:
            out[key] = value
        elif isinstance(value, (str, int, float, bool, type(None))) or _plain_container(value):
            out[key] = value
        elif callable(value) and not inspect.isroutine(value) and not isinstance(value, type):
            out[key] = object_of(value)  # a pass object (a CustomGraphPass)
        elif callable(value):
            name = name_of(value, key.split(".")[-1])
            out[key] = {"function": name, "source": source_of(value, name)}
    return out


def object_of(value: object) -> ObjectSpec:
    """A callable object (a CustomGraphPass) as data: its class's source, the imports
    of its bases, and its state when that is plain data."""
    cls = type(value)
    state = dict(getattr(value, "__dict__", {}))
    return {
        "object": cls.__name__,
        "source": source_of(cls),
        "bases": [
            f"from {b.__module__} import {b.__name__}"
            for b in cls.__bases__
            if b is not object and b.__module__ != cls.__module__
        ],
        "state": state if _plain_container(state) else None,
    }


def decomposition_table_diffs() -> TableDiffs:
    """When the program patched the table inductor uses (``select_decomp_table``): the
    entries that differ from torch's own table (the program's functions, with their
    source) and the ones it removed."""
    import torch._inductor.compile_fx as compile_fx
    import torch._inductor.decomposition as inductor_decomp

    used_fn = compile_fx.select_decomp_table
    if used_fn is inductor_decomp.select_decomp_table:
        return {}
    used, own = used_fn(), inductor_decomp.select_decomp_table()
    changed: dict[str, FunctionSpec] = {
        str(op): {"function": name_of(fn, str(op)), "source": source_of(fn, str(op))}
        for op, fn in used.items()
        if own.get(op) is not fn and not (getattr(fn, "__module__", "") or "").startswith("torch")
    }
    removed = sorted(str(op) for op in own if op not in used)
    return {"changed": changed, "removed": removed} if changed or removed else {}


def config_diffs() -> dict[str, object]:
    """inductor config entries that differ from torch's defaults, plus the entries the
    program put in inductor's decomposition table (``"decompositions"``)."""
    out = module_diffs("torch._inductor.config", plain_only=True)
    decomps = user_decompositions()
    if decomps:
        out["decompositions"] = decomps
    table = decomposition_table_diffs()
    if table:
        out["decomposition_table"] = table
    autotune = select_algorithm_diffs()
    if autotune:
        out["select_algorithm"] = autotune
    return out


def select_algorithm_diffs() -> dict[str, Any]:
    """What the program set of autotuning's own state outside inductor's config (as
    torch's tests of it do, #173068): ``VERIFY`` (each choice checked against ATen:
    a wrong one raises "Incorrect result from choice") and its own
    ``AlgorithmSelectorCache.lookup`` (one that benchmarks every time, so every compile
    verifies).  A worker judging the graph alone has neither unless they are restated:
    the captured graph then does not fail alone (issue 61)."""
    import sys

    sa = sys.modules.get("torch._inductor.select_algorithm")
    if sa is None:  # never imported: nothing autotuned, nothing set
        return {}
    out: dict[str, Any] = {}
    verify = getattr(sa, "VERIFY", None)
    if isinstance(verify, dict) and verify:
        out["VERIFY"] = {k: v for k, v in verify.items() if isinstance(v, (bool, int, float, str))}
    lookup = getattr(getattr(sa, "AlgorithmSelectorCache", None), "lookup", None)
    if inspect.isfunction(lookup) and not (lookup.__module__ or "").startswith("torch"):
        out["lookup"] = {"function": name_of(lookup, "lookup"), "source": source_of(lookup)}
    return out


def _apply_select_algorithm(state: dict[str, Any], namespace: dict[str, Any]) -> None:
    """Restore :func:`select_algorithm_diffs`' answer."""
    import torch._inductor.select_algorithm as sa

    if state.get("VERIFY"):
        sa.VERIFY = dict(state["VERIFY"])  # type: ignore[attr-defined]
    lookup = state.get("lookup") or {}
    if lookup.get("source"):
        exec(compile(lookup["source"], "<select_algorithm lookup>", "exec"), namespace)  # noqa: S102
        sa.AlgorithmSelectorCache.lookup = namespace[lookup["function"]]  # type: ignore[method-assign]


def user_decompositions() -> dict[str, FunctionSpec]:
    """Entries of inductor's decomposition table that the program itself put there
    (functions not defined in torch): op name -> {"function", "source"}."""
    import torch._inductor.decomposition as inductor_decomp

    out: dict[str, FunctionSpec] = {}
    for op, fn in list(inductor_decomp.decompositions.items()):
        mod = getattr(fn, "__module__", None) or ""
        if not inspect.isfunction(fn) or not mod or mod.startswith("torch"):
            continue
        out[str(op)] = {"function": name_of(fn, str(op)), "source": source_of(fn, str(op))}
    return out


def _plain_container(v: object) -> bool:
    """Plain data at any depth (lists, tuples, dicts with str keys, scalars): what a repro
    can restate with ``repr`` -- e.g. ``post_grad_fusion_options={"pass": {}}``."""
    if isinstance(v, (str, int, float, bool, type(None))):
        return True
    if isinstance(v, (list, tuple)):
        return all(_plain_container(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain_container(x) for k, x in v.items())
    return False


def name_of(fn: object, hint: str = "fn") -> str:
    """A name to bind ``fn`` to in a repro: its own, or for a lambda ``<hint>_lambda``."""
    import re

    name = getattr(fn, "__name__", None) or type(fn).__name__
    if not name.isidentifier():
        name = re.sub(r"\W", "_", hint).strip("_") + "_lambda"
    return name


def source_of(obj: object, hint: str = "fn") -> str | None:
    """Source of a function or class of the user's program (a backend, a pass, a
    decomposition), preceded by what its code reaches in its module's globals (its
    imports, the helpers and constants of its own module, see :func:`reached`): it
    must run in a repro that has only torch.  A lambda comes as an assignment to
    :func:`name_of`.  None when there is no source."""
    if isinstance(obj, str) or not callable(obj):
        return None
    try:
        if getattr(obj, "__name__", "") == "<lambda>":
            text = f"{name_of(obj, hint)} = {_lambda_source(obj)}\n"
        else:
            text = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError, ValueError):
        return None
    prelude = reached(obj)
    return (prelude + "\n\n" + text) if prelude else text


def _lambda_source(fn: Any) -> str:
    """The lambda expression itself, out of the statement that holds it."""
    import ast

    lines, _ = inspect.findsource(fn)
    text = "".join(lines)
    code = fn.__code__
    params = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Lambda)
            and node.lineno == code.co_firstlineno
            and [a.arg for a in node.args.args + node.args.kwonlyargs] == params
        ):
            segment = ast.get_source_segment(text, node)
            if segment:
                return " ".join(segment.split())
    raise ValueError("lambda source not found")


def _codes(obj: object) -> list[CodeType]:
    if inspect.isclass(obj):
        out = []
        for value in vars(obj).values():
            value = getattr(value, "__func__", value)  # staticmethod, classmethod
            value = getattr(value, "fget", value)  # property
            if hasattr(value, "__code__"):
                out.append(value.__code__)
        return out
    fn = getattr(obj, "__func__", obj)
    return [fn.__code__] if hasattr(fn, "__code__") else []


def _names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def _importable(module: str) -> bool:
    """A module a fresh interpreter imports as it is (torch, the standard library, an
    installed package), not the user's own file."""
    import sys

    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None)
    if module.split(".")[0] in ("torch", "builtins") or module in sys.builtin_module_names:
        return True
    if not path or module == "__main__":
        return False
    from ..owners import Owner, owner

    return owner(path) in (Owner.TORCH, Owner.INSTALLED)


def reached(obj: object, _seen: set[int] | None = None) -> str:
    """Source lines for the globals ``obj``'s code reads: ``import`` lines for modules
    and for what importable modules define, the source of the user's own helpers (and
    what they reach), constants as literals, closure values of a nested function; what
    cannot be carried is named in a comment (the repro then fails to reproduce, and
    tcompile falls back to the launcher form)."""
    import builtins

    import torch

    from ..literals import py_literal

    seen = _seen if _seen is not None else {id(obj)}
    fn = getattr(obj, "__func__", obj)
    module = inspect.getmodule(obj)
    env = dict(getattr(fn, "__globals__", None) or vars(module or builtins))
    free = getattr(fn, "__code__", None)
    for name, cell in zip(free.co_freevars if free else (), getattr(fn, "__closure__", None) or ()):
        try:
            env[name] = cell.cell_contents
        except ValueError:
            continue
    wanted = set().union(*(_names(c) for c in _codes(obj))) if _codes(obj) else set()
    if free is not None:
        wanted |= set(free.co_freevars)
    imports: list[str] = []
    blocks: list[str] = []
    ops = (torch._ops._OpNamespace, torch._ops.OpOverloadPacket, torch._ops.OpOverload)
    for name in sorted(wanted):
        if name not in env or name.startswith("__"):  # a module's own dunders
            continue
        value = env[name]
        if name in vars(builtins) and value is vars(builtins)[name]:
            continue
        if isinstance(value, ops):  # torch.ops.aten, aten.mul, aten.mul.Tensor
            path = value.name if isinstance(value, torch._ops._OpNamespace) else str(value)
            blocks.append(f"{name} = torch.ops.{path}")
        elif inspect.ismodule(value):
            full = value.__name__
            imports.append(f"import {full}" if full == name else f"import {full} as {name}")
        elif _importable_object(value):
            qual = value.__qualname__
            imports.append(
                f"from {value.__module__} import {qual}" + ("" if qual == name else f" as {name}")
            )
        elif inspect.isfunction(value) or inspect.isclass(value):
            if id(value) in seen:
                continue
            seen.add(id(value))
            try:
                text = textwrap.dedent(inspect.getsource(value))
            except (OSError, TypeError):
                blocks.append(f"# tcompile could not carry {name} (no source)")
                continue
            inner = reached(value, seen)
            if value.__name__ != name:
                text += f"\n{name} = {value.__name__}\n"
            blocks.append((inner + "\n\n" if inner else "") + text)
        elif _literal_ok(value, torch):
            blocks.append(f"{name} = {py_literal(value)}")
        else:
            blocks.append(f"# tcompile could not carry {name} ({type(value).__name__})")
    parts = sorted(set(imports)) + blocks
    return "\n".join(p.rstrip("\n") for p in parts) if parts else ""


def _importable_object(value: object) -> bool:
    """A function, class or wrapped function (an lru_cache) that an importable module
    defines under its own name: ``from module import name`` gives it back."""
    import importlib

    mod, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(qual, str) or "." in qual or "<" in qual:
        return False
    if not _importable(mod):
        return False
    try:
        return getattr(importlib.import_module(mod), qual) is value
    except Exception:
        return False


def _literal_ok(value: object, torch: ModuleType) -> bool:
    from ..literals import py_literal

    if isinstance(value, (torch.dtype, torch.device)):
        return True
    if not isinstance(value, (str, int, float, bool, complex, type(None), list, tuple, dict)):
        return False
    try:
        return eval(py_literal(value), {"torch": torch}) == value or value != value  # noqa: S307
    except Exception:
        return False


def set_config(key: str, value: object) -> None:
    """Set one config entry: ``functorch.x`` in functorch's config, anything else in
    inductor's (dotted keys reach nested configs: ``triton.cudagraphs``)."""
    if key.startswith("functorch."):
        import torch._functorch.config as functorch_config

        set_dotted(functorch_config, key.split(".", 1)[1], value)
        return
    import torch._inductor.config as inductor_config

    set_dotted(inductor_config, key, value)


def apply_module_diffs(module_name: str, diffs: Mapping[str, object]) -> None:
    """Restore :func:`module_diffs` output; entries this torch does not have are skipped."""
    mod = importlib.import_module(module_name)
    for key, value in (diffs or {}).items():
        try:
            set_dotted(mod, key, value)
        except Exception:
            pass


def apply_config(config: dict[str, Any], namespace: dict[str, Any]) -> None:
    """Set inductor config entries from :func:`config_diffs` output (functions are
    defined from their source in ``namespace``)."""
    for key, value in config.items():
        if key == "decompositions":
            import torch
            import torch._inductor.decomposition as inductor_decomp

            for op_name, fn in value.items():
                if fn.get("source"):
                    exec(compile(fn["source"], f"<decomposition {op_name}>", "exec"), namespace)  # noqa: S102
                    op = eval("torch.ops." + op_name, {"torch": torch})  # noqa: S307
                    inductor_decomp.decompositions[op] = namespace[fn["function"]]
            continue
        if key == "decomposition_table":
            _apply_table(value, namespace)
            continue
        if key == "select_algorithm":
            _apply_select_algorithm(value, namespace)
            continue
        if isinstance(value, dict) and "object" in value:
            value = _restore_object(value, namespace)
            if value is None:
                continue
        if isinstance(value, dict) and "function" in value:
            if not value.get("source"):
                continue
            exec(compile(value["source"], f"<config {key}>", "exec"), namespace)  # noqa: S102
            value = namespace[value["function"]]
        set_config(key, value)


def _restore_object(spec: dict[str, Any], namespace: dict[str, Any]) -> object:
    if not spec.get("source"):
        return None
    for line in spec.get("bases") or []:
        exec(line, namespace)  # noqa: S102
    exec(compile(spec["source"], f"<class {spec['object']}>", "exec"), namespace)  # noqa: S102
    cls = namespace[spec["object"]]
    obj = cls.__new__(cls)
    obj.__dict__.update(spec.get("state") or {})
    return obj


def _apply_table(table: dict[str, Any], namespace: dict[str, Any]) -> None:
    import torch
    import torch._inductor.compile_fx as compile_fx

    original = compile_fx.select_decomp_table
    entries = {}
    for op_name, fn in (table.get("changed") or {}).items():
        if fn.get("source"):
            exec(compile(fn["source"], f"<decomposition {op_name}>", "exec"), namespace)  # noqa: S102
            entries[eval("torch.ops." + op_name, {"torch": torch})] = namespace[fn["function"]]  # noqa: S307
    removed = [eval("torch.ops." + n, {"torch": torch}) for n in table.get("removed") or []]  # noqa: S307

    def program_table() -> dict[OpOverload | OpOverloadPacket, Callable[..., object]]:
        out = dict(original())
        out.update(entries)
        for op in removed:
            out.pop(op, None)
        return out

    compile_fx.select_decomp_table = program_table

"""The compiler configuration in force inside the program, as data a repro or a record
can restate (compiler/configs.py writes it back as Python), and applying it again."""

from __future__ import annotations

import importlib
import inspect
import textwrap
from typing import Any

from ..configs import set_dotted


def module_diffs(module_name: str, *, plain_only: bool = False) -> dict[str, Any]:
    """Entries of a torch config module (``torch._inductor.config``,
    ``torch._dynamo.config``) whose value differs from torch's default.  Cache
    settings are left out: tcompile turns caches off itself, and they never make a bug.

    With ``plain_only``, values that are plain data are kept as they are and a
    function (a custom pass) as ``{"function": name, "source": ...}``; anything else
    is dropped."""
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
        if same:
            continue
        if not plain_only:
            out[key] = value
        elif isinstance(value, (str, int, float, bool, type(None))) or _plain_container(value):
            out[key] = value
        elif callable(value) and not inspect.isroutine(value) and not isinstance(value, type):
            out[key] = object_of(value)  # a pass object (a CustomGraphPass)
        elif callable(value):
            out[key] = {"function": getattr(value, "__name__", "fn"), "source": source_of(value)}
    return out


def object_of(value: Any) -> dict[str, Any]:
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


def decomposition_table_diffs() -> dict[str, Any]:
    """When the program patched the table inductor uses (``select_decomp_table``): the
    entries that differ from torch's own table (the program's functions, with their
    source) and the ones it removed."""
    import torch._inductor.compile_fx as compile_fx
    import torch._inductor.decomposition as inductor_decomp

    used_fn = compile_fx.select_decomp_table
    if used_fn is inductor_decomp.select_decomp_table:
        return {}
    used, own = used_fn(), inductor_decomp.select_decomp_table()
    changed = {
        str(op): {"function": getattr(fn, "__name__", "fn"), "source": source_of(fn)}
        for op, fn in used.items()
        if own.get(op) is not fn and not (getattr(fn, "__module__", "") or "").startswith("torch")
    }
    removed = sorted(str(op) for op in own if op not in used)
    return {"changed": changed, "removed": removed} if changed or removed else {}


def config_diffs() -> dict[str, Any]:
    """inductor config entries that differ from torch's defaults, plus the entries the
    program put in inductor's decomposition table (``"decompositions"``)."""
    out = module_diffs("torch._inductor.config", plain_only=True)
    decomps = user_decompositions()
    if decomps:
        out["decompositions"] = decomps
    table = decomposition_table_diffs()
    if table:
        out["decomposition_table"] = table
    return out


def user_decompositions() -> dict[str, Any]:
    """Entries of inductor's decomposition table that the program itself put there
    (functions not defined in torch): op name -> {"function", "source"}."""
    import torch._inductor.decomposition as inductor_decomp

    out: dict[str, Any] = {}
    for op, fn in list(inductor_decomp.decompositions.items()):
        mod = getattr(fn, "__module__", None) or ""
        if not inspect.isfunction(fn) or not mod or mod.startswith("torch"):
            continue
        out[str(op)] = {"function": getattr(fn, "__name__", "fn"), "source": source_of(fn)}
    return out


def _plain_container(v: Any) -> bool:
    """Plain data at any depth (lists, tuples, dicts with str keys, scalars): what a repro
    can restate with ``repr`` -- e.g. ``post_grad_fusion_options={"pass": {}}``."""
    if isinstance(v, (str, int, float, bool, type(None))):
        return True
    if isinstance(v, (list, tuple)):
        return all(_plain_container(x) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _plain_container(x) for k, x in v.items())
    return False


def source_of(obj: Any) -> str | None:
    """Source of a top-level function of the user's program (a backend, a pass)."""
    if isinstance(obj, str) or not callable(obj):
        return None
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return None


def set_config(key: str, value: Any) -> None:
    """Set one config entry: ``functorch.x`` in functorch's config, anything else in
    inductor's (dotted keys reach nested configs: ``triton.cudagraphs``)."""
    if key.startswith("functorch."):
        import torch._functorch.config as functorch_config

        set_dotted(functorch_config, key.split(".", 1)[1], value)
        return
    import torch._inductor.config as inductor_config

    set_dotted(inductor_config, key, value)


def apply_module_diffs(module_name: str, diffs: dict[str, Any]) -> None:
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


def _restore_object(spec: dict[str, Any], namespace: dict[str, Any]) -> Any:
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

    def program_table() -> Any:
        out = dict(original())
        out.update(entries)
        for op in removed:
            out.pop(op, None)
        return out

    compile_fx.select_decomp_table = program_table

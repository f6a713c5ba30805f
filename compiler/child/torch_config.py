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
        elif callable(value):
            out[key] = {"function": getattr(value, "__name__", "fn"), "source": source_of(value)}
    return out


def config_diffs() -> dict[str, Any]:
    """inductor config entries that differ from torch's defaults, plus the entries the
    program put in inductor's decomposition table (``"decompositions"``)."""
    out = module_diffs("torch._inductor.config", plain_only=True)
    decomps = user_decompositions()
    if decomps:
        out["decompositions"] = decomps
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
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, (str, int, float, bool, type(None))) for x in v)
    if isinstance(v, dict):
        return all(
            isinstance(k, str) and isinstance(x, (str, int, float, bool, type(None)))
            for k, x in v.items()
        )
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
        if isinstance(value, dict) and "function" in value:
            if not value.get("source"):
                continue
            exec(compile(value["source"], f"<config {key}>", "exec"), namespace)  # noqa: S102
            value = namespace[value["function"]]
        set_config(key, value)

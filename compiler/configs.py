"""The compiler configuration in force, as data a repro can restate."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any


def config_diffs() -> dict[str, Any]:
    """inductor config entries whose value differs from torch's default.

    Values that are plain data are kept as they are; a function (a custom pass) is
    kept as ``{"function": name, "source": ...}`` when its source can be found."""
    import torch._inductor.config as inductor_config

    out: dict[str, Any] = {}
    current = inductor_config.get_config_copy()
    for key, entry in inductor_config._config.items():  # noqa: SLF001
        if key not in current or "cache" in key:
            continue  # tcompile turns caches off itself; they never make a bug
        value = current[key]
        try:
            same = value == entry.default
        except Exception:
            same = False
        if same:
            continue
        if isinstance(value, (str, int, float, bool, type(None))) or _plain_container(value):
            out[key] = value
        elif callable(value):
            src = source_of(value)
            out[key] = {"function": getattr(value, "__name__", "fn"), "source": src}
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


def apply_config(config: dict[str, Any], namespace: dict[str, Any]) -> None:
    """Set inductor config entries from :func:`config_diffs` output (functions are
    defined from their source in ``namespace``)."""
    import torch._inductor.config as inductor_config

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
        obj: Any = inductor_config
        parts = key.split(".")
        for part in parts[:-1]:
            obj = getattr(obj, part)
        setattr(obj, parts[-1], value)


# how a repro.py compiles an AOT-level graph: as inductor compiles the graphs AOTAutograd
# hands it (torch's own after-aot repros do the same)
AOT_COMPILE_SOURCE = "from torch._inductor.compile_fx import compile_fx_inner"


def config_source(config: dict[str, Any]) -> tuple[str, str]:
    """Python lines restating :func:`config_diffs` output in a repro (and the source of
    the functions they need, to be placed before them)."""
    lines = ["import torch._inductor.config as inductor_config"] if config else []
    extra: list[str] = []
    for key, value in sorted(config.items()):
        if key == "decompositions":  # the program's own entries in inductor's table
            for op_name, fn in sorted(value.items()):
                if not fn.get("source"):
                    lines.append(
                        f"# decomposition of {op_name}: <function {fn['function']}> (source not available)"
                    )
                    continue
                extra.append(fn["source"])
                lines.append("import torch._inductor.decomposition as inductor_decomp")
                lines.append(
                    f"inductor_decomp.decompositions[torch.ops.{op_name}] = {fn['function']}"
                )
            continue
        if isinstance(value, dict) and "function" in value:
            if not value.get("source"):
                lines.append(f"# {key} = <function {value['function']}> (source not available)")
                continue
            extra.append(value["source"])
            lines.append(f"inductor_config.{key} = {value['function']}")
        else:
            lines.append(f"inductor_config.{key} = {value!r}")
    if extra:
        # functions are defined after the module-level names they commonly use
        pre = "aten = torch.ops.aten\n\n"
        return "\n".join(lines[:1]), pre + "\n\n".join(extra) + "\n\n" + "\n".join(lines[1:])
    return "\n".join(lines) + ("\n" if lines else ""), ""

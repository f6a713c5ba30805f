"""Inductor's bisection hook points, driven by tcompile's own state.

torch calls ``CompilerBisector.disable_subsystem(backend, subsystem, debug_info)`` at
each application of a pass, a decomposition or a lowering (see
torch/_inductor/compiler_bisector.py).  In a bisection run tcompile replaces that one
function: each subsystem's applications are counted (with their description: the
op or pass name) and the first ``limits[subsystem]`` of them are enabled, the rest
disabled.  The state comes from the hook config (JSON), not from torch's
``key=value`` files read back with ``eval``; several subsystems can be limited in one
run, which lets the parent search one flat ordered list with a single binary search.

``TOGGLES`` are the config changes torch's bisector tries ("does turning this off fix
it?"), per stage.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

# the order things happen in, per stage; toggles first (see bisect.py)
SUBSYSTEMS: dict[str, list[str]] = {
    "aot_eager_decomp_partition": ["decomposition"],
    "inductor": [
        "pre_grad_passes",
        "joint_graph_passes",
        "post_grad_passes",
        "cudagraphs",
        "lowerings",
    ],
}
TOGGLES: dict[str, dict[str, Any]] = {
    "aot_eager_decomp_partition": {"functorch.cse": False},
    "inductor": {
        "fallback_random": True,
        "emulate_precision_casts": True,
        "layout_optimization": False,
        "comprehensive_padding": False,
    },
}


class Counter:
    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = limits
        self.seen: dict[str, list[str]] = defaultdict(list)

    def disable(self, backend: str, subsystem: str, debug_info: Any = None) -> bool:
        apps = self.seen[subsystem]
        index = len(apps)
        try:
            apps.append(str(debug_info()) if callable(debug_info) else "")
        except Exception:
            apps.append("")
        limit = self.limits.get(subsystem)
        return limit is not None and index >= limit

    def snapshot(self) -> dict[str, list[str]]:
        return {k: list(v)[:5000] for k, v in self.seen.items()}


_counter: Counter | None = None


def install(bisect: dict[str, Any]) -> Counter:
    """Take over CompilerBisector.disable_subsystem for this process."""
    global _counter
    from torch._inductor.compiler_bisector import CompilerBisector

    _counter = Counter({k: int(v) for k, v in (bisect.get("limits") or {}).items()})
    counter = _counter

    def disable_subsystem(cls: Any, backend: str, subsystem: str, debug_info: Any = None) -> bool:
        return counter.disable(backend, subsystem, debug_info)

    CompilerBisector.disable_subsystem = classmethod(disable_subsystem)  # type: ignore[method-assign]
    for key, value in (bisect.get("toggles") or {}).items():
        apply_toggle(key, value)
    return counter


def apply_toggle(key: str, value: Any) -> None:
    if key.startswith("functorch."):
        import torch._functorch.config as functorch_config

        setattr(functorch_config, key.split(".", 1)[1], value)
        return
    import torch._inductor.config as inductor_config

    obj: Any = inductor_config
    parts = key.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    setattr(obj, parts[-1], value)


def counter() -> Counter | None:
    return _counter

"""The float64 reference (DESIGN.md mechanism 8): the graph computed in float64, the
yardstick against which compiled and eager results are both measured.

Under an outer ``torch.autocast`` the reference follows the program's precision policy
(:func:`autocast_roundings`): the values autocast makes lower-precision are rounded as
autocast rounds them, and everything else is float64.  Part of the contract both
processes share; torch is imported when a function runs (the long repro.py carries
:func:`to_float64`'s source).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .accuracy import Outcome, RngState, flatten, run_with_grads

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import torch

    from .snapshot import Snapshot


def to_float64(
    gm: torch.nn.Module, roundings: Mapping[str, torch.dtype] | None = None
) -> Callable[..., object]:
    """The float64 reference of a graph: parameters and buffers in float64, and every
    floating value the graph makes (a factory call, a cast to bf16) taken to float64
    too, so that a graph that creates its own tensors computes in float64 throughout.

    ``roundings`` (node name -> dtype): values the program's precision policy rounds
    (autocast's lower-precision ops, see :func:`autocast_roundings`) are rounded to
    that dtype in the reference too, so that the reference is the program's policy
    computed exactly, and an op that autocast left in float32 (an ``enabled=False``
    region) is judged against float64, not drowned in the policy's rounding."""
    import copy

    import torch

    g = copy.deepcopy(gm).to(torch.float64)
    if not isinstance(g, torch.fx.GraphModule):
        return g

    def up(value: object) -> object:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(torch.float64)
        if isinstance(value, (list, tuple)):
            return type(value)(up(v) for v in value)
        return value

    rounded = roundings or {}

    def rounding(dtype: torch.dtype) -> Callable[[Any], Any]:
        def r(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                return value.to(dtype).to(torch.float64)
            if isinstance(value, (list, tuple)):
                return type(value)(r(v) for v in value)
            return value

        return r

    class Float64(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> object:
            if n.name not in rounded:
                return up(super().run_node(n))
            # as autocast runs the op: its inputs cast down, its result in that dtype
            r = rounding(rounded[n.name])
            with self._set_current_node(n):
                args, kwargs = self.fetch_args_kwargs_from_env(n)
                args, kwargs = r(args), {k: r(v) for k, v in kwargs.items()}
                return r(up(getattr(self, n.op)(n.target, args, kwargs)))

    def run(*args: object) -> object:
        return Float64(g).run(*args)

    return run


def autocast_roundings(
    gm: torch.nn.Module,
    inputs: Sequence[object] | Snapshot,
    forward_context: Callable[[], AbstractContextManager[object]],
) -> dict[str, torch.dtype]:
    """Nodes of ``gm`` whose values the program's autocast makes lower-precision: the
    dtype of each node run in the call's ambient state, against the dtype it has with
    autocast off (the graph's own autocast regions kept).  Empty outside autocast."""
    import contextlib

    import torch

    from .snapshot import exact_copies

    if not isinstance(gm, torch.fx.GraphModule):
        return {}

    def dtypes(context: Callable[[], AbstractContextManager[object]]) -> dict[str, torch.dtype]:
        seen: dict[str, torch.dtype] = {}

        class Record(torch.fx.Interpreter):
            def run_node(self, n: torch.fx.Node) -> object:
                value = super().run_node(n)
                if isinstance(value, torch.Tensor) and value.is_floating_point():
                    seen[n.name] = value.dtype
                return value

        with torch.no_grad(), context():
            Record(gm).run(*exact_copies(inputs))
        return seen

    def off() -> AbstractContextManager[object]:
        stack = contextlib.ExitStack()
        for dev in ("cpu", "cuda"):
            stack.enter_context(torch.autocast(dev, enabled=False))
        return stack

    on = dtypes(forward_context)
    plain = dtypes(off)
    return {
        name: d for name, d in on.items() if name in plain and d.itemsize < plain[name].itemsize
    }


def float64_outcome(
    model: torch.nn.Module,
    inputs: Sequence[object] | Snapshot,
    rng: RngState | None = None,
    *,
    grads: bool = True,
    tangents: Sequence[Any] | None = None,
    forward_context: Callable[[], AbstractContextManager[object]] | None = None,
    roundings: Mapping[str, torch.dtype] | None = None,
) -> Outcome | None:
    """The float64 reference of ``model`` on ``inputs`` (None where it cannot run in
    float64: integer-only ops, a dtype-specific kernel); ``roundings``: see
    :func:`to_float64`."""
    import torch

    try:
        if grads or tangents is not None:
            return run_with_grads(
                to_float64(model, roundings),
                inputs,
                dtype=torch.float64,
                tangents=tangents,
                forward_context=forward_context,
            )
        from .snapshot import exact_copies

        args = exact_copies(inputs, torch.float64)
        return Outcome(flatten(to_float64(model, roundings)(*args)), [])
    except Exception:
        return None
    finally:
        if rng is not None:
            rng.restore()

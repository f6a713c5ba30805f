"""Exact copies of the values a compiled graph is called with (DESIGN.md mechanism 11).

A check must not change what it checks.  The reference a compiled call is judged
against runs on copies of the call's inputs, and those copies must be the inputs the
program had, not merely equal values: same shape, strides, storage offset (and the
alignment of the first element), dtype, device and requires_grad, and inputs that shared
memory (a tensor and a view of it) share it in every copy.  ``clone()`` keeps none of
that for a non-dense view (``x[:, ::2]``, ``x.t()[1:]``), and a graph that updates such
an input in place takes another code path in inductor (the copy back into a strided
input) than one given a contiguous copy: the check would judge another program.

:class:`Snapshot` copies, for each storage the inputs use, the bytes they span (from a
64-byte boundary, so alignment is kept) and rebuilds every tensor over a fresh copy
of those bytes with ``set_`` (a plain tensor, not a view, so a graph may update it in
place).  An input that required grad becomes a non-leaf with the exact layout, made
from a leaf by an identity function: gradients are taken for the leaf, i.e. for the
input's value before the call, as autograd takes them in the program.

Tensors that have no plain storage (subclasses, sparse, meta) are cloned as before.
Part of the contract both processes share: torch is imported when a function runs,
and the functions are self-contained (the long repro.py carries their source).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch
    from torch.autograd.function import FunctionCtx


def plain_tensor(x: torch.Tensor) -> bool:
    """A dense tensor with its own storage (what :class:`Snapshot` copies exactly)."""
    import torch

    return (
        type(x) in (torch.Tensor, torch.nn.Parameter)
        and x.layout == torch.strided
        and x.device.type != "meta"
        and not x.is_quantized
    )


def as_input(leaf: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """``exact`` (same values as ``leaf``, the program's layout) as a non-leaf whose
    gradient flows to ``leaf``."""
    import torch

    class AsInput(torch.autograd.Function):
        @staticmethod
        def forward(ctx: FunctionCtx, leaf: torch.Tensor, box: list[torch.Tensor]) -> torch.Tensor:
            return box[0]

        @staticmethod
        def backward(ctx: FunctionCtx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
            return grad, None

    return AsInput.apply(leaf, [exact])


class Snapshot:
    """Exact copies of ``values``, taken now (before the call that may update them)."""

    ALIGN = 64  # bytes: the copy starts where the original's alignment is kept

    def __init__(self, values: Sequence[object], reuse: Snapshot | None = None) -> None:
        """``reuse``: the snapshot of the same graph's previous call, given up for this
        one (postmortem.py keeps each graph's last call): a region of the same storage
        and span is copied into its memory, all such regions in one ``_foreach_copy_``,
        instead of a new clone each -- a training loop's parameters are copied every step
        (about 300 us a call for a small MLP's 7 inputs in separate clones, 20 us so)."""
        import torch

        self.items: list[tuple[str, Any]] = []  # ("exact", meta) | ("clone", t) | ("value", v)
        # storage (its device and address) -> (its bytes, first byte)
        self.regions: dict[tuple[str, int], tuple[torch.Tensor, int]] = {}
        # storage -> a view of the original's bytes, kept for the next call where the
        # same storage was seen the call before too (parameters; not each new batch)
        self.sources: dict[tuple[str, int], torch.Tensor] = {}
        spans: dict[tuple[str, int], list[int]] = {}
        with torch.no_grad():
            for x in values:
                if not isinstance(x, torch.Tensor):
                    self.items.append(("value", x))
                    continue
                if not plain_tensor(x):
                    y = x.detach().clone()
                    self.items.append(("clone", (y, x.requires_grad)))
                    continue
                size = x.element_size()
                start = x.storage_offset() * size
                extent = 1 + sum((n - 1) * abs(s) for n, s in zip(x.shape, x.stride()))
                end = start + (extent if x.numel() else 0) * size
                key = (str(x.device), x.untyped_storage().data_ptr())
                span = spans.setdefault(key, [start, end, x])
                span[0], span[1] = min(span[0], start), max(span[1], end)
                meta = (key, x.dtype, tuple(x.shape), tuple(x.stride()), start, x.requires_grad)
                self.items.append(("exact", meta))
            old_regions = reuse.regions if reuse is not None else {}
            old_sources = reuse.sources if reuse is not None else {}
            into, source = [], []
            for key, (start, end, x) in spans.items():
                first = start - start % self.ALIGN
                old, view = old_regions.get(key), old_sources.get(key)
                if (
                    view is not None
                    and old[1] == first
                    and old[0].numel() == end - first == view.numel()
                ):
                    # the same memory as the call before (the view keeps it alive, so no
                    # other storage can sit at that address): its bytes into the old copy
                    into.append(old[0])
                    source.append(view)
                    self.regions[key], self.sources[key] = old, view
                    continue
                raw = torch.empty((0,), dtype=torch.uint8, device=x.device)
                raw.set_(x.untyped_storage())
                self.regions[key] = (raw[first:end].clone(), first)
                if key in old_regions:  # seen the call before too: keep its view for the next
                    self.sources[key] = raw[first:end]
            if into:
                torch._foreach_copy_(into, source)

    def materialize(
        self, dtype: torch.dtype | None = None, grads: bool = True
    ) -> tuple[list[Any], list[torch.Tensor]]:
        """(values, leaves): fresh exact copies, floating tensors cast to ``dtype`` when
        given.  With ``grads``, a tensor that required grad is a non-leaf made from a
        leaf (listed in ``leaves``, in input order), so the graph may update it in place
        as it may an activation of the program."""
        import torch

        # (storage, dtype) -> a flat tensor over a fresh copy
        fresh: dict[tuple[object, ...], torch.Tensor] = {}
        out: list[Any] = []
        leaves: list[torch.Tensor] = []
        with torch.no_grad():
            for what, item in self.items:
                if what == "value":
                    out.append(item)
                    continue
                if what == "clone":
                    y, wants = item
                    y = y.clone()
                    if dtype is not None and y.is_floating_point():
                        y = y.to(dtype)
                    out.append(y)
                    if wants and grads and (y.is_floating_point() or y.is_complex()):
                        leaf = y.requires_grad_()
                        out[-1] = leaf.clone()
                        leaves.append(leaf)
                    continue
                key, xdtype, shape, stride, start, wants = item
                raw, first = self.regions[key]
                if (key, None) not in fresh:
                    fresh[(key, None)] = raw.clone()
                copy = fresh[(key, None)]
                size = torch.empty((), dtype=xdtype).element_size()
                cast = dtype if (dtype is not None and xdtype.is_floating_point) else xdtype
                if cast != xdtype:  # the same layout, in another dtype
                    if (key, cast, xdtype) not in fresh:
                        flat = torch.empty((0,), dtype=xdtype, device=copy.device)
                        flat.set_(copy.untyped_storage(), 0, (copy.numel() // size,), (1,))
                        fresh[(key, cast, xdtype)] = flat.to(cast)
                    copy = fresh[(key, cast, xdtype)]
                t = torch.empty((0,), dtype=cast, device=copy.device)
                t.set_(copy.untyped_storage(), (start - first) // size, shape, stride)
                out.append(t)
        if grads:
            for i, (what, item) in enumerate(self.items):
                if what != "exact" or not item[5]:
                    continue
                t = out[i]
                if not (t.is_floating_point() or t.is_complex()):
                    continue
                leaf = t.detach().clone().requires_grad_()
                out[i] = as_input(leaf, t)
                leaves.append(leaf)
        return out, leaves

    def values(self) -> list[Any]:
        """Fresh exact copies; those that required grad are leaves that require it."""
        out = self.materialize(grads=False)[0]
        for i in self.grad_inputs():
            out[i].requires_grad_(True)
        return out

    def grad_inputs(self) -> list[int]:
        """Indices of the values that required grad (floating or complex tensors)."""
        import torch

        out = []
        for i, (what, item) in enumerate(self.items):
            if what == "exact" and item[5] and (item[1].is_floating_point or item[1].is_complex):
                out.append(i)
            elif what == "clone" and item[1]:
                y = item[0]
                if isinstance(y, torch.Tensor) and (y.is_floating_point() or y.is_complex()):
                    out.append(i)
        return out


def exact_copies(
    values: Sequence[object] | Snapshot, dtype: torch.dtype | None = None
) -> list[Any]:
    """Exact copies of ``values`` (a list, or a Snapshot taken earlier), no gradients."""
    snap = values if isinstance(values, Snapshot) else Snapshot(values)
    return snap.materialize(dtype, grads=False)[0]


def changed(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether a call changed a tensor: any element differs bit for bit (NaN == NaN)."""
    import torch

    if before.shape != after.shape or before.dtype != after.dtype:
        return True
    a, b = before.detach(), after.detach().to(before.device)
    if a.is_floating_point() or a.is_complex():
        same = (a == b) | (a.isnan() & b.isnan())
        # -0.0 == 0.0: a write of another zero is a change too
        if a.is_floating_point():
            same &= torch.signbit(a) == torch.signbit(b)
        return not bool(same.all())
    return not torch.equal(a, b)

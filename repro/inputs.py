"""A repro's inputs as data, and the one piece of source that makes them.

An :class:`InputSpec` says how to make one input: its shape, layout (contiguous,
channels-last, a permutation of a contiguous tensor, or explicit strides), dtype,
device, requires_grad, and its values: seeded random numbers (``randn``, or
``randint`` within the range the real values had, so that indices stay valid), the
real values inline, or a sidecar file.  :func:`make_inputs_source` writes the
``make_inputs()`` function of repro.py from the specs, and :func:`build` runs that
same source: the tensors the minifier's oracle judges while shrinking inputs are made
by exactly the code the repro carries.

Non-tensor inputs (SymInts of a dynamic-shape graph, Python numbers) are kept as
literals, or, when they equal a tensor's size, written as that size
(``x.shape[0]``), so that shrinking the tensor shrinks them too.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from tcompile.compiler.literals import py_literal, tensor_literal

if TYPE_CHECKING:
    import torch

INLINE_LIMIT = 64  # elements: larger real values go to a sidecar file


@dataclasses.dataclass(frozen=True)
class InputSpec:
    kind: str  # "tensor" | "size" (a SymInt: the size of another input) | "literal"
    shape: tuple[int, ...] = ()
    layout: str = "contiguous"  # contiguous | channels_last | channels_last_3d | permute | strided
    order: tuple[int, ...] = ()  # permute: the dims from outermost to innermost
    stride: tuple[int, ...] = ()  # strided: explicit strides
    offset: int = 0  # strided: the storage offset (the first element's place, alignment)
    dtype: str = "torch.float32"
    device: str = "cpu"
    requires_grad: bool = False
    fill: str = "randn"  # randn | randint | values | sidecar
    low: int = 0  # randint: the range the real values had
    high: int = 16
    values: Any = None  # values: a nested list; literal: the value; size: (input, dim)

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.kind == "tensor" else 0

    def with_shape(self, shape: tuple[int, ...]) -> InputSpec:
        """The same input with another shape (the layout pattern kept)."""
        stride = self.stride
        if self.layout == "strided":
            stride = _contiguous(shape)  # no pattern to keep: plain
        return dataclasses.replace(
            self,
            shape=tuple(shape),
            stride=stride,
            layout="contiguous" if self.layout == "strided" else self.layout,
            offset=0,
        )


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(out))


def layout_of(x: torch.Tensor) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """(layout, order, stride) of a tensor: the pattern a smaller tensor can keep.  A
    tensor that does not start its storage is "strided" (its offset is kept)."""
    import torch

    shape, stride = tuple(x.shape), tuple(x.stride())
    if x.storage_offset() and x.numel() > 1:
        return "strided", (), stride
    if x.is_contiguous() or x.numel() <= 1:
        return "contiguous", (), ()
    if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last):
        return "channels_last", (), ()
    if x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d):
        return "channels_last_3d", (), ()
    order = tuple(sorted(range(len(shape)), key=lambda d: (-stride[d], d)))
    if _contiguous(tuple(shape[d] for d in order)) == tuple(stride[d] for d in order):
        return "permute", order, ()
    return "strided", (), stride


def spec_of(x: object, inputs: list[object] | None = None, index: int = 0) -> InputSpec:
    """The spec of a real input: seeded random values of the same kind."""
    import torch

    if not isinstance(x, torch.Tensor):
        if isinstance(x, int) and not isinstance(x, bool) and inputs is not None:
            for i, other in enumerate(inputs):  # a SymInt: the size of some tensor input
                if isinstance(other, torch.Tensor) and x > 1 and x in tuple(other.shape):
                    return InputSpec("size", values=(i, tuple(other.shape).index(x)))
        return InputSpec("literal", values=x)
    layout, order, stride = layout_of(x)
    dtype = str(x.dtype)
    fill, low, high = "randn", 0, 16
    if x.dtype == torch.bool:
        fill, low, high = "randint", 0, 2
    elif not (x.is_floating_point() or x.is_complex()):
        fill = "randint"
        if x.numel():
            low, high = int(x.min()), int(x.max()) + 1
    return InputSpec(
        "tensor",
        shape=tuple(x.shape),
        layout=layout,
        order=order,
        stride=stride,
        offset=x.storage_offset() if layout == "strided" else 0,
        dtype=dtype,
        device=str(x.device),
        requires_grad=bool(x.requires_grad),
        fill=fill,
        low=low,
        high=high,
    )


def _extent(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements of memory a strided view spans."""
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if all(shape) else 0


def real_values(spec: InputSpec, x: torch.Tensor) -> torch.Tensor:
    """The values to keep for ``x``: its elements, or for a strided view (overlapping,
    expanded) the memory under it, so that values and strides both survive."""
    x = x.detach().cpu()
    if spec.layout == "strided":
        return x.as_strided((_extent(spec.shape, spec.stride),), (1,))
    return x.contiguous()


def with_values(spec: InputSpec, x: torch.Tensor, sidecar_index: int | None = None) -> InputSpec:
    """The spec filled with the real values of ``x`` (inline, or from the sidecar)."""
    if sidecar_index is not None:
        return dataclasses.replace(spec, fill="sidecar", values=sidecar_index)
    return dataclasses.replace(spec, fill="values", values=tensor_literal(real_values(spec, x)))


def _values_expr(spec: InputSpec, shape: tuple[int, ...]) -> str:
    """An expression for a contiguous tensor of ``shape`` with the spec's values."""
    dtype = spec.dtype
    if spec.fill == "values":  # a literal, bit for bit (literals.py)
        if isinstance(spec.values, str):
            return spec.values
        return f"torch.tensor({py_literal(spec.values)}, dtype={dtype})"
    if spec.fill == "sidecar":
        return f"SIDECAR[{spec.values}]"
    if spec.fill == "randint":
        expr = f"torch.randint({spec.low}, {spec.high}, {shape!r}, generator=g)"
        return expr + (".bool()" if dtype == "torch.bool" else f".to({dtype})")
    if dtype in ("torch.float32",):
        return f"torch.randn({shape!r}, generator=g)"
    return f"torch.randn({shape!r}, generator=g, dtype=torch.float64).to({dtype})"


def tensor_expr(spec: InputSpec) -> str:
    """Source that makes one tensor input (uses a generator ``g``)."""
    shape = spec.shape
    real = spec.fill in ("values", "sidecar")
    if spec.layout == "permute":
        inner = tuple(shape[d] for d in spec.order)
        back = tuple(spec.order.index(d) for d in range(len(shape)))
        if real:  # the real values, laid out as the program had them
            expr = f"{_values_expr(spec, shape)}.reshape({shape!r})"
            expr += f".permute{spec.order!r}.contiguous().permute{back!r}"
        else:
            expr = f"{_values_expr(spec, inner)}.permute{back!r}"
    elif spec.layout == "strided":  # the memory under the view (real: as it was), viewed
        n, off = _extent(shape, spec.stride), spec.offset
        if real:
            flat = _values_expr(dataclasses.replace(spec, shape=(n,)), (n,))
            if off:  # what lies before the view: zeros
                flat = f"torch.cat([torch.zeros({off}, dtype={spec.dtype}), {flat}])"
        else:
            flat = _values_expr(dataclasses.replace(spec, shape=(n + off,)), (n + off,))
        expr = f"{flat}.as_strided({shape!r}, {spec.stride!r}{f', {off}' if off else ''})"
    else:
        expr = _values_expr(spec, shape)
        if real:
            expr += f".reshape({shape!r})"
        if spec.layout in ("channels_last", "channels_last_3d"):
            expr += f".contiguous(memory_format=torch.{spec.layout})"
    if spec.device != "cpu":
        expr += f".to({spec.device!r})"
    if spec.requires_grad:
        expr += ".requires_grad_()"
    return expr


def make_inputs_source(specs: list[InputSpec]) -> str:
    """``def make_inputs(): ...`` for repro.py, naming each tensor so that the sizes of
    a dynamic-shape graph can be written as the sizes of the tensors they measure."""
    lines = ["def make_inputs():"]
    if any(s.kind == "tensor" and s.fill in ("randn", "randint") for s in specs):
        lines.append("    g = torch.Generator().manual_seed(0)")
    items = []
    for i, spec in enumerate(specs):
        if spec.kind == "tensor":
            lines.append(f"    t{i} = {tensor_expr(spec)}")
            items.append(f"t{i}")
        elif spec.kind == "size":
            j, d = spec.values
            items.append(f"t{j}.shape[{d}]")
        else:
            items.append(py_literal(spec.values))
    lines.append(f"    return [{', '.join(items)}]")
    return "\n".join(lines) + "\n"


def compact_source(specs: list[InputSpec]) -> str:
    """The same function in fewer lines when every input is a plain expression."""
    if any(s.kind == "size" for s in specs):
        return make_inputs_source(specs)
    exprs = [tensor_expr(s) if s.kind == "tensor" else py_literal(s.values) for s in specs]
    head = ["def make_inputs():"]
    if any(s.kind == "tensor" and s.fill in ("randn", "randint") for s in specs):
        head.append("    g = torch.Generator().manual_seed(0)")
    body = "    return [" + ", ".join(exprs) + "]"
    if len(body) > 96:
        body = "    return [\n" + "".join(f"        {e},\n" for e in exprs) + "    ]"
    return "\n".join([*head, body]) + "\n"


def build(specs: list[InputSpec], sidecar: list[torch.Tensor] | None = None) -> list[object]:
    """The inputs, made by running the very source repro.py will carry."""
    import torch

    namespace: dict[str, Any] = {"torch": torch, "SIDECAR": sidecar or []}
    exec(compile(compact_source(specs), "<make_inputs>", "exec"), namespace)  # noqa: S102
    return namespace["make_inputs"]()


def total_numel(specs: list[InputSpec]) -> int:
    return sum(s.numel for s in specs)

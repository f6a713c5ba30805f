"""Values written into repro.py as source, bit for bit.

``repr`` of a Python float round-trips every finite float64 (so every float32, float16
and bfloat16 value, subnormals and -0.0 included), but not infinities and NaNs: a
literal ``[inf, nan]`` raises NameError in a fresh interpreter.  :func:`py_literal`
writes those as ``float('inf')`` / ``float('nan')``.  A NaN also has a sign and a
payload that no float literal carries: :func:`tensor_literal` checks its own output
(parsed back, compared bit for bit) and, when it does not round-trip, writes the
tensor's bits as integers viewed in its dtype.  Integers (int64's and uint64's
extremes included) and bools are exact as they are.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# float dtype -> the integer dtype of the same width (a bit-exact view)
_BITS = {
    "torch.float64": "torch.int64",
    "torch.float32": "torch.int32",
    "torch.float16": "torch.int16",
    "torch.bfloat16": "torch.int16",
}


def py_literal(value: object) -> str:
    """Source for a Python value (nested lists, tuples, dicts of numbers, strings, ...)
    that evaluates to it in a fresh interpreter with only ``torch`` imported."""
    if isinstance(value, float):
        if math.isnan(value):
            return "-float('nan')" if math.copysign(1.0, value) < 0 else "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        return repr(value)
    if isinstance(value, complex):
        return f"complex({py_literal(value.real)}, {py_literal(value.imag)})"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(py_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _plain(t: torch.Tensor) -> str:
    """``torch.tensor(<values>, dtype=...)`` for a CPU tensor (complex as its pairs)."""
    import torch

    dtype = str(t.dtype)
    if t.is_complex():
        return f"torch.view_as_complex({_plain(torch.view_as_real(t).contiguous())})"
    return f"torch.tensor({py_literal(t.tolist())}, dtype={dtype})"


def _bits(t: torch.Tensor) -> str:
    """The tensor's bits as integers, viewed in its dtype: exact for any value."""
    import torch

    if t.is_complex():
        return f"torch.view_as_complex({_bits(torch.view_as_real(t).contiguous())})"
    ints = _BITS[str(t.dtype)]
    raw = t.contiguous().view(getattr(torch, ints.split(".")[1]))
    return f"torch.tensor({raw.tolist()!r}, dtype={ints}).view({t.dtype})"


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality of two tensors (NaN payloads and -0.0 included)."""
    import torch

    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if str(a.dtype) in _BITS:
        ints = getattr(torch, _BITS[str(a.dtype)].split(".")[1])
        return torch.equal(a.view(ints), b.view(ints))
    return torch.equal(a, b)


def tensor_literal(t: torch.Tensor) -> str:
    """Source for a contiguous CPU tensor with exactly ``t``'s values (see the module)."""
    import torch

    t = t.detach().cpu().contiguous()
    text = _plain(t)
    if str(t.dtype) not in _BITS and not t.is_complex():
        return text  # integers and bools: exact as written
    try:
        back = eval(text, {"torch": torch})  # noqa: S307 -- our own literal
    except Exception:
        back = None
    if back is not None and same_bits(back.reshape(t.shape), t):
        return text
    return _bits(t)

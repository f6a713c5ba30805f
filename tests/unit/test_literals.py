"""Tensor literals and saved inputs round-trip every value bit for bit (issue 22.4):
written literal -> parsed in a namespace holding only torch -> compared on the bits."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tcompile.compiler.literals import py_literal, same_bits, tensor_literal
from tcompile.repro.inputs import build, spec_of, with_values

FLOATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
COMPLEX = [torch.complex64, torch.complex128]
BITS = {
    torch.float64: torch.int64,
    torch.float32: torch.int32,
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
}


def specials(dtype: torch.dtype) -> list[float]:
    fi = torch.finfo(dtype)
    return [
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        0.0,
        fi.tiny,
        fi.tiny / 4,
        -fi.tiny / 2,
        fi.max,
        -fi.max,
        fi.eps,
        1.0 / 3.0,
        fi.smallest_normal,
    ]


def odd_nans(dtype: torch.dtype) -> torch.Tensor:
    """NaNs with a sign and payloads no float literal carries."""
    ints = BITS[dtype]
    nan = torch.tensor([math.nan], dtype=dtype).view(ints)
    return torch.cat([nan | 1, nan | 3, -(torch.tensor([math.nan], dtype=dtype)).view(ints)]).view(
        dtype
    )


def parse(text: str) -> torch.Tensor:
    return eval(text, {"torch": torch})  # noqa: S307


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(FLOATS),
    picks=st.lists(st.integers(0, 12), min_size=1, max_size=20),
    noise=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=10),
)
def test_float_literals_round_trip(dtype, picks, noise):
    vals = [specials(dtype)[i] for i in picks] + noise
    t = torch.tensor(vals, dtype=torch.float64).to(dtype)
    back = parse(tensor_literal(t))
    assert same_bits(back.reshape(t.shape), t)


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_payloads_and_signs_round_trip(dtype):
    t = torch.cat([odd_nans(dtype), torch.tensor([-0.0, math.inf], dtype=dtype)])
    assert same_bits(parse(tensor_literal(t)), t)


@pytest.mark.parametrize("dtype", INTS + [torch.uint16, torch.uint32, torch.uint64, torch.bool])
def test_integer_extremes_round_trip(dtype):
    if dtype == torch.bool:
        t = torch.tensor([True, False, True])
    else:
        info = torch.iinfo(dtype)
        t = torch.tensor([info.min, info.max, 0, 1], dtype=dtype)
    assert same_bits(parse(tensor_literal(t)), t)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_round_trips(dtype):
    t = torch.tensor([complex(math.inf, -0.0), complex(math.nan, 1.0), 1 + 2j], dtype=dtype)
    assert same_bits(parse(tensor_literal(t)), t)


@settings(max_examples=25, deadline=None)
@given(
    dtype=st.sampled_from(FLOATS),
    picks=st.lists(st.integers(0, 12), min_size=2, max_size=12),
    strided=st.booleans(),
)
def test_repro_inputs_keep_every_bit(dtype, picks, strided):
    """make_inputs() of repro.py (the code inputs.build runs) gives the program's values."""
    vals = torch.tensor([specials(dtype)[i] for i in picks], dtype=torch.float64).to(dtype)
    x = vals.repeat(2).reshape(2, -1)
    if strided:
        x = x[:, ::2]
    spec = with_values(spec_of(x), x)
    (made,) = build([spec])
    assert made.stride() == x.stride()
    assert same_bits(made.contiguous(), x.contiguous())


@pytest.mark.parametrize(
    "value",
    [
        math.inf,
        -math.inf,
        math.nan,
        -0.0,
        5e-324,
        [1.0, math.inf, (math.nan, -0.0)],
        {"eps": math.inf},
    ],
)
def test_python_values_round_trip(value):
    back = eval(py_literal(value), {"torch": torch})  # noqa: S307
    assert repr(back) == repr(value)
    if isinstance(value, float):
        assert math.copysign(1, back) == math.copysign(1, value)


def test_repro_inputs_keep_storage_offset_and_strides():
    base = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    for x in (base[1:, ::3], base.t()[2:], base[2:4]):
        spec = with_values(spec_of(x), x)
        (made,) = build([spec])
        assert (made.stride(), made.storage_offset()) == (x.stride(), x.storage_offset())
        assert torch.equal(made, x)
        (rand,) = build([spec_of(x)])
        assert (rand.stride(), rand.storage_offset()) == (x.stride(), x.storage_offset())

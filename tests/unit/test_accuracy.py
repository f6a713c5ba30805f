import torch

from tcompile.compiler import accuracy
from tcompile.compiler.accuracy import Outcome, compare, compare_tensor, outcomes_identical


def test_exact_match_passes_both_modes():
    x = torch.randn(16)
    for strict in (False, True):
        assert compare_tensor(x, x.clone(), x.double(), strict=strict) is None


def test_off_by_one_fails():
    x = torch.randn(16)
    why = compare_tensor(x, x + 1, x.double(), strict=False)
    assert why is not None and "RMSE" in why


def test_more_precise_than_eager_is_not_a_bug():
    # half-precision eager rounds; a compiled kernel that computes in float32 and is
    # closer to the float64 truth must not be reported (DESIGN.md mechanism 8)
    truth = torch.linspace(0, 1, 1000, dtype=torch.float64) * 3.3
    eager = truth.half()
    precise = (truth.float() + 1e-4).half()  # a different rounding, close to truth
    assert compare_tensor(eager, precise, truth, strict=False) is None


def test_tiny_difference_strict_only():
    x = torch.randn(64)
    y = x * (1 + 1e-5)
    # loose: as far from float64 as eager is -> accepted; strict: any visible difference
    assert compare_tensor(x, y, (x.double() + y.double()) / 2, strict=False) is None
    assert compare_tensor(x, y, x.double(), strict=True) is not None
    # eager exact, compiled 1e-5 off: far beyond 3x eager's error plus 16 ulp -> flagged
    assert compare_tensor(x, y, x.double(), strict=False) is not None


def test_integer_and_nan_handling():
    a = torch.tensor([1, 2, 3])
    assert (
        compare_tensor(a, torch.tensor([1, 2, 4]), None, strict=False)
        == "1 of 3 torch.int64 elements differ"
    )
    f = torch.tensor([1.0, float("nan")])
    assert compare_tensor(f, f.clone(), f.double(), strict=False) is None
    assert compare_tensor(f, torch.tensor([1.0, 2.0]), f.double(), strict=False) is not None
    assert "shape" in compare_tensor(f, torch.ones(3), None, strict=False)


def test_run_with_grads_and_compare_gradients():
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(2, 4)

    def good(x, w):
        return (x @ w).tanh()

    def bad_grad(x, w):  # same forward, gradient scaled by 2 through a custom function
        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(ctx, t):
                return t.clone()

            @staticmethod
            def backward(ctx, g):
                return g * 2

        return Scale.apply((x @ w).tanh())

    ref = accuracy.run_with_grads(good, [x, w])
    fp64 = accuracy.run_with_grads(good, [x, w], dtype=torch.float64)
    assert w.grad is None  # clones only
    assert compare(ref, accuracy.run_with_grads(good, [x, w]), fp64, strict=False) is None
    mismatch = compare(ref, accuracy.run_with_grads(bad_grad, [x, w]), fp64, strict=False)
    assert mismatch is not None and mismatch.where.startswith("grad")


def test_nondeterminism_detected():
    a = Outcome([torch.ones(3)], [])
    b = Outcome([torch.tensor([1.0, 1.0, 1.5])], [])
    assert outcomes_identical(a, a)
    assert not outcomes_identical(a, b)


def test_half_kernel_that_does_not_overflow_where_eager_does_is_not_reported():
    """fp16 eager rounds x*1000*1000 to inf; a fused fp32 kernel does not, and agrees
    with float64: the compiled result is the better one."""
    torch.manual_seed(0)
    x = torch.randn(512).half()
    eager = (x * 1000) * 1000 / 1000 / 1000
    compiled = (x.float() * 1e6 / 1e6).half()
    fp64 = x.double()
    assert (~torch.isfinite(eager)).sum() > 100
    assert compare_tensor(eager, compiled, fp64, strict=False) is None
    # compared with eager directly (strict), the results differ
    assert compare_tensor(eager, compiled, fp64, strict=True) is not None
    # compiled non-finite where eager and float64 are finite: reported
    bad = compiled.clone()
    bad[torch.isfinite(eager).nonzero()[0]] = float("inf")
    assert "non-finite" in compare_tensor(eager, bad, fp64, strict=False)
    # finite where eager overflowed, but wrong: reported
    wrong = compiled.clone()
    wrong[~torch.isfinite(eager)] *= 2
    assert compare_tensor(eager, wrong, fp64, strict=False) is not None

"""The rule of child/tensor_hooks.py on real AOTAutograd outputs (aot_eager, no inductor):
a hook on a compiled graph's output is bypassed exactly when a gradient of an output
computed from it arrives inside the same compiled backward node."""

import types

import pytest
import torch
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

from tcompile.compiler.child.tensor_hooks import HookWatch


def _graph() -> torch.fx.GraphModule:
    def f(x):
        y = x * x
        return (y, y * 3, x + 1)  # output 1 is computed from output 0; output 2 is not

    return torch.fx.symbolic_trace(f)


class _Session:
    def __init__(self):
        self.failures = []

    def failure(self, **kw):
        self.failures.append(kw)


@pytest.fixture
def watch():
    original = torch.Tensor.register_hook
    session = _Session()
    w = HookWatch(session)
    yield w, session
    torch.Tensor.register_hook = original


def _call(compiled: bool, gm, x):
    if not compiled:
        return gm(x)

    def nop(g, _):
        return make_boxed_func(g.forward)

    fn = aot_module_simplified(gm, [x], fw_compiler=nop, bw_compiler=nop)
    return fn(x)


@pytest.mark.parametrize(
    ("compiled", "loss_of", "bypassed"),
    [
        (True, 1, True),  # z's gradient reaches x inside the compiled backward
        (True, 0, False),  # only y's own gradient: the hook sees what eager's sees
        (True, 2, False),  # an output not computed from y
        (False, 1, False),  # no compiled node: autograd passes through y's own node
    ],
)
def test_a_hook_is_bypassed_exactly_when_a_dependent_gradient_meets_it(
    watch, compiled, loss_of, bypassed
):
    w, session = watch
    gm = _graph()
    runner = types.SimpleNamespace(index=0, stage="aot_eager", reference=gm)
    x = torch.randn(3, requires_grad=True)
    out = _call(compiled, gm, x)
    w.ran(runner, out)
    out[0].register_hook(lambda g: None if g is None else g * 10)
    out[loss_of].sum().backward()
    assert bool(session.failures) == bypassed, session.failures
    if bypassed:
        f = session.failures[0]
        assert f["graph"] == 0 and f["kind"].value == "hook"
        assert "on output 0 of graph 0" in f["signature"].message
        assert "test_tensor_hooks.py" in f["signature"].frame
        # and the gradient indeed differs from eager's (the hook's x10 is lost)
        eager = 2 * x.detach() * 3 * 10
        assert not torch.allclose(x.grad, eager)

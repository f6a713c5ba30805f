"""Which graph a compile failure belongs to (issue 63 item 2): AOTAutograd's joint or
inference graph when it is raised after AOTAutograd got the Dynamo graph and before an
AOT-level compile began; the Dynamo graph before that.  Real AOTAutograd traces of a
two-node graph (no inductor compile), well under a second each."""

import pytest
import torch
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

from tcompile.compiler.child.build import aot_kind_of_failure


class Boom(RuntimeError):
    pass


def _gm() -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(lambda x, w: (torch.tanh(x @ w),))


def _raised(fn):
    try:
        fn()
    except Boom as exc:
        return exc
    raise AssertionError("the compile did not fail")


def _partition_fails(*args, **kwargs):
    raise Boom("the partitioner (or a joint-graph pass) crashed")


def _nop(gm, example_inputs):
    return make_boxed_func(gm.forward)


def _forward_fails(gm, example_inputs):
    raise Boom("the inference graph's pre-compile pass crashed")


@pytest.mark.parametrize("grad", [True, False])
def test_a_failure_inside_aot_names_the_joint_or_the_inference_graph(grad):
    x = torch.randn(4, 4)
    w = torch.randn(4, 4, requires_grad=grad)
    if grad:
        exc = _raised(
            lambda: aot_module_simplified(
                _gm(), [x, w], fw_compiler=_nop, bw_compiler=_nop, partition_fn=_partition_fails
            )
        )
    else:
        exc = _raised(lambda: aot_module_simplified(_gm(), [x, w], fw_compiler=_forward_fails))
    # wrapped as the backend wraps it: the kind is found through the chain
    try:
        raise RuntimeError("backend failed") from exc
    except RuntimeError as outer:
        assert aot_kind_of_failure(outer, [x, w]) == ("joint" if grad else "inference")


def test_a_failure_before_aot_is_the_dynamo_graphs():
    x = torch.randn(4, 4)

    def pre_grad_pass():
        raise Boom("a pre-grad pass crashed")

    assert aot_kind_of_failure(_raised(pre_grad_pass), [x]) == "dynamo"

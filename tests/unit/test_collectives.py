"""A graph's collectives replayed in one process (compiler/collectives.py, issue 37):
the fake process group answers from one rank's values alone; the recorded part the
other ranks contributed, added back, makes the graph compute the job's values.  Fast:
tiny FX graphs, a fake process group, no compiles."""

import pytest
import torch
import torch.distributed as dist

from tcompile.compiler.collectives import REPLAYED_PREFIX, has_collectives, record, replay
from tcompile.compiler.configs import fake_process_group

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="no torch.distributed")
funcol_ops = torch.ops._c10d_functional


def _graph(kind: str) -> torch.fx.GraphModule:
    """x -> collective -> wait -> relu, as Dynamo traces a functional collective."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    if kind == "all_reduce":
        c = g.call_function(funcol_ops.all_reduce.default, (x, "sum", "0"))
    elif kind == "reduce_scatter":
        c = g.call_function(funcol_ops.reduce_scatter_tensor.default, (x, "sum", 2, "0"))
    else:
        c = g.call_function(funcol_ops.all_gather_into_tensor.default, (x, 2, "0"))
    w = g.call_function(funcol_ops.wait_tensor.default, (c,))
    g.output((g.call_function(torch.relu, (w,)),))
    return torch.fx.GraphModule(torch.nn.Module(), g)


@pytest.mark.parametrize("kind", ["all_reduce", "all_gather", "reduce_scatter"])
def test_the_replayed_graph_computes_the_jobs_values(kind):
    """Rank 1 of 2: the job's collective returned ``job`` (rank 0's part included); in
    one process the fake group answers from rank 1's tensor alone."""
    x = torch.tensor([-3.0, 1.0, 2.0, 5.0])
    job = {
        "all_reduce": torch.tensor([4.0, -5.0, 6.0, 7.0]),
        "all_gather": torch.arange(-4.0, 4.0),
        "reduce_scatter": torch.tensor([-8.0, 9.0]),
    }[kind]
    with fake_process_group(1, 2):
        gm = _graph(kind)
        wait = next(n.name for n in gm.graph.nodes if "wait" in str(n.target))
        alone = gm(x.clone())[0]
        gm, inputs, added = replay(gm, [x], {wait: job})
        assert added == [f"{REPLAYED_PREFIX}0"] and len(inputs) == 2
        assert torch.equal(gm(*inputs)[0], torch.relu(job))  # the job's values, exactly
        assert not torch.equal(alone, torch.relu(job))  # which the fake group alone missed
        assert has_collectives(gm)  # the collective itself stays in the graph
        # a later input that differs changes the result through the collective
        other = gm(torch.full((4,), 10.0), inputs[1])[0]
        assert not torch.equal(other, torch.relu(job))


def test_nothing_is_added_where_the_fake_group_already_agrees():
    x = torch.tensor([1.0, 2.0])
    with fake_process_group(0, 2):
        gm = _graph("all_reduce")
        wait = next(n.name for n in gm.graph.nodes if "wait" in str(n.target))
        same, inputs, added = replay(gm, [x], {wait: x.clone()})
    assert added == [] and inputs == [x]


def test_record_keeps_what_every_wait_returned():
    """In the rank's own process (here the fake group stands in for the job's)."""
    x = torch.tensor([1.0, -2.0])
    with fake_process_group(0, 2):
        gm = _graph("all_reduce")
        got = record(gm, [x])
    wait = next(n.name for n in gm.graph.nodes if "wait" in str(n.target))
    assert got is not None and list(got) == [wait]
    assert torch.equal(got[wait], x)


def test_record_gives_up_on_a_collective_that_never_completes():
    """The other ranks never make the same collective: None, not a hang."""
    import time

    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.call_function(time.sleep, (5,))
    g.output((x,))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    assert record(gm, [torch.ones(1)], timeout=0.2) is None

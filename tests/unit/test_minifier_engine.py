"""Engine-level properties: call bounds, jobs independence, a hypothesis property."""

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.fx as fx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcompile.minifier import minify
from tcompile.minifier.graph import compute_nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import synthetic  # noqa: E402


def structural(gm, inputs):
    return any(n.target is torch.relu for n in gm.graph.nodes)


@pytest.mark.parametrize("n", [64, 256, 1024])
def test_single_culprit_chain_call_bound(n):
    gm = synthetic.chain(n, [int(n * 0.6)])
    r = minify(gm, synthetic.inputs(), synthetic.oracle)
    assert [x.target for x in compute_nodes(r.gm)] == [torch.relu]
    assert r.calls <= 2 * math.log2(n) + 6, r.calls
    assert r.verified


@pytest.mark.parametrize("name", list(synthetic.CASES))
def test_answer_does_not_depend_on_jobs(name):
    gm = synthetic.CASES[name](64)
    r1 = minify(gm, synthetic.inputs(), synthetic.oracle, jobs=1)
    r4 = minify(gm, synthetic.inputs(), synthetic.oracle, jobs=4)
    assert r1.gm.code == r4.gm.code
    assert synthetic.oracle(r1.gm, r1.inputs)


def _random_graph(draw):
    n = draw(st.integers(2, 14))
    g = fx.Graph()
    vals = [g.placeholder("x0"), g.placeholder("x1")]
    for i in range(n):
        kind = draw(st.sampled_from(["unary", "binary"]))
        a = vals[draw(st.integers(0, len(vals) - 1))]
        if kind == "unary":
            node = g.call_function(draw(st.sampled_from([torch.sin, torch.cos, torch.neg])), (a,))
        else:
            b = vals[draw(st.integers(0, len(vals) - 1))]
            node = g.call_function(draw(st.sampled_from([torch.add, torch.mul])), (a, b))
        node.name = f"n{i}"
        vals.append(node)
    outs = draw(st.lists(st.sampled_from(vals[2:]), min_size=1, max_size=3, unique=True))
    g.output(tuple(outs))
    return fx.GraphModule(torch.nn.Module(), g)


@st.composite
def graph_and_predicate(draw):
    gm = _random_graph(draw)
    names = [n.name for n in compute_nodes(gm)]
    marked = set(draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)))
    return gm, marked


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph_and_predicate(), st.sampled_from([1, 3]))
def test_result_still_fails_and_is_never_larger(gp, jobs):
    gm, marked = gp

    def monotone(g, inputs):  # fails while every marked node is still computed
        present = {n.name for n in g.graph.nodes if n.op == "call_function"}
        return marked <= present

    before = gm.code
    r = minify(gm, [torch.randn(3), torch.randn(3)], monotone, jobs=jobs)
    assert monotone(r.gm, r.inputs)
    assert r.nodes_after <= r.nodes_before
    assert len(compute_nodes(r.gm)) >= len(marked)
    assert gm.code == before
    r.gm(*r.inputs)  # the result is a runnable graph

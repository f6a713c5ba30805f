"""Each pass alone, on tiny FX graphs, with pure predicates (no compiles)."""

import operator

import pytest
import torch
import torch.fx as fx

from tcompile.minifier import MinifyError, Stop, Verdict, minify
from tcompile.minifier.engine import Problem
from tcompile.minifier.graph import (
    Case,
    canonical_key,
    compute_nodes,
    drop_unused_inputs,
    eliminate_dead_code,
    make_case,
    output_values,
    rebuild,
)
from tcompile.minifier.passes import (
    bypass_ops,
    consolidate_inputs,
    cut_prefix,
    delete_nodes,
    drop_outputs,
    params_to_inputs,
    truncate_suffix,
)

aten = torch.ops.aten


def build(spec, n_inputs=1, outputs=None):
    """spec: list of (name, fn, arg names/constants); returns a GraphModule."""
    g = fx.Graph()
    env = {f"x{i}": g.placeholder(f"x{i}") for i in range(n_inputs)}
    for name, fn, args in spec:
        env[name] = g.call_function(
            fn, tuple(env.get(a, a) if isinstance(a, str) else a for a in args)
        )
        env[name].name = name
    outs = outputs or [spec[-1][0]]
    g.output(tuple(env[o] for o in outs))
    return fx.GraphModule(torch.nn.Module(), g)


def targets(case_or_gm):
    gm = case_or_gm.gm if isinstance(case_or_gm, Case) else case_or_gm
    return [n.target for n in compute_nodes(gm)]


def has(target):
    def oracle(gm, inputs):
        return any(n.target is target for n in gm.graph.nodes)

    return oracle


class Recording:
    """An oracle that remembers the graphs it was asked about."""

    def __init__(self, pred):
        self.pred = pred
        self.seen = []

    def __call__(self, gm, inputs):
        self.seen.append((canonical_key(gm, inputs), tuple(targets(gm))))
        return self.pred(gm, inputs)


def problem(case, oracle, jobs=1):
    p = Problem(case, oracle, jobs=jobs)
    p.cache[case.key] = Verdict.SAME_FAILURE
    return p


CHAIN = [
    ("a", torch.sin, ["x0"]),
    ("b", torch.relu, ["a"]),
    ("c", torch.cos, ["b"]),
    ("d", torch.tanh, ["c"]),
]


def test_truncate_suffix_exact():
    case = make_case(build(CHAIN), [torch.randn(3)])
    oracle = Recording(has(torch.relu))
    out = truncate_suffix(problem(case, oracle), case)
    assert targets(out) == [torch.sin, torch.relu]
    assert [n.name for n in output_values(out.graph)] == ["b"]
    # binary search over 3 cut points: the middle one, then the first
    assert [t for _, t in oracle.seen] == [(torch.sin, torch.relu), (torch.sin,)]


def test_cut_prefix_exact_and_uses_concrete_values():
    x = torch.randn(3)
    case = make_case(build(CHAIN[:2]), [x])
    out = cut_prefix(problem(case, has(torch.relu)), case)
    assert targets(out) == [torch.relu]
    assert [n.name for n in out.graph.nodes if n.op == "placeholder"] == ["a"]
    assert torch.equal(out.inputs[0], torch.sin(x))
    assert torch.equal(out.gm(*out.inputs)[0], torch.relu(torch.sin(x)))


def test_delete_nodes_ddmin_on_a_diamond():
    spec = [
        ("a", torch.sin, ["x0"]),
        ("b", torch.cos, ["x0"]),
        ("c", torch.relu, ["a"]),
        ("d", torch.add, ["c", "b"]),
        ("e", torch.mul, ["d", 2.0]),
    ]
    case = make_case(build(spec), [torch.randn(4)])
    out = delete_nodes(problem(case, has(torch.relu)), case)
    assert targets(out) == [torch.relu]


def _spread(n_mul=4, gap=3):
    """sigmoid, then n_mul multiplications with ``gap`` additions between each."""
    spec, prev = [("s", torch.sigmoid, ["x0"])], "s"
    for i in range(n_mul):
        for j in range(gap):
            spec.append((f"a{i}_{j}", torch.add, [prev, 0.1]))
            prev = f"a{i}_{j}"
        spec.append((f"m{i}", torch.mul, [prev, 3.0]))
        prev = f"m{i}"
    return spec


def _needs_sigmoid_and_muls(k):
    def oracle(gm, inputs):
        ts = targets(gm)
        return torch.sigmoid in ts and ts.count(torch.mul) >= k

    return oracle


def test_bypass_ops_takes_one_ops_applications_out_keeping_the_chain():
    case = make_case(build(_spread()), [torch.randn(4)])
    oracle = Recording(_needs_sigmoid_and_muls(4))
    out = bypass_ops(problem(case, oracle), case)
    assert targets(out) == [torch.sigmoid] + [torch.mul] * 4  # the 12 adds went
    assert len(oracle.seen) == 1  # one candidate: the most applied op (add) first
    x = case.inputs[0]
    assert torch.allclose(out.gm(*out.inputs)[0], torch.sigmoid(x) * 81)  # still connected
    # the whole search ends there too, where ddmin over nodes alone kept the adds
    assert targets(minify(case.gm, list(case.inputs), _needs_sigmoid_and_muls(4)).gm) == (
        [torch.sigmoid] + [torch.mul] * 4
    )


def test_bypass_ops_leaves_small_graphs_and_shape_changes_alone():
    small = make_case(build(_spread(n_mul=2, gap=2)), [torch.randn(4)])  # 7 nodes
    oracle = Recording(lambda gm, inputs: True)
    assert bypass_ops(problem(small, oracle), small) is None and not oracle.seen
    spec = [("s", torch.sigmoid, ["x0"])] + [
        (f"r{i}", torch.sum, ["s" if i == 0 else f"r{i - 1}", -1]) for i in range(8)
    ]
    reductions = make_case(build(spec), [torch.randn(*[2] * 9)])  # each sum drops a dim
    assert bypass_ops(problem(reductions, oracle), reductions) is None and not oracle.seen


def test_drop_outputs_keeps_the_one_that_matters():
    spec = [("a", torch.sin, ["x0"]), ("b", torch.relu, ["x0"]), ("c", torch.cos, ["x0"])]
    case = make_case(build(spec, outputs=["a", "b", "c"]), [torch.randn(2)])
    out = drop_outputs(problem(case, has(torch.relu)), case)
    assert targets(out) == [torch.relu]
    assert [n.name for n in output_values(out.graph)] == ["b"]


def test_drop_unused_inputs_and_dead_code():
    g = fx.Graph()
    x = g.placeholder("x")
    g.placeholder("unused")
    dead = g.call_function(torch.cos, (x,))
    live = g.call_function(torch.sin, (x,))
    g.output((live,))
    case = Case(torch.nn.Module(), g, (torch.ones(1), torch.zeros(1)))
    assert dead.users == {}
    out = drop_unused_inputs(case)
    assert [n.name for n in out.graph.nodes if n.op == "placeholder"] == ["x"]
    assert len(out.inputs) == 1
    out2 = eliminate_dead_code(case)
    assert targets(out2) == [torch.sin]
    assert len(out2.inputs) == 1
    assert targets(case) == [torch.cos, torch.sin]  # never edited


def test_consolidate_duplicate_inputs():
    t = torch.arange(4.0)
    spec = [("a", torch.add, ["x0", "x1"]), ("b", torch.relu, ["a"])]
    case = make_case(build(spec, n_inputs=2), [t, t.clone()])
    out = consolidate_inputs(problem(case, has(torch.relu)), case)
    assert len(out.inputs) == 1
    (ph,) = [n for n in out.graph.nodes if n.op == "placeholder"]
    assert compute_nodes(out.graph)[0].args == (ph, ph)
    # not equal values: nothing to merge
    case2 = make_case(build(spec, n_inputs=2), [t, t + 1])
    assert consolidate_inputs(problem(case2, has(torch.relu)), case2) is None


def test_params_to_inputs():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3))

        def forward(self, x):
            return torch.relu(x * self.w)

    gm = fx.symbolic_trace(M())
    case = make_case(gm, [torch.randn(3)])
    out = params_to_inputs(problem(case, has(torch.relu)), case)
    assert not any(n.op == "get_attr" for n in out.graph.nodes)
    assert [n.name for n in out.graph.nodes if n.op == "placeholder"] == ["x", "w"]
    assert torch.equal(out.inputs[1], gm.w.detach())


def test_call_module_graph_dynamo_style():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.norm = torch.nn.LayerNorm(4)

        def forward(self, x):
            return self.norm(torch.relu(self.lin(x))).sum(-1)

    gm = fx.symbolic_trace(M())
    before = gm.code
    r = minify(
        gm,
        [torch.randn(2, 4)],
        lambda g, i: any(n.op == "call_module" and n.target == "norm" for n in g.graph.nodes),
    )
    assert [n.target for n in compute_nodes(r.gm)] == ["norm"]
    assert isinstance(r.gm.norm, torch.nn.LayerNorm)
    r.gm(*r.inputs)  # runs
    assert gm.code == before  # the input graph is never mutated


def test_aot_style_tuple_outputs_and_getitem():
    g = fx.Graph()
    x = g.placeholder("primals_1")
    vm = g.call_function(aten.var_mean.correction, (x, [1]), {"correction": 0, "keepdim": True})
    var = g.call_function(operator.getitem, (vm, 0))
    mean = g.call_function(operator.getitem, (vm, 1))
    sub = g.call_function(aten.sub.Tensor, (x, mean))
    relu = g.call_function(aten.relu.default, (sub,))
    add = g.call_function(aten.add.Tensor, (var, 1e-5))
    rs = g.call_function(aten.rsqrt.default, (add,))
    mul = g.call_function(aten.mul.Tensor, (relu, rs))
    g.output([mul, mean, rs])
    gm = fx.GraphModule(torch.nn.Module(), g)

    def culprit(g, i):  # a "lowering bug" in relu of a getitem-derived value
        return any(n.target is aten.relu.default for n in g.graph.nodes)

    r = minify(gm, [torch.randn(4, 8)], culprit)
    assert [n.target for n in compute_nodes(r.gm)] == [aten.relu.default]
    out = r.gm(*r.inputs)
    assert isinstance(out, tuple) and len(out) == 1


def test_never_sends_the_same_candidate_twice():
    spec = [
        (f"n{i}", torch.sin if i != 11 else torch.relu, [f"n{i - 1}" if i else "x0"])
        for i in range(24)
    ]
    oracle = Recording(has(torch.relu))
    r = minify(build(spec), [torch.randn(3)], oracle)
    keys = [k for k, _ in oracle.seen]
    assert r.calls == len(keys)
    # the final check re-runs the answer on purpose; nothing else repeats
    assert len(set(keys[:-1])) == len(keys) - 1
    assert targets(r.gm) == [torch.relu]


def test_bool_and_verdict_oracles_and_other_failures():
    spec = CHAIN

    # OTHER_FAILURE is not the failure being minified: the search must not accept it
    def oracle(gm, inputs):
        t = targets(gm)
        if torch.relu in t:
            return Verdict.SAME_FAILURE
        return Verdict.OTHER_FAILURE if torch.sin in t else Verdict.PASS

    r = minify(build(spec), [torch.randn(3)], oracle)
    assert targets(r.gm) == [torch.relu]
    r2 = minify(
        build(spec),
        [torch.randn(3)],
        lambda g, i: Verdict.SAME_FAILURE if torch.relu in targets(g) else Verdict.PASS,
    )
    assert targets(r2.gm) == [torch.relu]


def test_start_must_fail():
    with pytest.raises(MinifyError, match="does not fail"):
        minify(build(CHAIN), [torch.randn(3)], lambda g, i: False)


def test_stop_returns_best_so_far():
    spec = [
        (f"n{i}", torch.sin if i != 40 else torch.relu, [f"n{i - 1}" if i else "x0"])
        for i in range(64)
    ]
    r = minify(build(spec), [torch.randn(3)], has(torch.relu), stop=Stop(max_calls=4))
    assert r.stopped and not r.verified
    assert r.calls <= 4
    assert torch.relu in targets(r.gm) and r.nodes_after < 64


def test_checkpoint_and_resume(tmp_path):
    spec = [
        (f"n{i}", torch.sin if i != 40 else torch.relu, [f"n{i - 1}" if i else "x0"])
        for i in range(64)
    ]
    gm = build(spec)
    first = minify(
        gm, [torch.randn(3)], has(torch.relu), stop=Stop(max_calls=4), checkpoint=tmp_path
    )
    assert (tmp_path / "minify-checkpoint.pt").exists()
    oracle = Recording(has(torch.relu))
    resumed = minify(gm, [torch.randn(3)], oracle, checkpoint=tmp_path)
    assert targets(resumed.gm) == [torch.relu]
    # it started from the checkpoint, not from the 64-node graph
    assert len(oracle.seen[0][1]) == first.nodes_after
    assert resumed.history[0].pass_name == first.history[0].pass_name


def test_progress_reported():
    seen = []
    minify(build(CHAIN), [torch.randn(3)], has(torch.relu), on_progress=seen.append)
    assert seen and seen[-1].nodes == 1 and seen[-1].calls >= 1


def test_effects_stay_when_their_values_are_unused():
    """A graph from torch.compile(jacfwd(f)) enters a transform and fills a view in place;
    neither value is used, and dropping them makes another program (FX's own dead-code
    elimination drops both)."""
    from torch._functorch import predispatch

    g = fx.Graph()
    x = g.placeholder("x0")
    z = g.call_method("new_zeros", (x, 3, 3))
    diag = g.call_method("diagonal", (z, 0))
    g.call_method("fill_", (diag, 1))
    g.call_function(predispatch._vmap_increment_nesting, (3, "error"))
    g.call_function(torch._C._set_fwd_grad_enabled, (True,))
    dead = g.call_function(torch.sin, (x,))
    out = g.call_function(torch.add, (x, z))
    g.output((out, dead))
    case = make_case(fx.GraphModule(torch.nn.Module(), g), [torch.randn(3, 3)])
    kept = eliminate_dead_code(rebuild(case, outputs=[compute_nodes(case.graph)[-1]]))
    names = [str(n.target) for n in compute_nodes(kept.graph)]
    assert "fill_" in names and "diagonal" in names
    assert any("_vmap_increment_nesting" in t for t in names)
    assert any("_set_fwd_grad_enabled" in t for t in names)
    assert not any("sin" in t for t in names)  # a plain unused value still goes


def test_a_candidate_that_stops_inside_a_transform_leaves_no_state():
    """A minifier worker judges candidates one after another in one process; one that
    fails between entering a transform and leaving it must not leave the next one inside
    it ("Nested forward mode AD is not supported")."""
    from torch._functorch import predispatch

    from tcompile.compiler.child.global_state import isolated

    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    with pytest.raises(RuntimeError), isolated():
        predispatch._vmap_increment_nesting(3, "error")
        predispatch._jvp_increment_nesting()
        predispatch._enter_dual_level()
        torch._C._set_fwd_grad_enabled(False)
        raise RuntimeError("the candidate failed half-way")
    assert torch._C._functorch.get_dynamic_layer_stack_depth() == depth
    assert torch._C._is_fwd_grad_enabled()
    level = predispatch._enter_dual_level()  # raises when a level is still open
    predispatch._exit_dual_level(level=level)


def test_subgraphs_of_higher_order_ops_stay_attributes():
    """params_to_inputs lifts tensors, never a while_loop's or cond's subgraph: as an
    input it is an object no repro can build."""
    from tcompile.minifier.passes import lift_attributes

    root = torch.nn.Module()
    root.body = fx.symbolic_trace(torch.nn.ReLU())
    root.weight = torch.nn.Parameter(torch.randn(3))
    g = fx.Graph()
    x = g.placeholder("x0")
    body, w = g.get_attr("body"), g.get_attr("weight")
    g.output((g.call_function(torch.add, (g.call_module("body", (x,)), w)), body))
    case = make_case(fx.GraphModule(root, g), [torch.randn(3)])
    lifted = lift_attributes(case)
    assert [n.target for n in lifted.graph.nodes if n.op == "get_attr"] == ["body"]
    assert len(lifted.inputs) == 2  # x0 and the weight's value

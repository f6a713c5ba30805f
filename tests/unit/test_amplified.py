"""The engine on amplified errors (issue 51, item 3): a tiny error at one node that only
the 7 doublings after it take past tolerance, in the middle of a 64-node chain
(benchmarks/synthetic.py, "amplified: 1e-4, 7 doublings"); pure predicates, no
compiles."""

import operator
import sys
from pathlib import Path

import torch
import torch.fx as fx

from tcompile.minifier import minify
from tcompile.minifier.engine import Problem
from tcompile.minifier.graph import compute_nodes, make_case, rebuild
from tcompile.minifier.passes import truncate_suffix
from tcompile.minifier.verdict import Verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import synthetic  # noqa: E402

AMPLIFIED = "amplified: 1e-4, 7 doublings"


def test_amplified_chain_minimal_in_at_most_16_calls():
    """The culprit and its 7 doublings, nothing else, in at most 16 oracle calls:
    before truncate_suffix asked first where it had already ended the case, 18 (the
    second run bisected the 8-node window again: 3 calls, now 1); fx_minifier takes 72
    (docs/performance.md, "An error that 7 doublings amplify")."""
    gm = synthetic.CASES[AMPLIFIED](64)
    r = minify(gm, synthetic.inputs(), synthetic.oracle)
    assert [n.target for n in compute_nodes(r.gm)] == [synthetic._soft] + [operator.mul] * 7
    assert synthetic.oracle(r.gm, r.inputs)
    assert r.calls <= 16, r.calls
    # minimal: without its last doubling the error stays under tolerance
    case = make_case(r.gm, r.inputs)
    nodes = compute_nodes(case.graph)
    shorter = rebuild(case, drop=[nodes[-1].name], outputs=[nodes[-2]])
    assert not synthetic.oracle(shorter.gm, list(shorter.inputs))


def _chain(n: int) -> fx.GraphModule:
    g = fx.Graph()
    h = g.placeholder("x")
    for i in range(n):
        h = g.call_function(torch.relu if i == n // 2 else torch.neg, (h,))
    g.output((h,))
    return fx.GraphModule(torch.nn.Module(), g)


def test_truncate_suffix_asks_its_own_end_first():
    """A first run bisects (log2 n calls); a run on a case it already ended asks only
    whether the last node can go (one call when it cannot), and finds a shorter end
    all the same when it can."""
    calls: list[int] = []

    def relu_present(gm, inputs):
        calls.append(len(compute_nodes(gm)))
        return any(n.target is torch.relu for n in gm.graph.nodes)

    case = make_case(_chain(16), [torch.randn(3)])
    problem = Problem(case, relu_present)
    problem.cache[case.key] = Verdict.SAME_FAILURE
    ended = truncate_suffix(problem, case)
    assert [n.target for n in compute_nodes(ended.graph)][-1] is torch.relu
    assert len(calls) == 4  # 15 cut points
    # a fresh problem (its cache empty) that knows the end: one call, not 3
    known = Problem(ended, relu_present)
    known.cache[ended.key] = Verdict.SAME_FAILURE
    known.ends_found |= problem.ends_found
    assert truncate_suffix(known, ended) is None
    assert calls[4:] == [8]  # the end minus its last node, asked once
    # the same end with a node after it the predicate does not need: found again
    nodes = compute_nodes(case.graph)
    grown = rebuild(case, drop=[m.name for m in nodes[10:]], outputs=[nodes[9]])
    again = Problem(grown, relu_present)
    again.cache[grown.key] = Verdict.SAME_FAILURE
    again.ends_found.add(nodes[9].name)
    found = truncate_suffix(again, grown)
    assert found is not None and len(compute_nodes(found.graph)) == 9
    assert calls[5] == 9  # the guess, which fails: the search goes on below it

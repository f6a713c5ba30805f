"""The one gate before an oracle (minifier/gate.py), alone: pure, no torch."""

from __future__ import annotations

import pytest

from tcompile.minifier.gate import Gate, Stop
from tcompile.minifier.verdict import Verdict


def test_a_case_tried_before_never_reaches_the_oracle_again():
    asked = []
    gate = Gate(lambda c: asked.append(c) or c == "bad")
    assert gate.judge("k1", "bad") is Verdict.SAME_FAILURE
    assert gate.judge("k1", "bad") is Verdict.SAME_FAILURE
    assert gate.judge("k2", "ok") is Verdict.PASS
    assert asked == ["bad", "ok"] and gate.calls == 2 and gate.cache_hits == 1


def test_limits_calls_and_a_stop_callable():
    gate = Gate(lambda c: False, limits=Stop(max_calls=2))
    assert not gate.exhausted()
    gate.judge("a", 1), gate.judge("b", 2)
    assert gate.exhausted()
    flag = []
    assert Gate(lambda c: False, limits=lambda: bool(flag)).exhausted() is False
    flag.append(1)
    assert Gate(lambda c: False, limits=lambda: bool(flag)).exhausted() is True


@pytest.mark.parametrize("jobs", [1, 3])
def test_judge_all_in_order_with_one_job_stops_at_the_first_failure(jobs):
    asked = []
    gate = Gate(lambda c: asked.append(c) or c >= 2, jobs=jobs)
    verdicts = gate.judge_all([(str(i), i) for i in range(4)])
    if jobs == 1:  # as a sequential scan: nothing after the first that fails
        assert verdicts == [Verdict.PASS, Verdict.PASS, Verdict.SAME_FAILURE] and asked == [0, 1, 2]
    else:  # all at once
        assert verdicts[2:] == [Verdict.SAME_FAILURE] * 2 and sorted(asked) == [0, 1, 2, 3]
    assert gate.calls == len(verdicts) and gate.cache["2"] is Verdict.SAME_FAILURE


def test_an_oracle_that_raises_says_the_candidate_is_broken():
    def oracle(c):
        if c == "type":
            raise TypeError("the caller's bug")
        raise RuntimeError("candidate does not run")

    assert Gate(oracle).call("x") is Verdict.INVALID
    assert Gate(oracle, on_error=Verdict.OTHER_FAILURE).call("x") is Verdict.OTHER_FAILURE
    with pytest.raises(TypeError):
        Gate(oracle).call("type")
    assert Gate(oracle, reraise=()).call("type") is Verdict.INVALID


def test_statistics_per_pass():
    gate = Gate(lambda c: c == "bad")
    gate.pass_name = "cut"
    gate.judge("a", "ok"), gate.judge("b", "bad")
    gate.taken()
    gate.pass_name = "ddmin"
    gate.judge("c", "ok")
    stats = gate.stats_json()
    assert stats["cut"]["calls"] == 2 and stats["cut"]["taken"] == 1
    assert stats["ddmin"] == {"calls": 1, "taken": 0, "seconds": stats["ddmin"]["seconds"]}


def test_a_graph_search_accounts_for_every_call_per_pass():
    import torch

    from tcompile.minifier import minify

    def fn(x):
        for _ in range(6):
            x = torch.sin(x) + 1
        return torch.relu(x) * 2

    gm = torch.fx.symbolic_trace(fn)
    r = minify(
        gm, [torch.randn(4)], lambda g, i: any(n.target is torch.relu for n in g.graph.nodes)
    )
    assert sum(p["calls"] for p in r.passes.values()) == r.calls
    assert sum(p["taken"] for p in r.passes.values()) == len(r.history)


def test_every_checkpoint_hangs_on_the_gates_best_so_far_hook(tmp_path):
    """The graph engine's checkpoint file and the program level's best.py are both
    written from ``Gate.best``: one per step taken for a graph, one per smaller program
    for source."""
    import torch

    from tcompile.minifier import minify
    from tcompile.minifier.source import minify_source

    seen = []
    gate = Gate(lambda c: True, on_best=seen.append)
    gate.best("a")
    assert seen == ["a"]

    def fn(x):
        for _ in range(4):
            x = torch.sin(x) + 1
        return torch.relu(x) * 2

    r = minify(
        torch.fx.symbolic_trace(fn),
        [torch.randn(4)],
        lambda g, i: any(n.target is torch.relu for n in g.graph.nodes),
        checkpoint=tmp_path / "ckpt",
    )
    assert r.history and (tmp_path / "ckpt").exists()

    program = "a = 1\nb = 2\nc = 3\nassert c != 3, 'boom'\n"
    smaller = []
    minify_source(
        program,
        None,
        lambda src: Verdict.SAME_FAILURE if "c = 3" in src and "assert" in src else Verdict.PASS,
        progress_cb=lambda best, calls: smaller.append(best),
    )
    assert smaller and all(len(b) < len(program) for b in smaller)
    assert "a = 1" not in smaller[-1] and "c = 3" in smaller[-1]

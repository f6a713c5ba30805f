"""Bisect guided by the first divergent op (compiler/guided.py), on pure probes."""

from tcompile.compiler.guided import candidates, guided_search, skip_config
from tcompile.compiler.probe import Item, prefix_config

ITEMS = [
    Item("toggle", "fallback_random", value=True),
    Item("application", "joint_graph_passes", 0, "remove_noop_ops"),
    Item("application", "lowerings", 0, "mul"),
    Item("application", "lowerings", 1, "relu"),
    Item("application", "lowerings", 2, "add"),
    Item("application", "lowerings", 3, "relu_1"),
    Item("application", "lowerings", 4, "sum_1"),
    Item("application", "decomposition", 0, "<OpOverload(op='aten.silu', overload='default')>"),
]


def _program(culprit):
    """A program that fails when application ``culprit`` (an index into ITEMS) is
    enabled; the probes it saw."""
    seen = []

    def probe(label, cfg):
        seen.append(label)
        b = cfg["bisect"]
        it = ITEMS[culprit]
        if it.index in b.get("skip", {}).get(it.name, []):
            return False
        limit = b.get("limits", {}).get(it.name)
        return limit is None or it.index < limit

    return probe, seen


def test_candidates_name_the_op_in_any_spelling():
    assert candidates(ITEMS, "relu") == [3, 5]
    assert candidates(ITEMS, "aten.relu.default") == [3, 5]
    assert candidates(ITEMS, "sum") == [6]
    assert candidates(ITEMS, "silu") == [7]
    assert candidates(ITEMS, "linear") == [] and candidates(ITEMS, None) == []


def test_a_single_candidate_takes_three_runs():
    probe, seen = _program(6)
    assert guided_search(probe, "inductor", None, ITEMS, "sum") == 7
    assert len(seen) == 3


def test_several_candidates_are_halved_to_the_culprit():
    probe, seen = _program(5)
    k = guided_search(probe, "inductor", None, ITEMS, "relu")
    assert k == 6 and len(seen) == 4  # the question, one halving, two confirmations
    # the answer is the binary search's: enabling 6 fails, enabling 5 passes
    assert probe("x", {"bisect": prefix_config("inductor", ITEMS, 6)})
    assert not probe("x", {"bisect": prefix_config("inductor", ITEMS, 5)})


def test_a_wrong_guess_gives_up_after_one_run():
    probe, seen = _program(2)  # mul is the culprit, relu was guessed
    assert guided_search(probe, "inductor", None, ITEMS, "relu") is None
    assert len(seen) == 1


def test_skip_config_disables_only_those():
    assert skip_config(ITEMS, [3, 5, 1]) == {
        "limits": {},
        "toggles": {},
        "skip": {"lowerings": [1, 3], "joint_graph_passes": [0]},
    }

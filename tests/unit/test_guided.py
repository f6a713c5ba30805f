"""Bisect guided by the first divergent op (repro/jobs/guided.py), on pure probes."""

from tcompile.compiler.probe import Item
from tcompile.minifier.interval import first_failing
from tcompile.repro.jobs.guided import candidates, guesses

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
    """A program that fails when item ``culprit`` is enabled: ``fails(k)`` (items[:k]
    enabled), and the points it was asked."""
    seen = []

    def fails(k):
        seen.append(k)
        return culprit < k

    return fails, seen


def _search(culprit, op):
    fails, seen = _program(culprit)
    batch = lambda pts: [fails(p) for p in pts]  # noqa: E731
    k = first_failing(-1, len(ITEMS), batch, guesses=guesses(ITEMS, op))
    return k, seen


def test_candidates_name_the_op_in_any_spelling():
    assert candidates(ITEMS, "relu") == [3, 5]
    assert candidates(ITEMS, "aten.relu.default") == [3, 5]
    assert candidates(ITEMS, "sum") == [6]
    assert candidates(ITEMS, "silu") == [7]
    assert candidates(ITEMS, "linear") == [] and candidates(ITEMS, None) == []


def test_a_single_candidate_takes_two_runs():
    k, seen = _search(6, "sum")
    assert k == 7 and seen == [6, 7]  # items[:6] passes, items[:7] fails


def test_several_candidates_are_halved_to_the_culprit():
    k, seen = _search(5, "relu")  # relu at 3 and 5: 3 (passes), then 5 and 6
    assert k == 6 and seen == [3, 5, 6]
    k, seen = _search(3, "relu")
    assert k == 4 and seen == [3, 5, 4]


def test_every_answer_is_the_binary_search_answer():
    for culprit in range(len(ITEMS)):
        for op in ("relu", "sum", "silu", "mul", None):
            k, _ = _search(culprit, op)
            assert k == culprit + 1, (culprit, op)


def test_a_wrong_guess_costs_one_run():
    # a pass before the lowerings (item 1), relu guessed: the first point, just before
    # relu's first application, fails; the binary search goes on below it
    k, seen = _search(1, "relu")
    assert k == 2 and seen[0] == 3
    blind = []
    first_failing(-1, len(ITEMS), lambda pts: [blind.append(p) or 1 < p for p in pts])
    assert len(seen) <= len(blind) + 1


def test_a_decomposition_is_named_as_people_write_it():
    """Issue 52: ``<OpOverload(op='aten.unfold_backward', overload='default')>`` is
    ``aten.unfold_backward.default`` in bisect's culprit, and guides as before."""
    from tcompile.compiler.child.subsystems import op_name
    from tcompile.repro.jobs.guided import candidates

    name = op_name("<OpOverload(op='aten.unfold_backward', overload='default')>")
    assert name == "aten.unfold_backward.default"
    assert op_name("pass_pattern_0") == "pass_pattern_0"
    items = [Item("application", "decomposition", 0, name)]
    assert candidates(items, "unfold_backward") == [0]


def test_an_inductor_pattern_is_named_from_the_error_text():
    """Issue 52: where bisect names only the stage, the pattern the error names."""
    from tcompile.repro.jobs.bisect_report import pattern_named

    assert pattern_named("RuntimeError: while replacing randperm_index_pattern") == (
        "randperm_index_pattern"
    )
    assert pattern_named("pass_pattern_0: tracing _sfdp_replacement_28 failed") == (
        "_sfdp_replacement_28"
    )
    assert pattern_named("AssertionError: pass_pattern_1") is None


def test_an_application_is_named_by_what_it_did(monkeypatch):
    """Issue 52: a pattern pass's application is named by the change in inductor's
    counters between its hook call and the next (``fuse_attention x2``)."""
    from tcompile.compiler.child import subsystems
    from tcompile.repro.jobs.bisect_report import effect_words

    now = {"pattern_matcher_count": 0}
    monkeypatch.setattr(subsystems, "_inductor_counters", lambda: dict(now))
    c = subsystems.Counter({"joint_graph_passes": 5})
    assert not c.disable("inductor", "joint_graph_passes", lambda: "pass_pattern_0")
    now.update(fuse_attention=2, pattern_matcher_count=2)  # what pass_pattern_0 did
    assert not c.disable("inductor", "joint_graph_passes", lambda: "pass_pattern_1")
    now.update(pattern_matcher_count=3)  # pass_pattern_1: one generic match
    c2 = c.effects()
    assert c2 == {
        "joint_graph_passes": {
            "0": {"fuse_attention": 2, "pattern_matcher_count": 2},
            "1": {"pattern_matcher_count": 1},
        }
    }
    assert effect_words(c2["joint_graph_passes"]["0"]) == "fuse_attention x2"
    assert effect_words(c2["joint_graph_passes"]["1"]) == "pattern_matcher_count x1"
    limited = subsystems.Counter({"joint_graph_passes": 0})  # disabled: nothing is its
    assert limited.disable("inductor", "joint_graph_passes", lambda: "pass_pattern_0")
    now.update(fuse_attention=9)
    assert limited.effects() == {}

"""Issue 60 (item 2): a pattern-matcher pass's culprit names the pattern that fired, and
its switch turns that pattern alone off (compiler/child/patterns.py).

The three tracker reports of inductor's ``pointless_cumsum_replacement``
(fixtures/families/cumsum_*.py) were culprit ``post_grad_passes / pass_pattern_1``, a pass
of dozens of patterns whose switch triage never proposes; now each names
``post_grad.pointless_cumsum_replacement`` and ``--without pattern:...``.  One real
compile (a few seconds); the rest pure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tcompile.compiler.culprit import Culprit
from tcompile.compiler.failure import Failure
from tcompile.compiler.signature import FailureSignature
from tcompile.compiler.stack import without

CUMSUM = "post_grad.pointless_cumsum_replacement"


def test_a_pattern_is_named_by_telemetry_then_handler_then_ops():
    from tcompile.compiler.child.patterns import pattern_name

    assert pattern_name(SimpleNamespace(pattern_name="_sfdp_pattern_28_inference")) == (
        "_sfdp_pattern_28_inference"
    )

    def outer():
        def fn():
            pass

        return fn

    fn = outer()
    fn.__module__ = "torch._inductor.fx_passes.post_grad"
    assert pattern_name(SimpleNamespace(pattern_name=None, handler=fn)) == (
        "post_grad.test_a_pattern_is_named_by_telemetry_then_handler_then_ops.outer.fn"
    )

    class Expr:
        def fns_repr(self):
            return "aten.cumsum"

    assert pattern_name(SimpleNamespace(pattern=Expr())) == "SimpleNamespace(aten.cumsum)"


def test_the_pattern_an_error_was_raised_in_is_found_through_wrappers():
    from tcompile.compiler.child.patterns import ATTR, pattern_of

    inner = IndexError("tuple index out of range")
    setattr(inner, ATTR, CUMSUM)
    try:
        try:
            raise inner
        except IndexError as exc:
            raise RuntimeError("BackendCompilerFailed") from exc
    except RuntimeError as outer:
        assert pattern_of(outer) == CUMSUM
    assert pattern_of(ValueError("no pattern")) is None and pattern_of(None) is None


def test_without_takes_one_pattern_and_says_it_among_the_subsystems():
    assert without([f"pattern:{CUMSUM}"])["off"] == {"pattern": [CUMSUM]}
    with pytest.raises(ValueError, match="pattern"):
        without(["patterns:x"])


def test_the_fired_pattern_is_the_failures_or_the_only_one_of_the_application():
    from tcompile.repro.jobs.capture_bisect import fired_pattern

    sig = FailureSignature("inductor", "compile", "IndexError", "tuple index out of range")
    crashed = Failure(graph=0, graph_kind="inference", signature=sig, pattern=CUMSUM)
    assert fired_pattern(crashed, None) == CUMSUM
    plain = Failure(graph=0, graph_kind="inference", signature=sig)
    assert fired_pattern(plain, {f"pattern {CUMSUM}": 1, "pattern_matcher_count": 1}) == CUMSUM
    assert fired_pattern(plain, {"pattern a": 1, "pattern b": 1}) is None  # which one?
    assert fired_pattern(plain, {"pattern_matcher_count": 1}) is None
    assert Failure.from_json(crashed.to_json()).pattern == CUMSUM


def test_three_reports_of_one_pattern_share_one_culprit():
    found = {"stage": "inductor", "graph": 0, "subsystem": "post_grad_passes",
             "application": 6, "detail": "pass_pattern_1", "pattern": CUMSUM,
             "without": f"pattern:{CUMSUM}", "effects": {f"pattern {CUMSUM}": 1}}  # fmt: skip
    a = Culprit.of_bisect(found)
    b = Culprit.of_bisect({**found, "graph": 1, "application": 7, "effects": None})
    assert a is not None and b is not None and a.key() == b.key()
    assert a.switch == f"pattern:{CUMSUM}"
    assert a.text() == f"inductor / post_grad_passes / pass_pattern_1 / pattern {CUMSUM}"
    other = Culprit.of_bisect({**found, "pattern": "post_grad.other_replacement"})
    assert other is not None and other.key() != a.key()


def test_a_real_compile_counts_the_pattern_and_turns_it_off_alone():
    import torch
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters

    from tcompile.compiler.child import patterns

    patterns.install()

    def f(x):
        return x + torch.full((4,), 1.0).cumsum(0)

    def fired() -> int:
        counters.clear()
        torch._dynamo.reset()
        with inductor_config.patch(force_disable_caches=True):
            out = torch.compile(f, backend="inductor")(torch.zeros(4))
        assert out.shape == (4,)  # (its values: another test's planted bug may be on)
        return counters[patterns.COUNTERS][CUMSUM]

    try:
        assert fired() == 1
        patterns.turn_off({CUMSUM})
        assert fired() == 0  # its match left as it was: the cumsum computed
    finally:
        patterns.turn_off(())
        torch._dynamo.reset()

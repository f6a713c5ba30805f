"""capture_bisect.toggle_instead: where the culprit the search ended at, alone off, makes
the captured graph fail another way, a toggle that alone makes it pass is the answer
(#193061 on the GPU: ``cat``'s lowering off raised IndexError; the bug is mix-order
reduction).  The judgements are canned: no compile."""

from __future__ import annotations

from typing import Any

from tcompile.compiler.probe import Item, optimization_items
from tcompile.repro.jobs.capture_bisect import CaptureBisect

OTHER = {
    "verdict": "other_failure",
    "signature": {"stage": "inductor", "kind": "runtime", "exc_type": "IndexError",
                  "message": "Dimension out of range"},
}  # fmt: skip


class _Canned(CaptureBisect):
    def __init__(self, answers: dict[str, str]) -> None:  # no capture, no worker
        self.answers, self.labels = answers, []
        self.instead, self.also, self.stage_arg = None, [], None

        class _T:
            graph = 1

        self.target = _T()  # type: ignore[assignment]

    def judge(
        self, label: str, stage: str | None = None, bisect: dict[str, Any] | None = None
    ) -> tuple[bool, dict[str, Any]]:
        self.labels.append(label)
        verdict = self.answers.get(label, "same_failure")
        reply = OTHER if verdict == "other_failure" else {"verdict": verdict}
        return verdict == "same_failure", reply


ITEMS = [Item("toggle", "fallback_random", value=True), Item("application", "lowerings", 57, "cat")]


def test_a_toggle_that_passes_replaces_a_culprit_whose_switch_breaks_the_graph() -> None:
    names = [t.name for t in optimization_items("inductor")]
    assert "split_reductions" in names  # every torch tcompile runs on has it
    target = next(t for t in optimization_items("inductor") if t.name == names[0])
    s = _Canned({
        "only lowerings #57 cat off": "other_failure",
        f"only {target.name} changed": "pass",
    })  # fmt: skip
    switch = s.switch("inductor", ITEMS, 2, ITEMS[1])
    assert switch == {"limits": {}, "toggles": {target.name: False}}
    assert s.instead is not None and s.instead[0].name == target.name
    assert "IndexError: Dimension out of range" in s.instead[1]
    # the search's toggles first, then the optimizations, one at a time, up to a pass
    assert s.labels == ["only lowerings #57 cat off", "only fallback_random changed",
                        f"only {target.name} changed"]  # fmt: skip


def test_no_toggle_passes_keeps_the_culprit_and_a_pass_needs_no_toggle() -> None:
    s = _Canned({"only lowerings #57 cat off": "other_failure"})
    switch = s.switch("inductor", ITEMS, 2, ITEMS[1])
    assert switch["skip"] == {"lowerings": [57]} and s.instead is None
    s = _Canned({"only lowerings #57 cat off": "pass"})  # the usual case: no more judgements
    assert s.switch("inductor", ITEMS, 2, ITEMS[1])["skip"] == {"lowerings": [57]}
    assert s.labels == ["only lowerings #57 cat off"]


class _Job:
    def __init__(self, steps: list[dict[str, Any]]) -> None:
        from types import SimpleNamespace

        self.b, self.base_dir = SimpleNamespace(steps=steps), None

    def next_command(self, *args: object) -> str:
        return "tcompile minify ..."

    def done(self, code: int, message: str, **kw: Any) -> dict[str, Any]:
        from tcompile.repro.jobs.bisect_report import BisectReport

        return BisectReport(int(code), message, **kw).to_json()  # its fields, as bisect's


def _answer(found: dict[str, Any], verdict: Any, steps: list[dict[str, Any]]) -> dict[str, Any]:
    from types import SimpleNamespace

    from tcompile.repro.jobs.capture_result import result

    sig = SimpleNamespace(message="backward grad differs from eager")
    target = SimpleNamespace(graph=1, graph_kind="backward", stage="inductor", message="",
                             signature=sig, text="inductor/accuracy", divergence=None)  # fmt: skip
    base = {"stage": "inductor", "effects_all": {}, "switch": {}, "cap": "c", "also": []}
    return result(_Job(steps), target, {**base, **found}, 15, verdict)  # type: ignore[arg-type]


def test_the_answer_says_the_toggle_and_where_the_search_ended() -> None:
    from tcompile.minifier.verdict import Verdict

    toggle = Item("toggle", "triton.mix_order_reduction", value=False)
    ended = (ITEMS[1], "inductor/runtime: IndexError: Dimension out of range")
    confirm = {"run": 2, "what": "confirm", "verdict": "pass"}  # no "other": it passed
    got = _answer({"item": toggle, "instead_of": ended}, Verdict.PASS, [confirm])
    assert got["subsystem"] == "config" and got["instead_of"]["detail"] == "cat", got
    msg = got["message"]
    assert "triton.mix_order_reduction=False makes it pass" in msg
    assert "the search ended at lowerings #57 cat" in msg and "IndexError" in msg
    assert msg.endswith("and the whole program passes with the culprit off")
    assert got["without"] == "config:triton.mix_order_reduction"  # run --without takes it
    assert got["culprit"]["switch"] == "config:triton.mix_order_reduction", got["culprit"]


def test_a_confirmation_that_fails_another_way_says_how() -> None:
    from tcompile.minifier.verdict import Verdict

    other = {"run": 2, "what": "confirm", "verdict": "other_failure",
             "other": "graph 1: inductor/runtime: IndexError: Dimension out of range"}  # fmt: skip
    got = _answer({"item": ITEMS[1]}, Verdict.OTHER_FAILURE, [other])
    assert (
        "ends other_failure with the culprit off (graph 1: inductor/runtime: IndexError"
        in (got["message"])
    )
    assert "not a pass" in got["message"]


def test_the_program_bisect_says_when_the_configuration_below_failed_another_way() -> None:
    from tcompile.repro.jobs.bisect_report import turned

    items = [ITEMS[0], Item("application", "lowerings", 56, "add"), ITEMS[1]]
    found = {"subsystem": "lowerings", "application": 57, "detail": "cat"}
    steps = [
        {"run": 3, "what": "enable 3 of 3 (lowerings #57 cat)", "verdict": "same_failure"},
        {"run": 4, "what": "enable 2 of 3 (lowerings #56 add)", "verdict": "other_failure",
         "other": "graph 1: inductor/runtime: IndexError: Dimension out of range"},
    ]  # fmt: skip
    said = turned(steps, items, found)
    assert "fails another way: graph 1: inductor/runtime: IndexError" in said
    assert turned(steps[:1], items, found) == ""  # below it passed: nothing to say
    assert turned(steps, items, {"subsystem": "config", "detail": "x=1"}) == ""


def test_the_result_table_says_instead_of_and_a_confirmation_that_is_not_a_pass() -> None:
    import io

    from rich.console import Console

    from tcompile.cli.render_bisect import bisect_result
    from tcompile.repro.jobs.bisect_report import BisectReport

    steps = [
        {"run": None, "judgement": 10, "what": "captured graph 1: only lowerings #57 cat off",
         "failed": False, "verdict": "other_failure", "seconds": 2.8, "other": "IndexError"},
        {"run": 2, "what": "confirm: the whole program, x off", "failed": False,
         "verdict": "other_failure", "seconds": 24.0, "other": "graph 1: inductor/runtime: E"},
    ]  # fmt: skip
    instead = {"subsystem": "lowerings", "application": 57, "detail": "cat", "fails": "IndexError"}
    report = BisectReport(
        1, "m", stage="inductor", graph=1, graph_kind="backward", subsystem="config",
        detail="triton.mix_order_reduction=False makes it pass", runs=2, steps=steps,
        from_capture=True, graph_judgements=15, confirmed="other_failure", instead_of=instead,
    )  # fmt: skip
    buf = io.StringIO()
    bisect_result(report, Console(file=buf, width=300, color_system=None))
    out = buf.getvalue()
    assert "another failure" in out  # the steps' "failure shows" column, not "no"
    assert "lowerings #57 cat: with it alone off the graph fails another way (IndexError)" in out
    assert "NOT a pass: the whole program ends other_failure with it off (graph 1:" in out

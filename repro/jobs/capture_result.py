"""The answer of a bisect from the capture (capture_bisect.py): the culprit found on the
saved graph, in the words and fields of bisect's report, confirmed on the whole program
or said as not confirmed, and torch's own TORCH_BISECT_* variables for it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.failure import Failure
from tcompile.compiler.probe import Item, describe
from tcompile.minifier.verdict import Verdict

from .bisect_report import effect_words, effects_besides, pattern_named

if TYPE_CHECKING:
    from .bisect_report import BisectReport
    from .bisection import _Bisection


def result(
    job: _Bisection,
    target: Failure,
    found: dict[str, Any],
    judged: int,
    verdict: Verdict | None,
    unconfirmed: str = "",
) -> BisectReport:
    stage, item = found["stage"], found["item"]
    where = f"stage {stage}, graph {target.graph} ({target.graph_kind})"
    fields: dict[str, Any] = {}
    did = None
    if item is not None and item.kind == "toggle":
        fields.update(subsystem="config", detail=f"{item.name}={item.value!r} makes it pass")
        where += f", config: {fields['detail']}"
        if found.get("instead_of"):  # capture_bisect.toggle_instead
            ended, other = found["instead_of"]
            fields["instead_of"] = {"subsystem": ended.name, "application": ended.index,
                                    "detail": ended.detail, "fails": other}  # fmt: skip
            where += (
                f" (the search ended at {describe(ended)}, but with it alone off the graph "
                f"fails another way: {other})"
            )
    elif item is not None:
        fields.update(subsystem=item.name, application=item.index, detail=item.detail)
        where += f", {item.name} #{item.index}" + (f": {item.detail}" if item.detail else "")
        did = (found["effects_all"].get(item.name) or {}).get(str(item.index))
        fields.update(_torch_envs(job, target, stage, item))
        if found.get("also"):  # each enough to fail it: the graph passes with all off
            fields["also"] = [
                {"subsystem": it.name, "application": it.index, "detail": it.detail}
                for it in found["also"]
            ]
            where += (
                ", and "
                + ", ".join(describe(it) for it in found["also"])
                + (" (each enough for the failure: the graph passes only with all of them off)")
            )
    elif found["items"]:
        fields["detail"] = (
            "fails with every toggle changed and every subsystem disabled: elsewhere in the stage"
        )
    pattern = found.get("pattern") or pattern_named(target.message or target.signature.message)
    if pattern and item is None:
        where += f" (its error names inductor's pattern {pattern})"
    elif found.get("pattern"):
        where += f", pattern {pattern}"
        if found.get("pattern_alone"):  # its switch: that pattern alone off
            where += " (the graph passes with it alone off)"
            fields["without"] = f"pattern:{pattern}"
    if did := effects_besides(did, pattern):
        where += f" (it did: {effect_words(did)})"
    where += f"; found on the captured graph ({judged} compiles of it)"
    if verdict is None:
        where += f"; not confirmed on the whole program ({unconfirmed})"
    else:
        confirmed = "passes" if verdict is Verdict.PASS else f"ends {verdict.value}"
        off = "culprits" if found.get("also") else "culprit"
        where += f", and the whole program {confirmed} with the {off} off"
        last: dict[str, Any] = next((s for s in reversed(job.b.steps) if s.get("run")), {})
        if verdict is Verdict.OTHER_FAILURE and (other := last.get("other")):
            # the switch breaks the program another way (#193061: a lowering's fallback
            # that raises IndexError): the culprit is where this failure turns into that
            # one -- said, never read as a pass
            where += f" ({other}): not a pass, the switch makes it fail another way"
    return job.done(
        ExitCode.COMPILER_FAILURE,
        where,
        pattern=pattern,
        effects=dict(did) if did else None,
        next_command=job.next_command(target.graph, stage, target.stage),
        stage=stage, graph=target.graph, graph_kind=target.graph_kind,
        signature=target.text, divergence=target.divergence, flaky=None,
        from_capture=True, graph_judgements=judged, switch=found["switch"], capture=found["cap"],
        worker_from_standby=bool(found.get("from_standby")),
        confirmed=verdict.value if verdict is not None else None, **fields,
    )  # fmt: skip


def _torch_envs(
    job: _Bisection, target: Failure, stage: str, item: Item
) -> dict[str, dict[str, str]]:
    """TORCH_BISECT_* for the whole program (bad: the culprit on, good: off), where the
    culprit's place among the program's applications is known: the baseline ran at
    this stage and tagged each application with its graph."""
    from tcompile.compiler.collect import last_graphs
    from tcompile.compiler.protocol import read_events

    if stage != target.stage or not job.base_dir:
        return {}
    events = read_events(Path(job.base_dir) / layout.COMPILED)
    tags = last_graphs(events).get(item.name) or []
    mine = [i for i, g in enumerate(tags) if g == target.graph]
    if item.index >= len(mine):
        return {}
    n = mine[item.index]
    bad = {
        "TORCH_BISECT_BACKEND": stage,
        "TORCH_BISECT_SUBSYSTEM": item.name,
        "TORCH_BISECT_MAX": str(n),  # torch enables applications 0..MAX (bisection.py)
    }
    return {"bad": bad, "good": {**bad, "TORCH_BISECT_MAX": str(n - 1)}}

"""``tcompile bisect``: which stage, graph, pass and application break the program.

Every step re-runs the program under a configuration and asks one question: does
the failure (same kind, exception type and message, whatever the stage) show?

1. Baseline: the program as it is; the failure to explain, and how many times each
   inductor subsystem applied itself (with what: an op, a pass name).
2. Stage: walk the ladder down from the failing stage (eager, aot_eager,
   aot_eager_decomp_partition, then inductor or the program's own backend); bugs
   usually live in the last stage, so that order needs one run for them.
3. Graph: the failing graph is known from the baseline (tcompile numbers graphs and
   attributes failures); with several graphs, one run compiles only that one.
4. Inside the stage: one flat ordered list -- config toggles, then each subsystem's
   applications in pipeline order -- and one binary search for the shortest enabled
   prefix that still fails.  Its last item is the culprit.  (torch's bisector walks
   the subsystems one by one, then bisects inside one.)
5. Confirmation: the culprit configuration and the one just below are run again;
   if either flips, the failure is flaky, and we say how often it showed.

Runs stop as soon as the failure shows (the child exits at once).
"""

from __future__ import annotations

import dataclasses
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .observer import NullObserver, Observer
from .protocol import HookConfig
from .runner import (
    EXIT_COMPILER_FAILURE,
    EXIT_NOT_COMPILER,
    EXIT_OK,
    collect,
    new_run_dir,
    run_and_classify,
    run_process,
)
from .signature import FailureSignature
from .stages import LADDER
from .subsystems import SUBSYSTEMS, TOGGLES


@dataclasses.dataclass
class BisectReport:
    exit_code: int
    message: str
    stage: str | None = None
    graph: int | None = None
    graph_kind: str | None = None
    subsystem: str | None = None
    application: int | None = None
    detail: str | None = None
    runs: int = 0
    seconds: float = 0.0
    flaky: bool = False
    flaky_detail: str | None = None  # how often the failure showed when results flipped
    signature: str | None = None
    good: dict[str, Any] | None = None
    bad: dict[str, Any] | None = None
    next_command: str | None = None
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    run_dir: str | None = None
    minify: dict[str, Any] | None = None
    record: str | None = None  # a capture failure's frame, for `tcompile replay`

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Item:
    kind: str  # "toggle" | "application"
    name: str  # config key, or subsystem
    index: int = 0  # application number within its subsystem
    detail: str = ""
    value: Any = None  # a toggle's changed value


class Bisector:
    def __init__(
        self,
        command: list[str],
        *,
        accuracy: str,
        timeout: float | None,
        jobs: int,
        run_dir: Path,
        observer: Observer,
    ) -> None:
        self.command = command
        self.accuracy = accuracy
        self.timeout = timeout
        self.jobs = max(1, jobs)
        self.run_dir = run_dir
        self.observer = observer
        self.runs = 0
        self.steps: list[dict[str, Any]] = []
        self.target: FailureSignature | None = None
        self.graphless = False  # the target failure showed outside any compiled graph
        self._known: dict[str, bool] = {}

    def _matches(self, sig: dict[str, Any]) -> bool:
        t = self.target
        assert t is not None
        s = FailureSignature.from_json(sig)
        if (s.kind, s.exc_type) != (t.kind, t.exc_type):
            return False
        return t.kind in ("crash", "timeout") or s.message == t.message

    def probe(
        self,
        label: str,
        *,
        stage: str | None = None,
        gate: list[int] | None = None,
        bisect: dict[str, Any] | None = None,
        reuse: bool = True,
    ) -> tuple[bool, dict[str, Any]]:
        """Run the program once under a configuration: does the target failure show?"""
        key = repr((stage, gate, bisect))
        if reuse and key in self._known:
            return self._known[key], {"reused": True}
        self.runs += 1
        n = self.runs
        t = self.target
        config = HookConfig(
            dir=str(self.run_dir / f"probe-{n:03d}"),
            stage=stage,
            accuracy=self.accuracy,
            gate=gate,
            bisect=bisect if bisect is not None else {"limits": {}, "toggles": {}},
            stop_on={"kind": t.kind, "exc_type": t.exc_type, "message": t.message} if t else None,
        )
        t0 = time.monotonic()
        result = run_process(
            self.command,
            config,
            timeout=self.timeout,
            observer=NullObserver(),
            stdout=_Sink(),
            stderr=_Sink(),
        )
        graphs, failures, _ = collect(result)
        hit = [f for f in failures if self._matches(f["signature_fields"])]
        if not hit and self.graphless and t is not None:
            # a failure that surfaced outside any compiled graph (the baseline showed it
            # is not the program's own: it passes without torch.compile): the program
            # dying of the same exception is the failure showing
            last = [e for e in result.events if e.get("event") == "exception"]
            if last:
                s = FailureSignature.from_json(last[-1].get("signature") or {})
                if (s.exc_type, s.message) == (t.exc_type, t.message):
                    hit = [{"graph": None, "signature_fields": s.to_json()}]
        verdict = bool(hit)
        seconds = time.monotonic() - t0
        step = {
            "run": n,
            "what": label,
            "failed": verdict,
            "seconds": round(seconds, 2),
            "graph": hit[0]["graph"] if hit else None,
        }
        self.steps.append(step)
        self.observer.event({"event": "bisect_step", **step})
        self._known[key] = verdict
        return verdict, {"failures": hit, "graphs": graphs, "counts": _last_counts(result.events)}

    def probe_many(self, specs: list[tuple[str, dict[str, Any]]]) -> list[bool]:
        if self.jobs == 1 or len(specs) == 1:
            return [self.probe(label, **kw)[0] for label, kw in specs]
        with ThreadPoolExecutor(self.jobs) as pool:
            return list(pool.map(lambda s: self.probe(s[0], **s[1])[0], specs))


class _Sink:
    def write(self, _: str) -> int:
        return 0

    def flush(self) -> None:
        pass


def _last_counts(events: list[dict[str, Any]]) -> dict[str, list[str]]:
    counts: dict[str, list[str]] = {}
    for e in events:
        if e.get("event") == "bisect_counts" and e.get("counts"):
            counts = e["counts"]
    return counts


def _items(stage: str, counts: dict[str, list[str]]) -> list[Item]:
    items = [Item("toggle", k, value=v) for k, v in TOGGLES.get(stage, {}).items()]
    for sub in SUBSYSTEMS.get(stage, []):
        for i, detail in enumerate(counts.get(sub, [])):
            items.append(Item("application", sub, i, detail))
    return items


def _prefix_config(stage: str, items: list[Item], k: int) -> dict[str, Any]:
    """Enable items[:k]; disable the rest (toggles changed, applications skipped).
    A subsystem whose applications are all enabled gets no limit at all."""
    limits: dict[str, int] = {}
    toggles: dict[str, Any] = {}
    for i, it in enumerate(items):
        if it.kind == "toggle":
            if i >= k:
                toggles[it.name] = it.value
        elif i >= k and it.name not in limits:
            limits[it.name] = it.index  # its applications before this one stay enabled
    return {"limits": limits, "toggles": toggles}


def _bisect_first(lo: int, hi: int, fails: Any, jobs: int) -> int:
    """Smallest k in (lo, hi] that fails, ``hi`` known failing, ``lo`` known passing
    (or -1 for "unknown: nothing below"); evaluates up to ``jobs`` points a round,
    splitting the interval evenly (the same answer as bisection when monotone)."""
    while lo + 1 < hi:
        n = min(jobs, hi - lo - 1)
        pts = sorted({lo + (hi - lo) * (i + 1) // (n + 1) for i in range(n)} - {lo, hi})
        results = fails(pts)
        first_fail = next((p for p, r in zip(pts, results) if r), hi)
        passed = [p for p, r in zip(pts, results) if not r and p < first_fail]
        lo = max([lo, *passed])
        hi = first_fail
    return hi


def run_bisect(
    command: list[str],
    *,
    accuracy: str = "off",
    match: str | None = None,
    timeout: float | None = None,
    jobs: int = 1,
    out: str | None = None,
    observer: Observer | None = None,
    stdout: Any = None,
    stderr: Any = None,
) -> BisectReport:
    import re

    observer = observer or NullObserver()
    t0 = time.monotonic()
    run_dir = Path(new_run_dir(out, "bisect"))
    b = Bisector(
        command,
        accuracy=accuracy,
        timeout=timeout,
        jobs=jobs,
        run_dir=run_dir,
        observer=observer,
    )

    def done(code: int, message: str, **kw: Any) -> BisectReport:
        return BisectReport(
            code,
            message,
            runs=b.runs,
            seconds=time.monotonic() - t0,
            steps=b.steps,
            run_dir=str(run_dir),
            **kw,
        )

    # 1. baseline
    observer.status("baseline: the program as it is")
    base = run_and_classify(
        command,
        out=str(run_dir),
        accuracy=accuracy,
        timeout=timeout,
        observer=NullObserver(),
        stdout=stdout,
        stderr=stderr,
        bisect={"limits": {}, "toggles": {}},
    )
    b.runs += (
        2 if os.path.isdir(os.path.join(base.run_dir, "plain")) else 1
    )  # + the run without compile
    b.steps.append(
        {
            "run": 1,
            "what": "baseline (the program's own backend)",
            "failed": bool(base.failures),
            "seconds": round(base.seconds, 2),
        }
    )
    if base.exit_code == EXIT_NOT_COMPILER:
        return done(EXIT_NOT_COMPILER, base.explanation)
    failures = [f for f in base.failures if match is None or re.search(match, f["signature"])]
    if not base.failures:
        return done(EXIT_OK, "the program never fails under torch.compile: nothing to bisect")
    if not failures:
        return done(
            EXIT_OK,
            f"no failure matches {match!r} (found: "
            + "; ".join(f["signature"] for f in base.failures)
            + ")",
        )
    target = failures[0]
    b.target = FailureSignature.from_json(target["signature_fields"])
    b.graphless = target.get("graph") is None
    sig_text = target["signature"]
    counts = base_counts(base)
    if target["kind"] == "capture":
        record = target.get("record")
        return done(
            EXIT_COMPILER_FAILURE,
            "TorchDynamo fails to capture the frame (stage eager)"
            + (f"; the frame is recorded in {record}" if record else ""),
            stage="eager",
            signature=sig_text,
            detail=target.get("frame"),
            record=record,
            next_command=f"tcompile replay {record}" if record else None,
        )
    top = target["stage"]
    # 2. stage: the ladder below the failing stage, walked down from the top
    ladder = [s for s in LADDER if s != top]
    if top in LADDER:
        ladder = list(LADDER[: LADDER.index(top)])
    culprit_stage = top
    for stage in reversed(ladder):
        observer.status(f"stage: does it fail with --backend {stage}?")
        failed, info = b.probe(f"stage {stage}", stage=stage)
        if not failed:
            break
        culprit_stage = stage
        target = info["failures"][0]
        counts = info["counts"]
    graph = target["graph"]
    graph_kind = target.get("graph_kind")
    dynamo_graphs = [g for g in base.graphs if g.get("level") == "dynamo"]
    stage_arg = None if culprit_stage == top and top not in LADDER else culprit_stage
    # 3. graph
    gate: list[int] | None = None
    if graph is not None and len(dynamo_graphs) > 1:
        observer.status(f"graph: does compiling only graph {graph} reproduce it?")
        failed, info = b.probe(
            f"only graph {graph} compiled with {culprit_stage}", stage=stage_arg, gate=[graph]
        )
        if failed:
            gate = [graph]
            counts = info["counts"]  # applications are numbered in the gated runs' order
    report_kw: dict[str, Any] = dict(
        stage=culprit_stage, graph=graph, graph_kind=graph_kind, signature=sig_text
    )
    # 4. inside the stage
    items = _items(culprit_stage, counts)
    subsystem = application = detail = None
    flaky = False
    detail_flaky: str | None = None
    detail_flaky = None
    good = bad = None
    if items:
        observer.status(f"inside {culprit_stage}: {len(items)} toggles and applications to search")

        def fails(pts: list[int]) -> list[bool]:
            specs = [
                (
                    f"enable {p} of {len(items)} ({_describe(items[p - 1]) if p else 'none'})",
                    {
                        "stage": stage_arg,
                        "gate": gate,
                        "bisect": _prefix_config(culprit_stage, items, p),
                    },
                )
                for p in pts
            ]
            return b.probe_many(specs)

        k = _bisect_first(-1, len(items), fails, b.jobs)
        if k == 0:
            detail = "fails with every toggle changed and every subsystem disabled: elsewhere in the stage"
        else:
            item = items[k - 1]
            # 5. confirm: the culprit configuration fails, the one below passes, again
            observer.status("confirming: running the culprit configuration and the one below again")
            again_bad = b.probe(
                "confirm: culprit enabled",
                stage=stage_arg,
                gate=gate,
                bisect=_prefix_config(culprit_stage, items, k),
                reuse=False,
            )[0]
            again_good = b.probe(
                "confirm: culprit disabled",
                stage=stage_arg,
                gate=gate,
                bisect=_prefix_config(culprit_stage, items, k - 1),
                reuse=False,
            )[0]
            flaky = not again_bad or again_good
            if flaky:
                shown = 1 + int(again_bad)  # the search saw it fail once at the culprit config
                detail_flaky = (
                    f"the culprit configuration failed {shown} of 2 runs; the one below "
                    f"failed {int(again_good)} of 2"
                )
            if item.kind == "toggle":
                subsystem, detail = "config", f"{item.name}={item.value!r} makes it pass"
            else:
                subsystem, application, detail = item.name, item.index, item.detail
                env_stage = "inductor" if culprit_stage == "inductor" else culprit_stage
                bad = {
                    "TORCH_BISECT_BACKEND": env_stage,
                    "TORCH_BISECT_SUBSYSTEM": item.name,
                    "TORCH_BISECT_MAX": str(item.index),
                }
                good = {**bad, "TORCH_BISECT_MAX": str(item.index - 1)}
    report_kw.update(
        subsystem=subsystem,
        application=application,
        detail=detail,
        flaky=flaky,
        flaky_detail=detail_flaky,
        good=good,
        bad=bad,
    )
    nxt = f"tcompile minify{' --accuracy' if accuracy == 'loose' else ' --strict-accuracy' if accuracy == 'strict' else ''}"
    if graph is not None:
        nxt += f" --graph {graph}"
    if culprit_stage != top:
        nxt += f" --backend {culprit_stage}"
    import sys

    if command[0] == sys.executable:
        nxt += " " + " ".join(_shell(c) for c in command[1:])
    else:
        nxt += " -- " + " ".join(_shell(c) for c in command)
    where = f"stage {culprit_stage}" + (
        f", graph {graph} ({graph_kind})" if graph is not None else ""
    )
    if subsystem:
        where += (
            f", {subsystem}"
            + (f" #{application}" if application is not None else "")
            + (f": {detail}" if detail else "")
        )
    msg = ("FLAKY: " if flaky else "") + where
    return done(EXIT_COMPILER_FAILURE, msg, next_command=nxt.strip(), **report_kw)


def base_counts(report: Any) -> dict[str, list[str]]:
    from .protocol import read_events

    return _last_counts(read_events(os.path.join(report.run_dir, "compiled")))


def _describe(item: Item) -> str:
    if item.kind == "toggle":
        return f"{item.name}"
    return f"{item.name} #{item.index} {item.detail[:60]}"


def _shell(arg: str) -> str:
    import shlex

    return shlex.quote(arg)

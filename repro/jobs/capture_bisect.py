"""Bisect from the capture: the search on the failing graph the baseline saved, one
whole-program run to confirm (issue 51).

The baseline run saves each failing graph with the inputs of its failing call and
the configuration in force (HookConfig.capture; child/serve.capture_graph).  A worker
serves that graph (the launcher worker: the program is not run again), and every
question of the program bisect is asked of the graph instead, each one compile of
one graph, in seconds:

1. the graph unchanged, at its stage: the same failure?  (else: the program bisect)
   -- and how many times each subsystem applied itself in its compile alone;
2. the stage ladder below it;
3. inside the stage: the flat list of toggles and applications, one binary search;
4. the culprit off alone (everything else on): does the graph pass?  That is the
   culprit's *switch*: that application skipped, in that graph's compile only
   (child/subsystems.Counter's graph scope), or that toggle changed; where skipping
   it alone is not enough, every application from it on in its subsystem is off;
5. one whole-program run with the switch: the failure must not show.  Where it still
   does, the graph's answer is not the program's: the program bisect runs, and says so.

Whole-program runs: the baseline and the confirmation.  The program bisect
(bisection.py) remains for failures outside any graph, crashes and timeouts (the
process dies: nothing is saved), launched jobs, and captures that do not fail alone
(a runtime error's inputs after the failing call, when the graph changed them in
place); ``--whole-program`` asks for it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.compiler import layout
from tcompile.compiler.failure import Failure
from tcompile.compiler.probe import (
    Item,
    describe,
    enable_label,
    items_of,
    merge_off,
    off_config,
    optimization_items,
    prefix_config,
)
from tcompile.compiler.protocol import LAUNCHER_WORKER, Event, HookConfig, ServeSpec
from tcompile.compiler.signature import CAPTURED_KINDS, FailureKind, FailureSignature
from tcompile.compiler.stack import LADDER, without
from tcompile.minifier.interval import first_failing
from tcompile.minifier.verdict import Verdict

from .capture_result import result as _result
from .owned import owned_result

if TYPE_CHECKING:
    from tcompile.compiler.pool import WorkerPool
    from tcompile.compiler.probe import Bisector
    from tcompile.repro.writer import CaptureMeta

    from .bisect_report import BisectReport
    from .bisection import _Bisection

# a program whose baseline ran longer than this is not run again to confirm the culprit
# by default (``--confirm`` does): the graph's answer is given as not confirmed
CONFIRM_WITHIN = 120.0
FORK_ASIDE_WITHIN = 30.0  # a baseline's CPU seconds up to which the confirmation forks
MORE_CULPRITS = 2  # later applications looked for where the first alone off still fails


def capture_of(base_dir: str | None, target: Failure) -> tuple[Path | None, str]:
    """The capture of the target's graph in the baseline's run folder, or None and
    why there is none (the reason the program bisect then says)."""
    from .classify import captures_dir

    if target.graph is None:
        return None, "the failure is outside any graph"
    if target.rank is not None:
        return None, "a rank of a launched job (its graph is judged among the other ranks)"
    if target.kind == FailureKind.HOOK:
        return None, "a hook the compiled backward bypasses (no graph alone shows it)"
    if target.kind not in CAPTURED_KINDS:
        died = target.kind in (FailureKind.CRASH.value, FailureKind.TIMEOUT.value)
        return None, f"a {target.kind}" + (
            " (the process died: its failing graph was not saved)" if died else ""
        )
    if not base_dir:
        return None, "no baseline run folder"
    cap = Path(captures_dir(base_dir)) / f"graph-{target.graph}"
    if (cap / "not-saved.txt").exists():
        return None, "its graph could not be saved: " + (cap / "not-saved.txt").read_text()[:200]
    if not (cap / layout.CAPTURE_META).exists():
        return None, f"graph {target.graph}'s failing call was not saved (it never ran again)"
    meta = json.loads((cap / layout.CAPTURE_META).read_text())
    if meta.get("collectives"):
        return None, "the graph talks to other ranks"
    return cap, ""


def served_key(data: dict[str, Any]) -> str:
    """What a launcher worker serves, as the key of a parked pool (compiler/pool.park)."""
    return json.dumps(data, sort_keys=True, default=str)


def capture_pool(
    cap: Path,
    meta: CaptureMeta,
    target: Failure,
    accuracy: str,
    command: list[str],
    work: Path,
    *,
    jobs: int,
    standby: Any = None,
) -> tuple[WorkerPool, str]:
    """A pool whose workers serve the captured graph in ``cap`` (not started), and what
    they serve as a parked pool's key; its files under ``work``."""
    from tcompile.compiler.pool import WorkerPool

    from .launcher_job import capture_data

    sig = target.signature.to_json()
    data = capture_data(meta, sig, accuracy, command)
    config = HookConfig(
        dir=str(work / "events"),
        accuracy=accuracy,
        serve=ServeSpec(
            graph=0,
            capture_dir=str(cap),  # already written: the worker leaves it be
            signature=sig,
            launcher={"dir": str(cap), "data": data},
        ),
    )
    pool = WorkerPool(
        [sys.executable, "-c", LAUNCHER_WORKER], config, jobs=jobs,
        work_dir=str(work / "workers"), target=target.signature, standby=standby,
    )  # fmt: skip
    return pool, served_key(data)


class Unfinished(Exception):
    """A judgement of the captured graph that ended without an answer: past its time
    limit twice, or its worker lost."""


class CaptureBisect:
    """Steps 1-5 above for one target; ``run`` returns the result fields, or None with
    ``self.why`` set (the program bisect takes over)."""

    def __init__(self, job: _Bisection, target: Failure, cap: Path) -> None:
        self.job, self.b, self.target, self.cap = job, job.b, target, cap
        self.meta = json.loads((cap / layout.CAPTURE_META).read_text())
        self.why = ""
        self.judged = 0
        self.pool: Any = None
        self.served = ""  # what the worker serves (its launcher data), the pool's key
        self.keep = False  # the pool is parked for the minify that follows (report)
        self.also: list[Item] = []  # culprits after the first, all needed off (more_culprits)
        self.instead: tuple[Item, str] | None = None  # toggle_instead's toggle, the other failure
        self.lock = threading.Lock()

    # ---- the worker ------------------------------------------------------------

    def start(self) -> None:
        from tcompile.compiler.standby import take

        from .minify_search import read_capture

        self.pool, self.served = capture_pool(
            self.cap, self.meta, self.target, self.b.accuracy, self.job.command,
            self.b.run_dir / "capture-bisect",
            jobs=self.b.jobs,  # --jobs N: N workers, N points of the search at once
            standby=take,  # the baseline's standby (bisection.baseline_run), if it waits
        )  # fmt: skip
        self.pool.start()
        self.gm, self.inputs, _ = read_capture(self.cap)

    def judge(
        self, label: str, stage: str | None = None, bisect: dict[str, Any] | None = None
    ) -> tuple[bool, dict[str, Any]]:
        """One compile of the captured graph: does the target failure show?"""
        with self.lock:
            self.judged += 1
            n = self.judged
        t0 = time.monotonic()
        reply: dict[str, Any] = {}
        request: dict[str, Any] = {"bisect": bisect or {"limits": {}, "toggles": {}}}
        if stage:
            request["stage"] = stage
        verdict, sig = self.pool.evaluate(self.gm, self.inputs, request=request, reply_out=reply)
        same = verdict is Verdict.SAME_FAILURE
        step = {
            "run": None,
            "judgement": n,
            "what": f"captured graph {self.target.graph}: {label}",
            "failed": same,
            "verdict": verdict.value,
            "seconds": round(time.monotonic() - t0, 2),
            "graph": self.target.graph,
        }
        if verdict is Verdict.OTHER_FAILURE and sig:  # what it failed of instead
            step["other"] = str(FailureSignature.from_json(sig))
        self.b.steps.append(step)
        self.b.observer.event({"event": Event.BISECT_STEP, **step})
        if verdict in (Verdict.TIMEOUT, Verdict.CRASH):
            # ran past its limit twice (pool.evaluate retried it) or lost its worker:
            # unknown, never "passes" -- a busy machine must not move the culprit
            # (issue 64); the program bisect answers instead
            raise Unfinished(f"judgement {n} ({label}) ended {verdict.value}")
        return same, reply

    def close(self) -> None:
        if self.pool is None:
            return
        if self.keep and self.served:
            from tcompile.compiler.pool import park

            park(self.served, self.pool)  # minify_job._from_capture takes it
        else:
            self.pool.close()

    # ---- the search -------------------------------------------------------------

    def run(self) -> dict[str, Any] | None:
        try:
            return self._run()
        except Unfinished as exc:
            self.why = f"a judgement on the captured graph could not finish: {exc}"
            return None

    def _run(self) -> dict[str, Any] | None:
        b, top = self.b, self.target.stage
        b.observer.status(f"bisecting on the captured graph {self.target.graph} (no program runs)")
        try:
            self.start()
        except Exception as exc:  # the worker could not serve it: the program bisect
            self.why = f"the captured graph could not be served ({type(exc).__name__}: {exc})"[:300]
            return None
        same, reply = self.judge("unchanged")
        if not same:
            self.why = "the captured graph does not fail alone"
            return None
        counts, effects = reply.get("counts") or {}, reply.get("effects") or {}
        stage = top
        ladder = list(LADDER[: LADDER.index(top)]) if top in LADDER else list(LADDER)
        self.passing: str | None = None  # the stage below the culprit's (it passes)
        for lower in reversed(ladder):
            b.observer.status(f"stage: does the captured graph fail with --backend {lower}?")
            same, reply = self.judge(f"stage {lower}", stage=lower)
            if not same:
                self.passing = lower
                break
            stage, counts, effects = lower, reply.get("counts") or {}, reply.get("effects") or {}
        self.stage_arg = None if stage == top and top not in LADDER else stage
        found = self.inside(stage, counts)
        found.update(stage=stage, counts=counts, effects_all=effects, cap=str(self.cap))
        found["from_standby"] = self.pool.from_standby > 0
        found["also"] = list(self.also)
        self.one_pattern(found)
        return found

    def one_pattern(self, found: dict[str, Any]) -> None:
        """A pattern-matcher pass's application holds many patterns: the one that fired
        (or raised) in it, and whether turning that pattern alone off makes the graph
        pass -- then that is the culprit's switch (child/patterns.py), narrower than
        the whole pass (issue 60)."""
        item = found.get("item")
        if item is None or item.kind == "toggle":
            return
        did = (found["effects_all"].get(item.name) or {}).get(str(item.index))
        name = fired_pattern(self.target, did)
        if name is None:
            return
        found["pattern"] = name
        alone = without([f"pattern:{name}"])
        also = found.get("also") or []
        if also:  # the later culprits stay off: the pattern stands for the first only
            alone = {**merge_off(alone, also), "graph": self.target.graph}
        words = ", ".join([f"pattern {name}", *(describe(it) for it in also)])
        if not self.judge(f"only {words} off", self.stage_arg, alone)[0]:
            found["switch"], found["pattern_alone"] = alone, True

    def inside(self, stage: str, counts: dict[str, list[str]]) -> dict[str, Any]:
        items = items_of(stage, counts)
        found: dict[str, Any] = {"items": len(items), "item": None, "switch": None}
        if not items:
            return found
        self.b.observer.status(
            f"inside {stage}: {len(items)} toggles and applications, on the captured graph"
        )

        def one(p: int) -> bool:
            cfg = prefix_config(stage, items, p)
            return self.judge(enable_label(items, p), self.stage_arg, cfg)[0]

        def fails(pts: list[int]) -> list[bool]:
            if len(pts) == 1:
                return [one(pts[0])]
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(len(pts)) as ex:
                return list(ex.map(one, pts))

        # an interrupt names the narrowest range so far (bisection._Bisection.interrupted)
        self.job.items = items
        k = first_failing(-1, len(items), fails, width=self.b.jobs, track=self.job.track)
        if k <= 0:
            found["switch"] = None  # fails with everything off: elsewhere in the stage
            return found
        item = items[k - 1]
        found["item"] = item
        found["switch"] = self.switch(stage, items, k, item)
        if self.instead is not None:  # a toggle alone passes where the item broke it
            found["instead_of"], found["item"] = (item, self.instead[1]), self.instead[0]
        return found

    def switch(self, stage: str, items: list[Item], k: int, item: Item) -> dict[str, Any]:
        """The culprit off, everything else on: that toggle changed, or that application
        skipped in this graph's compile (where that alone still fails: every
        application of its subsystem from it on)."""
        if item.kind == "toggle":
            return {"limits": {}, "toggles": {item.name: item.value}}
        alone = off_config([item])
        same, reply = self.judge(f"only {describe(item)} off", self.stage_arg, alone)
        if not same:
            if reply.get("verdict") == Verdict.OTHER_FAILURE.value:
                toggle = self.toggle_instead(stage, items, reply)
                if toggle is not None:
                    return {"limits": {}, "toggles": {toggle.name: toggle.value}}
            return {**alone, "graph": self.target.graph}
        both = self.more_culprits(stage, items, k)
        if both is not None:
            return {**both, "graph": self.target.graph}
        return {"limits": {item.name: item.index}, "toggles": {}, "graph": self.target.graph}

    def toggle_instead(self, stage: str, items: list[Item], reply: dict[str, Any]) -> Item | None:
        """The culprit alone off makes the graph fail another way, not pass: the search
        ended where this failure turns into that one (#193061: with the lowering of
        ``cat`` off, the fallback raises IndexError; the bug is mix-order reduction).  A
        toggle that alone makes the graph pass is the answer instead, said beside the
        item the search ended at (``instead_of``).  None: no toggle passes so."""
        sig = reply.get("signature")
        other = str(FailureSignature.from_json(sig)) if sig else "another failure"
        toggles = [it for it in items if it.kind == "toggle"]
        for t in toggles + optimization_items(stage):
            cfg = {"limits": {}, "toggles": {t.name: t.value}}
            if (
                self.judge(f"only {describe(t)} changed", self.stage_arg, cfg)[1].get("verdict")
                == Verdict.PASS.value
            ):
                self.instead = (t, other)
                return t
        return None

    def more_culprits(self, stage: str, items: list[Item], k: int) -> dict[str, Any] | None:
        """The graph still fails with the culprit alone off: a later application fails
        it the same way (two mechanisms, each enough -- #176565's bf16 round trip: the
        pattern that drops the casts, and a later one).  With the culprits found so far
        off, the first later item whose enabling fails it is one more, up to
        ``MORE_CULPRITS``; the switch is all of them off, where the graph then passes
        (``self.also``: the ones after the first).  None: not found so."""
        off, lo = [items[k - 1]], k
        for _ in range(MORE_CULPRITS):
            if lo >= len(items):  # nothing after the last found
                return None
            words = ", ".join(describe(it) for it in off)

            def one(p: int, off: list[Item] = off, words: str = words) -> bool:
                what = f"{enable_label(items, p)}, {words} off"
                return self.judge(
                    what, self.stage_arg, merge_off(prefix_config(stage, items, p), off)
                )[0]

            # lo passes (the prefix before the first culprit, the others off); the whole
            # list with these off fails (the judgement before this one): the next in (lo, n]
            lo = first_failing(lo, len(items), lambda pts: [one(p) for p in pts])
            off = [*off, items[lo - 1]]
            cfg = off_config(off)
            words = ", ".join(describe(it) for it in off)
            if not self.judge(f"only {words} off", self.stage_arg, cfg)[0]:
                self.also = off[1:]
                return cfg
        return None


def from_capture(job: _Bisection, target: Failure) -> BisectReport | None:
    """The bisect from the capture, or None (``job.fallback`` says why): the result
    for bisection._Bisection.done."""
    b = job.b
    if target.graph is None and target.passes_without:  # the run answered (owned.py)
        return owned_result(job, target)
    cap, why = capture_of(job.base_dir, target)
    if cap is None:
        job.fallback = why
        return None
    fork_beside(job)
    search = CaptureBisect(job, target, cap)
    try:
        found = search.run()
        # report minifies this capture next: its worker serves that minify too
        search.keep = found is not None and getattr(job, "keep_worker", False)
    finally:
        search.close()
    if found is None:
        job.fallback = search.why
        return None
    stage, item, switch = found["stage"], found["item"], found["switch"]
    also = "".join(f", {describe(it)}" for it in found.get("also") or [])
    label = "confirm: the whole program, " + (
        f"pattern {found['pattern']}{also} off"
        if found.get("pattern_alone")
        else f"{describe(item)}{also} off"
        if item is not None
        else f"with --backend below {stage}"
    )
    # at the failure's own stage the program runs with its own backends: ``--backend
    # inductor`` would compile every graph with inductor -- a graph the program gives
    # backend="eager" too, and Dynamo then reuses it for the program's inductor call:
    # the graphs are numbered otherwise and the switch, scoped to the captured graph's
    # number, missed it (#174459's shape: the same function compiled both ways)
    confirm_stage = None if stage == target.stage else search.stage_arg
    if item is None:  # the stage itself: the stage below must make the program pass
        confirm_stage, switch = search.passing, None
        if confirm_stage is None:  # it fails at every stage: no switch to try
            why = "it fails at every stage: nothing to turn off"
            return _result(job, target, found, search.judged, None, why)
    work = work_seconds(job)
    if job.confirm is False or (job.confirm is None and work > CONFIRM_WITHIN):
        # a long job: the graph's answer stands, said as not confirmed (--confirm)
        why = (
            "--no-confirm"
            if job.confirm is False
            else (
                f"its run took {work:.0f} CPU seconds: --confirm runs it once more with the "
                "culprit off"
            )
        )
        return _result(job, target, found, search.judged, None, why)
    b.observer.status(label)  # said only where it runs (a long job's is not confirmed)
    verdict, _ = b.probe(label, stage=confirm_stage, bisect=switch, reuse=False)
    if verdict is Verdict.SAME_FAILURE:
        job.fallback = (
            f"the whole program still fails with the captured graph's culprit off "
            f"({describe(item) if item else stage})"
        )
        return None
    return _result(job, target, found, search.judged, verdict)


def fork_beside(job: _Bisection) -> None:
    """The confirmation of a small program forks from the servers warmed beside the
    baseline (probe.Bisector.warm_fork): their check, one forked run, runs now, beside
    the captured graph's judgements (issue 61: a small program no slower for its
    capture).  The check is one more whole run, worth it only where the import it saves
    is much of a run: a program whose baseline used more than ``FORK_ASIDE_WITHIN`` CPU
    seconds is confirmed by one fresh run, as before."""
    if job.confirm is False:
        return
    if work_seconds(job) <= FORK_ASIDE_WITHIN:
        job.b.decide_fork_aside()
    else:
        job.b.fork = False


def fired_pattern(target: Failure, did: dict[str, int] | None) -> str | None:
    """The inductor pattern an application is about: the one rewriting the graph when
    the compile failed (the failure's field), else the only one that fired in it (its
    effects' ``pattern NAME``); None: none, or several."""
    if target.pattern:
        return target.pattern
    names = [k.split(" ", 1)[1] for k in (did or {}) if k.startswith("pattern ")]
    return names[0] if len(names) == 1 else None


def one_pattern(
    b: Bisector,
    target: Failure,
    did: dict[str, int] | None,
    stage: str | None,
    gate: list[int] | None,
) -> tuple[str, str | None] | None:
    """For the program bisect: the inductor pattern its culprit application is about
    (``fired_pattern``) and its switch, ``pattern:NAME``, where the program passes with
    that pattern alone off (one run; None: it does not); None: no one pattern."""
    name = fired_pattern(target, did)
    if name is None:
        return None
    b.observer.status(f"does the program pass with pattern {name} alone off?")
    off = without([f"pattern:{name}"])
    verdict, _ = b.probe(f"pattern {name} off", stage=stage, gate=gate, bisect=off)
    return name, f"pattern:{name}" if verdict is Verdict.PASS else None


def work_seconds(job: _Bisection) -> float:
    """How long the baseline's run was, by its work -- the CPU seconds it used -- not by
    the wall clock a busy machine stretches: whether a job is too long to run again for
    a confirmation is the same on a quiet machine and a loaded one (issue 64)."""
    return float(job.base_cpu if job.base_cpu is not None else job.base_seconds)

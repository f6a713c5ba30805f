"""``tcompile bisect``: which stage, graph, pass and application break the program.

Every step re-runs the program under a configuration and asks one question: does the
failure (same kind, exception type and message, whatever the stage) show?

1. Baseline: the program as it is; the failure to explain, and how many times each
   inductor subsystem applied itself (with what: an op, a pass name).
2. Stage: walk the ladder down from the failing stage (eager, aot_eager,
   aot_eager_decomp_partition, then inductor or the program's own backend); bugs
   usually live in the last stage, so that order needs one run for them.
3. Graph: known from the baseline; with several graphs, one run compiles only it.
4. Inside the stage: one flat ordered list -- config toggles, then each subsystem's
   applications in pipeline order -- and one binary search for the shortest enabled
   prefix that still fails: its last item is the culprit (torch's bisector walks the
   subsystems one by one, then bisects inside one).
5. Confirmation: the configuration just below the culprit runs again (a flip: flaky).
6. A pattern pass's culprit: the one pattern that fired in it, and its own switch.

Runs stop as soon as the failure shows (the child exits at once)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import IO, Any

from tcompile.compiler import layout, standby
from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.failure import Failure
from tcompile.compiler.observer import NullObserver
from tcompile.compiler.probe import Bisector, Item, describe, enable_label, items_of, prefix_config
from tcompile.compiler.runner import command_args, new_run_dir
from tcompile.compiler.signature import FailureKind
from tcompile.compiler.stack import LADDER
from tcompile.minifier.interval import first_failing
from tcompile.minifier.verdict import Verdict

from .bisect_report import (
    BisectOptions,
    BisectReport,
    culprit_effects,
    effect_words,
    effects_besides,
    pattern_named,
    turned,
    where_found,
)
from .capture_bisect import one_pattern
from .classify import RunOptions, RunReport, base_counts, run_and_classify
from .guided import guesses


def run_bisect(
    command: list[str], o: BisectOptions, baseline: RunReport | None = None
) -> BisectReport:
    """``tcompile bisect``: baseline, stage, graph, inside the stage, confirmation.
    ``baseline``: a run already made with :func:`baseline_run` (``tcompile report``
    bisects each distinct failure of one run)."""
    observer = o.observer or NullObserver()
    run_dir = Path(new_run_dir(o.out, "bisect"))
    b = Bisector(
        command, accuracy=o.accuracy, timeout=o.timeout, jobs=o.jobs, run_dir=run_dir,
        observer=observer,
    )  # fmt: skip
    b.repeat, b.guided = o.repeat, o.guided
    if o.peers:  # several nodes bisect one job together: the same steps, in order
        from .peers import Peers

        b.peers = Peers(o.peers, command)
        b.jobs = 1
    job = _Bisection(b, command, o.accuracy, o.match, o.stdout, o.stderr)
    job.from_capture, job.confirm = not o.whole_program, o.confirm
    job.keep_worker = o.keep_worker
    # the fork servers import torch while the baseline runs: the program bisect's probes
    # and the capture's confirmation fork from them (a long job's never do: closed unused)
    b.warm_fork()
    try:
        report = job.run(baseline)
    finally:
        b.close()
        if baseline is None:  # its own baseline's standby, if nothing took it
            standby.close()
    report.repeat = b.tries_for() if b.target is not None else None
    report.forked = {"probes": b.forked_runs, "check_runs": int(b.fork_checked)}
    return report


def baseline_run(
    command: list[str],
    *,
    out: str,
    accuracy: str,
    timeout: float | None,
    stdout: IO[str] | None,
    stderr: IO[str] | None,
    trace: str | None = None,
) -> RunReport:
    """The program as it is, counting inductor's subsystem applications as it goes
    (no limits: it runs exactly as a plain run); ``localize``: where an accuracy
    failure's values first go wrong, once, here; each failing graph saved with its
    inputs (capture_bisect.py bisects it without running the program again); a
    standby worker beside it, for the bisect's first (compiler/standby.py)."""
    standby.prewarm(Path(out) / "standby")
    return run_and_classify(command, RunOptions(
        out=out, accuracy=accuracy, timeout=timeout, observer=NullObserver(),
        stdout=stdout, stderr=stderr, bisect={"limits": {}, "toggles": {}}, trace=trace,
        localize=True, capture=True,
    ))  # fmt: skip


class _Bisection:
    """The steps of one bisection, each a method; ``done`` makes the report."""

    def __init__(
        self,
        b: Bisector,
        command: list[str],
        accuracy: str,
        match: str | None,
        stdout: IO[str] | None,
        stderr: IO[str] | None,
    ) -> None:
        self.b, self.command, self.accuracy, self.match = b, command, accuracy, match
        self.stdout, self.stderr = stdout, stderr
        self.t0 = time.monotonic()
        self.base_dir: str | None = None  # the baseline's run (what each application did)
        # what is known so far, for a report when interrupted
        self.partial: dict[str, object] = {}
        self.track: dict[str, int] = {}
        self.items: list[Item] = []
        self.from_capture = True  # capture_bisect.py first; False: --whole-program
        self.fallback: str | None = None  # why the program bisect ran instead
        self.confirm: bool | None = None  # the capture's culprit on the program (None: short)
        self.keep_worker = False  # its capture's worker parked for the minify (report)
        self.base_seconds, self.base_cpu = 0.0, None  # the baseline run's (CPU: if known)

    def done(self, code: int, message: str, **kw: Any) -> BisectReport:
        b = self.b
        return BisectReport(
            int(code),
            message,
            runs=b.runs,
            seconds=time.monotonic() - self.t0,
            steps=b.steps,
            run_dir=str(b.run_dir),
            command=self.command,
            **{"fallback": self.fallback, **kw},
        )

    def captured(self, target: Failure) -> BisectReport | None:
        from .capture_bisect import from_capture

        b = self.b
        found = from_capture(self, target)  # its confirmation forked or not: fork_beside
        if found is None:
            if b.fork is False and not b.fork_checked:
                b.fork = None  # the program bisect decides at its first probe
            b.observer.status(f"bisecting by running the program: {self.fallback}")
        return found

    def run(self, base: RunReport | None = None) -> BisectReport:
        b = self.b
        # 1. baseline
        reused = base is not None
        if base is None:
            b.observer.status("baseline: the program as it is")
            base = baseline_run(
                self.command,
                out=str(b.run_dir),
                accuracy=self.accuracy,
                timeout=b.timeout,
                stdout=self.stdout,
                stderr=self.stderr,
            )
            b.runs += layout.program_runs(base.run_dir)  # + plain, located, ...
        b.steps.append(
            {
                "run": 0 if reused else 1,
                "what": "baseline (the program's own backend)" + (", shared" if reused else ""),
                "failed": bool(base.failures),
                "seconds": round(base.seconds, 2),
            }
        )
        counts, self.base_dir, self.base_seconds = base_counts(base), base.run_dir, base.seconds
        self.base_cpu = base.cpu_seconds  # its work: a busy machine stretches only seconds
        if b.peers is not None:
            from .peers import share_baseline

            counts = share_baseline(b.peers, base, counts)
        if base.exit_code == ExitCode.NOT_COMPILER:
            return self.done(ExitCode.NOT_COMPILER, base.explanation)
        if base.exit_code == ExitCode.FLAKY:  # it failed once, then passed: no search
            detail = "failed 1 of 2 runs under torch.compile; passed without it"
            return self.done(ExitCode.FLAKY, base.explanation, flaky=True, flaky_detail=detail)
        if not base.failures:
            return self.done(
                ExitCode.OK, "the program never fails under torch.compile: nothing to bisect"
            )
        failures = [f for f in base.failures if self.match is None or re.search(self.match, f.text)]
        if not failures:
            found = "; ".join(f.text for f in base.failures)
            return self.done(ExitCode.OK, f"no failure matches {self.match!r} (found: {found})")
        target = failures[0]
        if target.kind == FailureKind.ACCURACY and b.accuracy == AccuracyMode.OFF:
            # found by the run that checked each graph: probes check too, or every probe
            # "passes" while the program raises (projects/textcls: a false culprit)
            b.accuracy = self.accuracy = AccuracyMode.LOOSE
        b.target = target.signature
        b.doubtful = b.in_doubt(target)  # a confirmation run at the end, or not
        b.graphless = target.graph is None
        if target.kind == FailureKind.CAPTURE:
            return self.capture(target)
        self.partial = dict(
            stage=target.stage,
            graph=target.graph,
            graph_kind=target.graph_kind,
            signature=target.text,
            rank=target.rank,
        )
        try:
            if self.from_capture and b.peers is None:  # capture_bisect.py: 2 program runs
                found = self.captured(target)
                if found is not None:
                    return found
            return self.search(target, base.graphs, counts)
        except KeyboardInterrupt:
            return self.interrupted()

    def interrupted(self) -> BisectReport:
        """Ctrl-C or SIGTERM after the baseline: the narrowest answer found so far."""
        p = dict(self.partial)
        where = f"stage {p.get('stage')}" + (
            f", graph {p['graph']} ({p.get('graph_kind')})" if p.get("graph") is not None else ""
        )
        candidates = None
        if self.items and "hi" in self.track:
            lo, hi = self.track["lo"], self.track["hi"]
            candidates = [describe(it) for it in self.items[max(lo, 0) : hi]]
            where += f"; the culprit is one of {len(candidates)} (items {max(lo, 0) + 1}..{hi})"
        return self.done(
            ExitCode.INTERRUPTED,
            f"INTERRUPTED: narrowest so far: {where}",
            interrupted=True,
            candidates=candidates,
            **p,
        )

    def capture(self, target: Failure) -> BisectReport:
        record = target.record
        return self.done(
            ExitCode.COMPILER_FAILURE,
            "TorchDynamo fails to capture the frame (stage eager)"
            + (f"; the frame is recorded in {record}" if record else ""),
            stage="eager",
            signature=target.text,
            detail=target.frame,
            record=record,
            next_command=f"tcompile replay {record}" if record else None,
        )

    def search(
        self, target: Failure, graphs: list[dict[str, Any]], counts: dict[str, list[str]]
    ) -> BisectReport:
        top = target.stage
        sig_text = target.text
        divergence = target.divergence  # the baseline's: the program's own failure
        culprit_stage, target, counts = self.stage_ladder(top, target, counts)
        graph, graph_kind = target.graph, target.graph_kind
        self.partial.update(stage=culprit_stage, graph=graph, graph_kind=graph_kind)
        stage_arg = None if culprit_stage == top and top not in LADDER else culprit_stage
        # 2b. a launched job: only the failing rank compiles from here on
        ranked, gate, counts = self.one_rank(target, graphs, culprit_stage, stage_arg, counts)
        # 3-5 guided by the first divergent node, when there is one (guided.py)
        guess = dict(divergence or {})  # a gradient's node names no lowering: not a guide
        op = None if guess.get("grads") else guess.get("op")
        found = self.guided(culprit_stage, stage_arg, counts, op)
        if found is None:
            if not ranked:  # 3. graph
                gate, counts = self.only_graph(graph, graphs, culprit_stage, stage_arg, counts)
            # 4. inside the stage, 5. confirmation
            found = self.inside_stage(culprit_stage, stage_arg, gate, counts)
        where = where_found(culprit_stage, graph, graph_kind, found)
        pattern = pattern_named(target.message or target.signature.message)
        if pattern and not found.get("subsystem"):
            where += f" (its error names inductor's pattern {pattern})"
        did = culprit_effects(self.base_dir, found)
        if found.get("subsystem") and (one := one_pattern(self.b, target, did, stage_arg, gate)):
            pattern, found["without"] = one
            where += f", pattern {pattern}" + (
                " (the program passes with it alone off)" if found["without"] else ""
            )
        if did := effects_besides(did, pattern):
            where += f" (it did: {effect_words(did)})"
        where += turned(self.b.steps, self.items, found)  # the switch failed another way
        msg = ("FLAKY: " if found.get("flaky") else "") + where
        return self.done(
            ExitCode.COMPILER_FAILURE,
            msg,
            pattern=pattern,
            effects=did,
            next_command=self.next_command(graph, culprit_stage, top),
            stage=culprit_stage, graph=graph, graph_kind=graph_kind, signature=sig_text,
            rank=target.rank, rank_only=self.b.gate_rank is not None, divergence=divergence,
            **found,
        )  # fmt: skip

    def stage_ladder(
        self, top: str, target: Failure, counts: dict[str, list[str]]
    ) -> tuple[str, Failure, dict[str, list[str]]]:
        """2. The ladder below the failing stage, walked down from the top; bugs usually
        live in the last stage, so that order needs one run for them."""
        ladder = [s for s in LADDER if s != top]
        if top in LADDER:
            ladder = list(LADDER[: LADDER.index(top)])
        culprit = top
        for stage in reversed(ladder):
            self.b.observer.status(f"stage: does it fail with --backend {stage}?")
            verdict, info = self.b.probe(f"stage {stage}", stage=stage)
            if verdict is not Verdict.SAME_FAILURE:
                break
            culprit = stage
            target = (info.get("failures") or [target])[0]
            counts = info.get("counts", counts)
            self.partial["stage"] = culprit
        return culprit, target, counts

    def one_rank(
        self,
        target: Failure,
        graphs: list[dict[str, Any]],
        culprit_stage: str,
        stage_arg: str | None,
        counts: dict[str, list[str]],
    ) -> tuple[bool, list[int] | None, dict[str, list[str]]]:
        """2b. A launched job whose failure a rank shows: does it show with only that
        rank compiling (and, with several graphs there, only its failing graph)?  Then
        every later probe asks that rank's question alone: the other ranks run their
        graphs eagerly and compile nothing.  Otherwise (the failure needs the other
        ranks' compiled code), or when a graph holds a collective, nothing changes."""
        rank, graph = target.rank, target.graph
        if rank is None or any(g.get("collectives") for g in graphs):
            # a graph that holds a collective: the other ranks' compiled code takes
            # part in it (compiled on one rank and eager on the other, NCCL can hang)
            return False, None, counts
        mine = [g for g in graphs if g.get("level") == "dynamo" and g.get("rank", rank) == rank]
        gate = [graph] if graph is not None and len(mine) > 1 else None
        what = f"only rank {rank}" + (f"'s graph {graph}" if gate else "")
        self.b.observer.status(f"rank: does compiling {what} reproduce it?")
        self.b.gate_rank = rank
        verdict, info = self.b.probe(
            f"{what} compiled with {culprit_stage}", stage=stage_arg, gate=gate
        )
        if verdict is not Verdict.SAME_FAILURE:
            self.b.gate_rank = None
            return False, None, counts
        return True, gate, info["counts"]

    def only_graph(
        self,
        graph: int | None,
        graphs: list[dict[str, Any]],
        culprit_stage: str,
        stage_arg: str | None,
        counts: dict[str, list[str]],
    ) -> tuple[list[int] | None, dict[str, list[str]]]:
        """3. With several graphs, does compiling only the failing one reproduce it?"""
        dynamo_graphs = [g for g in graphs if g.get("level") == "dynamo"]
        if graph is None or len(dynamo_graphs) <= 1:
            return None, counts
        self.b.observer.status(f"graph: does compiling only graph {graph} reproduce it?")
        verdict, info = self.b.probe(
            f"only graph {graph} compiled with {culprit_stage}", stage=stage_arg, gate=[graph]
        )
        if verdict is not Verdict.SAME_FAILURE:
            return None, counts
        return [graph], info["counts"]  # applications are numbered in the gated runs' order

    def inside_stage(
        self,
        culprit_stage: str,
        stage_arg: str | None,
        gate: list[int] | None,
        counts: dict[str, list[str]],
        guide: str | None = None,
    ) -> dict[str, Any]:
        """4. One flat list (toggles, then each subsystem's applications) and one binary
        search for the shortest enabled prefix that still fails; 5. confirmation."""
        b = self.b
        items = self.items = items_of(culprit_stage, counts)
        keys = ("subsystem", "application", "detail", "flaky_detail", "good", "bad")
        found: dict[str, Any] = {**dict.fromkeys(keys), "flaky": False}
        if not items:
            return found
        b.observer.status(
            f"inside {culprit_stage}: {len(items)} toggles and applications to search"
        )

        def config(k: int) -> dict[str, Any]:
            return {
                "stage": stage_arg,
                "gate": gate,
                "bisect": prefix_config(culprit_stage, items, k),
            }

        def fails(pts: list[int]) -> list[bool]:
            verdicts = b.probe_many([(enable_label(items, p), config(p)) for p in pts])
            return [v is Verdict.SAME_FAILURE for v in verdicts]

        # the binary search's first points at the op's applications, where one is known
        first = guesses(items, guide) if guide else []
        k = first_failing(-1, len(items), fails, width=b.jobs, guesses=first, track=self.track)
        if not b.doubtful:  # no confirmation run: flakiness not looked at
            found["flaky"] = None
        if k > 0 and b.tries_for() == 1 and b.doubtful and self.confirm_below(k, config, found):
            if b.may_flip() and b.repeat is None:
                # a crash that did not show once where it shows: every pass so far is in
                # doubt; search again below, passing configurations run up to 3 times
                b.doubt = True
                b.forget_passes()
                b.observer.status(
                    f"the {b.target.kind if b.target else 'failure'} does not show on every "
                    f"run: searching again, {b.tries_for()} runs for a configuration to pass"
                )
                found["flaky_detail"] = (
                    f"the configuration below the first culprit found failed when run again: "
                    f"searched again with up to {b.tries_for()} runs per passing configuration"
                )
                k = first_failing(-1, k - 1, fails, width=b.jobs, track=self.track)
        if k == 0:
            found["detail"] = (
                "fails with every toggle changed and every subsystem disabled: elsewhere in the stage"
            )
            return found
        return self.culprit(items, k, culprit_stage, found)

    def confirm_below(self, k: int, config: Any, found: dict[str, Any]) -> bool:
        """5. Confirmation: the search saw configuration k fail and k - 1 pass; a false
        pass is what a flaky failure makes, so k - 1 runs once more.  True: it failed."""
        b = self.b
        b.observer.status("confirming: running the configuration below the culprit again")
        again = b.probe("confirm: culprit disabled", reuse=False, **config(k - 1))[0]
        flipped = again is Verdict.SAME_FAILURE
        found["flaky"] = flipped
        if flipped:
            found["flaky_detail"] = (
                "the configuration below the culprit passed once and failed once; "
                "the culprit configuration failed"
            )
        return flipped

    def guided(
        self, culprit_stage: str, stage_arg: str | None, counts: dict[str, list[str]], op: Any
    ) -> dict[str, Any] | None:
        """The search inside the stage, asking first at the applications of the op whose
        values go wrong first (guided.py); None: it names no application."""
        from .guided import candidates

        if not op or self.b.tries_for() != 1 or not self.b.guided:
            return None
        if not candidates(items_of(culprit_stage, counts), op):
            return None
        self.b.observer.status(f"inside {culprit_stage}: at the applications of {op} first")
        return self.inside_stage(culprit_stage, stage_arg, None, counts, guide=op)

    def culprit(
        self, items: list[Item], k: int, culprit_stage: str, found: dict[str, Any]
    ) -> dict[str, Any]:
        """The result for culprit items[k-1] (the applications' TORCH_BISECT_* hooks)."""
        item = items[k - 1]
        if item.kind == "toggle":
            found.update(subsystem="config", detail=f"{item.name}={item.value!r} makes it pass")
            return found
        found.update(subsystem=item.name, application=item.index, detail=item.detail)
        bad = {
            "TORCH_BISECT_BACKEND": culprit_stage,
            "TORCH_BISECT_SUBSYSTEM": item.name,
            "TORCH_BISECT_MAX": str(item.index),
        }
        found.update(bad=bad, good={**bad, "TORCH_BISECT_MAX": str(item.index - 1)})
        return found

    def next_command(self, graph: int | None, culprit_stage: str, top: str) -> str:
        nxt = "tcompile minify" + {"loose": " --accuracy", "strict": " --strict-accuracy"}.get(
            self.accuracy, ""
        )
        if graph is not None:
            nxt += f" --graph {graph}"
        if culprit_stage != top:
            nxt += f" --backend {culprit_stage}"
        return f"{nxt} {command_args(self.command)}".strip()

"""``tcompile run``: the command under the wrapped stack, every graph, every failure.

The child's events become graphs, :class:`~.failure.Failure` rows and notes
(collect.py).  Failures tcompile has not itself checked against
eager (a capture failure the program died of, a crash outside any graph) are
*unconfirmed* until a run without torch.compile says whether the program fails the
same way anyway (then it is not a compiler bug: exit 3)."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import time
from typing import IO, Any

from tcompile.compiler import faithful, invariant, layout
from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.cause import Cause
from tcompile.compiler.collect import (
    collect,
    died_where_it_raised,
    dying_exception,
    fails_the_same_way,
    last_counts,
    ranks_that_raised,
)
from tcompile.compiler.exitcodes import ExitCode, InternalError
from tcompile.compiler.failure import Failure, dist_of, group
from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.protocol import MORE_PRECISE, STOP_EXIT, Event, HookConfig, read_events
from tcompile.compiler.runner import (
    ProcessResult,
    command_args,
    new_run_dir,
    run_process,
    write_json,
)
from tcompile.compiler.signature import FailureKind, FailureSignature

from .flaky import Flaky, RunIO, flaky_outcome, passed
from .owned import owned_note, without_owner
from .peers import one_node_of
from .run_record import RunReport


@dataclasses.dataclass
class RunOptions:
    """What one classified run is asked (``tcompile run``'s options, typed once): the
    stage and the accuracy check, budgets and streams, a bisection configuration,
    what to record and what to keep."""

    out: str | None = None
    stage: str | None = None
    accuracy: str = "off"
    timeout: float | None = None
    observer: Observer | None = None
    stdout: IO[str] | None = None
    stderr: IO[str] | None = None
    gate: list[int] | None = None
    bisect: dict[str, Any] | None = None
    debug_dir: str | None = None
    only: str | None = None
    record: str = "failures"
    confirm: bool = True
    trace: str | None = None
    localize: bool = False  # an accuracy failure's first divergent node (child/localize.py)
    # each failing graph saved with its inputs under layout.CAPTURES, for a bisect or
    # minify that starts from it (capture_bisect.py)
    capture: bool = False


def run_and_classify(command: list[str], o: RunOptions) -> RunReport:
    """``tcompile run``: the command under the wrapped stack, every graph, every failure."""
    out, stage, accuracy, timeout = o.out, o.stage, o.accuracy, o.timeout
    stdout, stderr, gate, bisect, debug_dir = o.stdout, o.stderr, o.gate, o.bisect, o.debug_dir
    only, record, confirm, trace, localize, capture = (
        o.only,
        o.record,
        o.confirm,
        o.trace,
        o.localize,
        o.capture,
    )
    observer = o.observer or NullObserver()
    run_dir = new_run_dir(out, "run")
    captures = captures_dir(run_dir)
    if capture:  # its existence tells the locating run to save what it finds too
        os.makedirs(captures, exist_ok=True)
    config = HookConfig(
        dir=os.path.join(run_dir, layout.COMPILED),
        stage=stage,
        accuracy=accuracy,
        gate=gate,
        bisect=bisect,
        debug_dir=debug_dir,
        only=only,
        record=record,
        trace=trace,
        localize=localize and accuracy != AccuracyMode.OFF,
        capture=captures if capture else None,
        # a run whose failure is classified here keeps each graph's last call: a program
        # dying of its own check is located then, without two more runs (postmortem.py)
        # (a bisect's baseline counts applications, changing none: it keeps them too)
        keep_last_calls=confirm and gate is None and not any((bisect or {}).values()),
    )
    observer.status("running the command under tcompile")
    t0 = time.monotonic()
    try:
        result = run_process(
            command, config, timeout=timeout, observer=observer, stdout=stdout, stderr=stderr
        )
    except KeyboardInterrupt:  # what the run showed until then is the report
        result = ProcessResult(
            None, time.monotonic() - t0, False, [], read_events(config.dir), {}, config.dir
        )
        stopped = dataclasses.replace(o, observer=observer, confirm=False)
        report = classify_result(result, command, run_dir, stopped, keep=True)
        report.interrupted, report.exit_code = True, int(ExitCode.INTERRUPTED)
        if not report.failures:
            report.verdict = "interrupted"
        report.explanation = f"interrupted: {report.explanation} so far"
        write_json(os.path.join(run_dir, layout.RESULT), report.to_json())
        return report
    report = classify_result(
        result,
        command,
        run_dir,
        dataclasses.replace(o, observer=observer),
        keep=out is not None or trace is not None,
    )
    if trace is not None:
        from tcompile.compiler.trace import trace_summary

        observer.status("turning the trace into pages (tlparse)")
        report.trace = trace_summary(trace, report.graphs, report.failures)
        if report.run_dir:
            write_json(os.path.join(report.run_dir, layout.RESULT), report.to_json())
    return report


def classify_result(
    result: ProcessResult,
    command: list[str],
    run_dir: str,
    o: RunOptions,
    *,
    keep: bool = True,
) -> RunReport:
    """A finished run of the command, classified: its graphs and failures; when it
    failed and nothing tcompile checked explains it, a run without torch.compile
    decides whether it is a compiler bug at all (``o``: the run's options)."""
    stage, accuracy, timeout, stdout, stderr = o.stage, o.accuracy, o.timeout, o.stdout, o.stderr
    observer, debug_dir, confirm = o.observer or NullObserver(), o.debug_dir, o.confirm
    internal = [e for e in result.events if e.get("event") == Event.INTERNAL]
    if internal:
        raise InternalError(
            f"{internal[0].get('message')} (this torch is not one tcompile supports; "
            f"the run's files are in {run_dir})"
        )
    graphs, failures, notes = collect(result)
    program = result.outcome()
    if result.teardown_hang:
        who = ", ".join(map(str, result.hung_ranks)) or "?"
        notes.append(
            {
                "graph": None,
                "text": f"rank {who} hung at exit after every rank destroyed its process "
                "group, none raised and each one's code returned or was stuck at its end "
                "(as gloo's teardown hangs: its destructor joins a thread that waits for "
                "the GIL); tcompile ended it -- the program had finished (the named "
                "exception of docs/faithful.md)",
            }
        )
    records = _gather_records(result, run_dir, failures)
    io: RunIO = dict(stage=stage, timeout=timeout, observer=observer, stdout=stdout, stderr=stderr)
    alone = one_node_of(command)  # runs of it alone cannot start: not run again
    if accuracy != AccuracyMode.OFF and confirm and not alone and faithful.effects(result):
        passive = faithful.passive_run(command, run_dir, **io)
        program["passive"] = passive.outcome()  # the program left alone: how it ended
        result, failures = faithful.reconcile(result, passive, failures, collect(passive)[1], notes)
    failed = result.timed_out or result.returncode not in (0, None, STOP_EXIT)
    not_ours = flaky = None
    unexplained = failed and not any(not f.unconfirmed for f in failures) and confirm
    if unexplained and alone:
        notes.append({"graph": None, "text": alone})
        failures = failures or [_graphless_failure(result, graphs, stage, notes)]
    elif unexplained:
        failures, not_ours, flaky = _unexplained(
            result, failures, graphs, notes, command, run_dir, io
        )
    for f in failures:
        f.unconfirmed = False
    verdict, explanation, exit_code = _verdict(failures, graphs, accuracy, not_ours)
    if flaky is not None:
        verdict, explanation, exit_code = "flaky", flaky["explanation"], ExitCode.FLAKY
    debug_index = None
    if debug_dir:
        from tcompile.compiler.debug_artifacts import index_debug_dir

        debug_index = index_debug_dir(debug_dir)
    keep = keep or exit_code in (ExitCode.COMPILER_FAILURE, ExitCode.FLAKY) or bool(records)
    report = RunReport(
        next_command=next_step(failures, records, command, accuracy)
        if verdict not in ("not-a-compiler-bug", "flaky") and (graphs or failures)
        else None,
        graphs=graphs,
        failures=failures,
        notes=notes,
        exit_code=int(exit_code),
        verdict=verdict,
        explanation=explanation,
        returncode=result.returncode,
        seconds=result.seconds,
        run_dir=run_dir if keep else None,
        command=command,
        stage=stage,
        accuracy=accuracy,
        debug_index=debug_index,
        records=records,
        program=program,
        flaky=flaky,
        ranks_ended=invariant.rank_endings(result.events, result.stuck_pids),
        teardown_hang=result.teardown_hang,
        cpu_seconds=result.cpu_seconds,
        captured=o.capture,
    )
    if exit_code == ExitCode.OK and confirm:  # a verdict never contradicts the processes
        invariant.check_clean(
            result.returncode, result.timed_out, result.teardown_hang, report.ranks_ended
        )
    if keep:
        write_json(os.path.join(run_dir, layout.RESULT), report.to_json())
    else:  # a temporary directory holding nothing the user is told about
        shutil.rmtree(run_dir, ignore_errors=True)
    return report


def _unexplained(
    result: ProcessResult,
    failures: list[Failure],
    graphs: list[dict[str, Any]],
    notes: list[dict[str, Any]],
    command: list[str],
    run_dir: str,
    io: RunIO,
) -> tuple[list[Failure], str | None, Flaky | None]:
    """The command failed and nothing tcompile checked explains it: does it fail the
    same way with torch.compile turned off?  (the failures; why it is not a compiler
    bug where it is not; what was seen where the failure did not come back)"""
    if not failures and (name := without_owner(result, command, run_dir, io)):
        # its words are a subsystem's, and the program passes with it off (owned.py)
        owned = _graphless_failure(result, graphs, io["stage"], notes)
        owned_note(owned, name)
        return [owned], None, None
    io["observer"].status("the command failed: running it again without torch.compile")
    plain = HookConfig(dir=os.path.join(run_dir, layout.PLAIN), disable=True)
    again = run_process(
        command, plain, timeout=io["timeout"], observer=NullObserver(),
        stdout=io["stdout"], stderr=io["stderr"],
    )  # fmt: skip
    if fails_the_same_way(result, again):
        explanation = _not_a_compiler_bug(result, again, failures)
        notes.append({"graph": None, "text": explanation})
        return [], explanation, None
    if not failures:
        # a wrong value the program itself noticed?  A run with the values checked
        # finds the graph that computed it -- and is the compiled command run again
        saving = captures_dir(run_dir)
        located = faithful.locate(
            command, run_dir, **io, capture=saving if os.path.isdir(saving) else None
        )
        failures = _located(result, located)
        rerun = located
        if not failures and passed(located) and faithful.effects(located):
            # the check changed the program (random ops drawing eager's numbers): its
            # pass says nothing of the program's -- run it again only watching
            rerun = faithful.passive_run(command, run_dir, **io, folder=layout.AGAIN)
        if not failures and passed(rerun):
            flaky = flaky_outcome(result, rerun, again)
            notes.append({"graph": None, "text": flaky["explanation"]})
            return [], None, flaky
        if not failures:
            failures.append(_graphless_failure(result, graphs, io["stage"], notes))
    return failures, None, None


def _verdict(
    failures: list[Failure], graphs: list[dict[str, Any]], accuracy: str, not_ours: str | None
) -> tuple[str, str, ExitCode]:
    """(verdict, explanation, exit code) of a classified run."""
    if not_ours is not None:
        return "not-a-compiler-bug", not_ours, ExitCode.NOT_COMPILER
    if failures:
        kinds = sorted({f.kind for f in failures})
        bugs = len(group(failures))
        explanation = f"{len(failures)} compiler failure(s): {', '.join(kinds)}"
        if bugs < len(failures):
            explanation += f" ({bugs} distinct)"
        return "compiler-failure", explanation, ExitCode.COMPILER_FAILURE
    explanation = "no compiler failure"
    if accuracy == AccuracyMode.OFF and graphs:
        # a silently wrong value passes a run that does not compare values: say so
        explanation += " (values not checked against eager: --accuracy checks them)"
    return "clean", explanation, ExitCode.OK


def next_step(
    failures: list[Failure], records: list[dict[str, Any]], command: list[str], accuracy: str
) -> str | None:
    """What to type after `tcompile run`: replay a recorded capture failure; minify a
    failure no graph holds (the program itself); bisect one in a graph."""
    if not failures:
        if accuracy == AccuracyMode.OFF and command:  # clean, but nothing compared its values
            return f"tcompile run --accuracy {command_args(command)}"
        return None
    first = failures[0]
    if first.kind == FailureKind.CAPTURE.value and first.record:
        return f"tcompile replay {shlex.quote(first.record)}"
    flag = {"loose": " --accuracy", "strict": " --strict-accuracy"}.get(accuracy, "")
    if first.kind == FailureKind.ACCURACY.value and not flag:
        flag = " --accuracy"
    verb = "minify" if first.graph is None else "bisect"
    return f"tcompile {verb}{flag} {command_args(command)}"


def _located(result: ProcessResult, located: ProcessResult) -> list[Failure]:
    """The graphs whose values a checked run finds wrong, for a program that failed
    outside any graph (its own check saw a wrong value): the failure is theirs."""
    failures = [f for f in collect(located)[1] if f.kind == FailureKind.ACCURACY.value]
    for f in failures:
        f.message += (
            f"\n(the program failed outside any graph: {faithful.outcome(result)}; "
            "a run with the accuracy check found this graph's values wrong)"
        )
    return failures


def _not_a_compiler_bug(
    result: ProcessResult, plain: ProcessResult, failures: list[Failure]
) -> str:
    """Why it is not a compiler bug, in eager's own words (Dynamo's wrapping of the same
    error says less) and at the program's own line that raised it (cause.py)."""
    first = dying_exception(plain) or dying_exception(result)
    said = str(first.get("message") or first["signature_text"]) if first else ""
    what = (
        said.splitlines()[0][:300]
        if first
        else ("timeout" if result.timed_out else f"exit status {result.returncode}")
    )
    cause = Cause.from_json(first.get("cause")) if first else None
    if cause is not None and cause.frame:
        path, _, rest = cause.frame.rpartition(":")
        what += f", raised at {os.path.basename(path)}:{rest}"
    hung = [f for f in failures if f.kind == FailureKind.TIMEOUT.value and f.rank is not None]
    if hung:  # a distributed job that hung: where each rank waited
        what += ": " + "; ".join(f"rank {f.rank} waiting at {f.frame}" for f in hung)
    said = f"the command fails the same way without torch.compile ({what}): not a compiler bug"
    crash = next((f for f in failures if f.kind == FailureKind.CRASH.value), None)
    if crash is not None and died_where_it_raised(result, plain):
        # the difference compiled code makes: it dies where eager raises (a kernel's
        # C++ throw aborts the process) -- named, with its own words (issue 59)
        graph = f" in graph {crash.graph} ({crash.graph_kind})" if crash.graph is not None else ""
        said += (
            f"; under torch.compile the process died{graph} at that call instead "
            f"({crash.signature.exc_type}: {crash.message.splitlines()[0][:300]})"
        )
    return said


def _graphless_failure(
    result: ProcessResult,
    graphs: list[dict[str, Any]],
    stage: str | None,
    notes: list[dict[str, Any]],
) -> Failure:
    """The program died of an exception outside any compiled graph, and does not
    without torch.compile (e.g. reading a CUDA-graph output that a later replay
    overwrote): a runtime failure of the stage the program compiled with."""
    first = dying_exception(result)
    sig = (
        FailureSignature.from_json(first["signature"])
        if first
        else FailureSignature(
            stage="unknown",
            kind="runtime",
            exc_type=f"exit status {result.returncode}",
            message="",
        )
    )
    stages = {g["stage"] for g in graphs if g.get("level") == "dynamo" and not g["gated"]}
    program_stage = stages.pop() if len(stages) == 1 else "unknown"
    sig = dataclasses.replace(sig, stage=stage or program_stage, kind=FailureKind.RUNTIME.value)
    message = first["message"] if first else "\n".join(result.stderr_tail[-5:])
    raised = ranks_that_raised(result)
    if first is not None and raised:  # a launched job: which ranks raised
        others = [r for r in raised if r != first.get("rank")]
        message += f"\n(raised on rank {first.get('rank')} first" + (
            f"; ranks {', '.join(map(str, others))} raised too)" if others else "; no other rank)"
        )
    # graphs whose results differ from eager without being wrong (more precise): the
    # program may be comparing with eager; name them
    precise = [n for n in notes if n.get("tag") == MORE_PRECISE]
    for n in precise:
        message += f"\n(outside any graph; graph {n['graph']}: {n['text']})"
    return Failure(
        graph=None,
        graph_kind="dynamo",
        signature=sig,
        message=message,
        frame=sig.frame,
        ranks_raised=raised or None,
        more_precise=[{"graph": n["graph"], "text": n["text"]} for n in precise] or None,
        **(dist_of(first) if first else {}),
    )


def _gather_records(
    result: ProcessResult, run_dir: str, failures: list[Failure]
) -> list[dict[str, Any]]:
    """Move the records the processes wrote to RUN_DIR/record.pkl, record-2.pkl, ...
    and point the failures at their new paths."""
    records: list[dict[str, Any]] = []
    moved: dict[str, str] = {}
    for e in result.events:
        if e.get("event") != Event.RECORD or not os.path.exists(str(e.get("path"))):
            continue
        n = len(records) + 1
        dest = os.path.join(run_dir, layout.record_name(n))
        os.replace(e["path"], dest)
        moved[e["path"]] = dest
        records.append(
            {"path": dest, "function": e.get("function"), "signature": e.get("signature_text")}
        )
    for f in failures:
        if f.record:
            f.record = moved.get(f.record, f.record)
    return records


def captures_dir(run_dir: str) -> str:
    """Where a run saves its failing graphs (HookConfig.capture)."""
    return os.path.join(run_dir, layout.CAPTURES)


def base_counts(report: RunReport) -> dict[str, list[str]]:
    """Applications of inductor's subsystems in the compiled run of ``report``."""
    return last_counts(read_events(os.path.join(report.run_dir, layout.COMPILED)))

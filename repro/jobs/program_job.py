"""Program-level minify (DESIGN.md mechanism 12): when no single graph holds the
failure, shrink the user's program itself to a repro in user-level PyTorch.

The oracle (compiler/program.py) runs each candidate fresh the way the program runs
and keeps it when it fails the same way and does not fail without torch.compile (or
with ``backend="eager"`` when the failure is below Dynamo).  The search is the source
engine on the whole module (minifier/source.py, program_passes.py), candidates judged
``--jobs`` at a time.  The best program so far is kept in ``best.py`` and survives an
interrupt.  repro.py is that program with a two-line harness: an uncaught exception
prints ``REPRODUCED: ...`` (exit 1), a run to the end prints ``NOT REPRODUCED`` (exit
0); it is verified in a fresh interpreter that cannot import tcompile, and with
torch.compile disabled it must not reproduce.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.compiler import layout
from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.observer import Observer
from tcompile.compiler.program import (
    ProgramOracle,
    ProgramTarget,
)
from tcompile.compiler.runner import write_json
from tcompile.repro.program_files import inline_modules, program_files
from tcompile.repro.program_harness import accuracy_check
from tcompile.repro.project import Entry, data_files, entry_of
from tcompile.repro.verify import verify_program_repro, why_not_verified

from .minify_types import ProgramMinifyReport, ProgramSummary
from .program_baseline import OPENED, NotMinifiable, ProgramRun
from .program_baseline import baseline as run_baseline
from .program_output import carried, files_for, repro_text, write_repro

if TYPE_CHECKING:
    from tcompile.compiler.forkserver import ForkPool

MAX_CALLS = 400  # candidate programs judged at most
MAX_TIME = 300.0  # seconds of the program level, by default (--max-time; 0: no limit)
CALLS_PER_LINE = 4  # ... or this many per non-blank line of a longer program
FALLBACKS = 3  # earlier programs verified when the smallest does not reproduce


def default_jobs() -> int:
    """Candidates judged at once when ``--jobs`` is not given: the cores, up to 4 (each
    candidate is a forked copy of a warm interpreter; inductor's C++ compiles of one
    candidate mostly use one core)."""
    return max(1, min(4, os.cpu_count() or 1))


def nonblank(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


@dataclasses.dataclass
class ProgramOptions:
    """What a program-level minify is asked (minify_program's options, typed once)."""

    backend: str | None
    jobs: int
    timeout: float | None
    observer: Observer
    t0: float  # the minify's start (a graph's minify may precede the program level)
    include: list[str] | None = None
    reason: str = ""  # why the program level: said in the report's message
    accuracy: str = "off"
    keep: list[frozenset[str]] | None = None
    prelude: str = ""
    first: bool = False
    max_time: float | None = None


def minify_program(command: list[str], run_dir: Path, o: ProgramOptions) -> ProgramMinifyReport:
    """``o``'s fields: ``accuracy``: candidates run with that check (``--level program``: the check of
    each compiled call, program_harness.accuracy_check); ``keep``: anchors, the names each
    source line of the minimal graph calls (the engine never judges a candidate that
    lost one: source_case.Hints); ``prelude``: text each candidate and repro.py run
    first, never minified (program_harness.py: the check of a wrong value); ``first``:
    no earlier run saw the failure (``--level program``): a program that runs to the
    end is run again with each compiled call checked, and one that passes that too is
    clean (exit 0).  ``max_time``: seconds of the program level (from its start) after
    which the search stops and the best program so far is verified (None: MAX_TIME;
    0: no limit)."""
    backend, jobs, timeout, observer, t0 = o.backend, o.jobs, o.timeout, o.observer, o.t0
    include, reason, accuracy, keep = o.include, o.reason, o.accuracy, o.keep
    prelude, first, max_time = o.prelude, o.first, o.max_time
    began = time.monotonic()  # the program level's own start (a graph's minify may precede)
    if first and accuracy != AccuracyMode.OFF and not prelude:
        prelude, accuracy = accuracy_check(strict=accuracy == AccuracyMode.STRICT), "off"
    entry, source, roots, includes = program_source(command, include)
    script, argv, distributed = entry.script, entry.argv, entry.distributed
    run = ProgramRun(
        command, script, argv, run_dir, backend, timeout, observer, accuracy, prelude, jobs,
        root=roots[0],
    )  # fmt: skip
    work = run_dir / "program"
    work.mkdir(parents=True, exist_ok=True)
    observer.status(
        "minifying the program itself"
        + (f" ({reason})" if reason else "")
        + ": running it once more to pin the failure down"
    )
    # the fork servers import torch while the baselines run (they need nothing of them)
    pool = _start_pool(jobs)
    baseline = _pinned(run, source, work, first, t0)
    if isinstance(baseline, ProgramMinifyReport):
        _close_pool(pool)
        return baseline
    target, seconds = baseline
    run.files = data_files(work / OPENED, entry, exclude=run_dir)
    run.entry = entry
    if run.files:
        names = ", ".join(rel for _, rel in run.files)
        observer.status(f"it reads {names}: repro.py carries them (a folder)")
    write_json(
        run_dir / layout.TARGET,  # the oracle's target, for benchmarks/program_oracle.py
        {**dataclasses.asdict(target), "script_name": script.name},
    )
    oracle = ProgramOracle(target, work, script.name, argv)
    run.reads = oracle.reads  # the files each candidate opened: what its repro carries
    forked = _fork(oracle, source, pool, observer)
    deadline = _deadline(began, MAX_TIME if max_time is None else max_time, seconds)
    searched = _search(run, oracle, target, source, keep, deadline)
    history, passes, interrupted = searched.history, searched.passes, searched.interrupted
    timed_out = deadline is not None and time.monotonic() > deadline and not interrupted
    report = _finish(run, target, source, searched, t0, seconds, oracle.runs)
    # a pass that raised (tcompile's bug) was skipped, the search went on: said, not hidden
    errors = [h for h in history if h.startswith("pass ") and "(tcompile's bug)" in h]
    assert report.program is not None  # _finish filled it
    if timed_out:
        limit = MAX_TIME if max_time is None else max_time
        report.message += (
            f" (the search stopped at --max-time {limit:g} s: the best program so far; "
            "--max-time 0 searches on)"
        )
    report.program.update(
        stopped_at_time=timed_out,
        runs=oracle.runs,
        candidates=report.calls,
        single_process=distributed and target.one_process,
        launcher=target.launcher,
        includes=[str(p) for p in includes],
        module=entry.module,
        forked=forked,
        observations=oracle.observations,
        passes=passes,
        pass_errors=errors,
    )
    for e in errors:
        observer.status(f"warning: {e}; the other passes went on")
    write_json(run_dir / layout.MINIFY, report.to_json())
    return report


def _pinned(
    run: ProgramRun, source: str, work: Path, first: bool, t0: float
) -> tuple[ProgramTarget, float] | ProgramMinifyReport:
    """The baseline's target and seconds per run; or the report that ends the minify
    here (no failure, not the compiler's, flaky)."""
    observer, run_dir = run.observer, run.run_dir
    baseline = run_baseline(run, source, work)
    if baseline is None and first and not run.prelude:
        # a wrong value raises nothing: the same program, each compiled call checked
        observer.status(
            "the program runs to the end: once more, each torch.compile'd call checked "
            "against eager"
        )
        run.prelude = accuracy_check()
        baseline = run_baseline(run, source, work)
    if baseline is None and first:
        shutil.rmtree(run_dir, ignore_errors=True)  # nothing to report: leave no files
        return ProgramMinifyReport(
            ExitCode.OK,
            "no compiler failure: the program runs to the end, and its torch.compile'd "
            "calls agree with eager: nothing to minify",
            seconds=time.monotonic() - t0,
            level="program",
        )
    if isinstance(baseline, NotMinifiable):
        return _report(run, baseline.exit_code, baseline.message, t0)
    if baseline is None:  # it failed under tcompile (run or bisect) and not again here
        return _report(
            run,
            ExitCode.FLAKY,
            "the failure did not show again when the program ran on its own: a flaky "
            "failure, nothing to minify",
            t0,
        )
    return baseline


def program_source(
    command: list[str], include: list[str] | None
) -> tuple[Entry, str, list[Path], list[Path]]:
    """The program a command runs (repro/project.py), its source with its own modules
    pasted in (program_files.py), its roots, the modules pasted."""
    entry = entry_of(command)
    source = entry.script.read_text()
    roots = list(entry.roots)
    includes = program_files(entry.script, include, roots, entry.module, entry.project)[1:]
    if includes:
        source = inline_modules(source, includes, roots=roots, current=entry.module)
    return entry, source, roots, includes


@dataclasses.dataclass
class Searched:
    """What the engine found on the program: the best program, the candidates judged,
    the history, what each pass spent, whether it was interrupted, and each smaller
    program found on the way (the fallbacks of a repro that does not verify)."""

    best: str
    calls: int
    history: list[str]
    passes: dict[str, Any]
    interrupted: bool
    found: list[str]


def _search(
    run: ProgramRun,
    oracle: ProgramOracle,
    target: ProgramTarget,
    source: str,
    keep: list[frozenset[str]] | None,
    deadline: float | None = None,
) -> Searched:
    """The engine on the program: what it found (Searched)."""
    run_dir, observer, jobs = run.run_dir, run.observer, run.jobs
    stop = threading.Event()
    best_path = run_dir / layout.BEST_PROGRAM

    found: list[str] = []  # each smaller program found, in order (the fallbacks)

    judged = [0]

    def progress(best: str, calls: int) -> None:
        found.append(best)
        judged[0] = calls
        layout.write_file(best_path, best)
        observer.status(  # the engine's count: the one said in the summary and --json
            f"{best.strip().count(chr(10)) + 1} lines after {calls} candidate(s)"
        )

    from tcompile.minifier.source import Hints, minify_source

    interrupted = False
    try:
        result = minify_source(
            source,
            None,
            oracle,
            hints=Hints(
                keep=list(keep or []), raising=target.failure.line, observe=_observer(oracle)
            ),
            max_calls=max(MAX_CALLS, CALLS_PER_LINE * nonblank(source)),
            jobs=jobs,
            stop=lambda: stop.is_set() or (deadline is not None and time.monotonic() > deadline),
            progress_cb=progress,
        )
        best, history = result.source, result.history
        calls, passes = result.calls, result.passes
    except KeyboardInterrupt:
        interrupted = True
        best = best_path.read_text() if best_path.exists() else source
        # the candidates the engine judged: the oracle's, less its instrumented runs
        # and the fork's check
        calls = max(judged[0], oracle.candidates - oracle.observations - 1)
        history, passes = [], {}
    finally:
        if oracle.fork is not None:
            oracle.fork.close()
    return Searched(best, calls, history, passes, interrupted, found)


def _deadline(t0: float, max_time: float, seconds: float) -> float | None:
    """When the search stops: ``max_time`` after the start, less what verifying the
    repro takes (about two fresh runs of the original program, side by side); None: no
    limit."""
    if not max_time:
        return None
    return t0 + max_time - min(max_time / 3, 10.0 + 1.5 * seconds)


def _observer(oracle: ProgramOracle) -> Callable[[str], dict[str, Any] | None]:
    """What one run of a candidate shows about its driver code (minifier/observe.py),
    one instrumented run per candidate: the passes of one round share it."""
    from tcompile.minifier.observe import instrument

    cache: dict[str, dict[str, Any] | None] = {}

    def observe(source: str) -> dict[str, Any] | None:
        if source not in cache:
            if len(cache) > 8:
                cache.clear()
            cache[source] = oracle.observe(lambda path: instrument(source, path))
        return cache[source]

    return observe


def _start_pool(jobs: int) -> Future[ForkPool] | None:
    """``jobs`` fork servers, started in the background (None: TCOMPILE_NO_FORK=1)."""
    if os.environ.get("TCOMPILE_NO_FORK") == "1":
        return None
    from tcompile.compiler.forkserver import ForkPool

    ex = ThreadPoolExecutor(1)
    try:
        return ex.submit(ForkPool, jobs)
    finally:
        ex.shutdown(wait=False)  # at once: the servers go on starting


def _close_pool(pool: Future[ForkPool] | None) -> None:
    try:
        if pool is not None:
            pool.result().close()
    except (RuntimeError, OSError):
        pass


def _fork(
    oracle: ProgramOracle, source: str, pool: Future[ForkPool] | None, observer: Observer
) -> bool:
    """Candidates forked from a server that imported torch already (compiler/
    forkserver.py), when the original program, run that way, still fails as the fresh
    baseline did (one candidate run); else fresh processes.  TCOMPILE_NO_FORK=1: never."""
    if pool is None or oracle.target.launcher:
        _close_pool(pool)  # a launched job's runs: not forked (its launcher starts them)
        return False
    try:
        oracle.fork = pool.result()
    except (RuntimeError, OSError):
        return False
    from tcompile.minifier.verdict import Verdict

    if oracle(source) is not Verdict.SAME_FAILURE:
        observer.status("a forked run of the program does not fail as a fresh one: fresh runs")
        oracle.fork.close()
        oracle.fork = None
        return False
    return True


def _finish(
    run: ProgramRun,
    target: ProgramTarget,
    source: str,
    searched: Searched,
    t0: float,
    seconds: float,
    run_count: int = 0,
) -> ProgramMinifyReport:
    """repro.py from the best program, verified (unless interrupted), and the report.

    A repro that does not reproduce in its fresh interpreter most often fails for some
    random values only (a shape cut to one element: a wrong value within tolerance for
    half the draws); the programs found before it (``earlier``, the last first, at most
    FALLBACKS) are verified in turn, and the first that reproduces is the repro."""
    lines_before = source.strip().count("\n") + 1
    observer = run.observer
    best, calls, history = searched.best, searched.calls, searched.history
    interrupted, earlier = searched.interrupted, searched.found
    verified, said, back = False, "", 0
    tries = [best] + [b for b in reversed(earlier or []) if b != best][:FALLBACKS]
    for back, program in enumerate(tries):
        text = repro_text(program, target, run)
        repro = write_repro(run, text, program)
        if interrupted:
            break
        observer.status(
            "verifying repro.py in a fresh interpreter (and with torch.compile off)"
            if back == 0
            else f"repro.py did not reproduce: verifying the program found before it ({back})"
        )
        try:
            verified, said = verify_program_repro(
                repro,
                target.failure,
                target.timeout * 2,
                parallel=run.jobs > 1,
                launcher=target.launcher,
                folder=repro.parent if files_for(run, program) else None,
            )
        except KeyboardInterrupt:  # during the verification: the repro stands, unverified
            interrupted = True
        if verified or interrupted or _not_the_program(said):
            break
    if not verified and not interrupted and back:  # none did: the smallest stands
        text = repro_text(best, target, run)
        repro = write_repro(run, text, best)
        back, program = 0, best
    best = program
    lines = text.strip().count("\n") + 1
    message = (
        f"the program minified from {lines_before} to {best.strip().count(chr(10)) + 1} lines "
        f"in {calls} candidates ({run_count} runs of the program, with their controls); "
        f"repro.py ({lines} lines) "
        + (
            "verified"
            if verified
            else "NOT verified"
            + ("" if interrupted and not said else f": {why_not_verified(said)}")
        )
        + (
            f" (the program found {back} step(s) before the smallest: the smallest did not "
            "reproduce in a fresh interpreter)"
            if back
            else ""
        )
        + (" (interrupted: the best so far)" if interrupted else "")
    )
    report = _report(
        run,
        ExitCode.INTERRUPTED if interrupted else ExitCode.COMPILER_FAILURE,
        message,
        t0,
        repro=str(repro),
        verified=verified,
        calls=calls,
        signature=target.failure.text,
        repro_lines=lines,
        repro_bytes=len(text.encode()),
        repro_form="program",
        repro_output=said,
        not_verified=None if verified or (interrupted and not said) else why_not_verified(said),
        interrupted=interrupted,
        history=[{"step": h} for h in history],
        program=ProgramSummary(
            **{
                "lines_before": lines_before,
                "lines_after": best.strip().count("\n") + 1,
                "seconds_per_run": round(seconds, 2),
                "control": target.control,
                "fallback": back,
                **carried(run, best, repro, target),
            }
        ),
    )
    return report


def _not_the_program(said: str) -> bool:
    """The repro failed to reproduce for a reason no earlier (larger) program mends: a
    module it cannot import, arguments it does not take."""
    return any(
        w in said
        for w in ("ModuleNotFoundError", "ImportError", "unrecognized arguments", "usage: ")
    )


def _report(run: ProgramRun, code: int, message: str, t0: float, **kw: Any) -> ProgramMinifyReport:
    return ProgramMinifyReport(
        int(code), message, run_dir=str(run.run_dir), seconds=time.monotonic() - t0, **kw
    )

"""Judging a candidate *program* (DESIGN.md mechanism 12; the program-level minify).

When no single graph holds a failure -- CUDA graph trees failing on a sequence of
calls, Dynamo computing wrong results itself, a failure that needs an earlier compile
in the process, an error raised outside any graph -- the unit of minification is the
program.  A candidate is a smaller version of the user's script; it is judged by
running it fresh, the way the program ran (under tcompile's hooks, with the same
backend, mode, options and config: they are in its source, or in ``--backend``):

* it must fail with the same failure: the same kind and exception type, and the same
  normalised message or the same raising source line (a minifier shrinks the values
  an assertion's message shows, not the assertion);
* and it must not fail without torch.compile (or, for a failure below TorchDynamo,
  with ``backend="eager"``): a candidate that fails anyway is the minifier's bug.

Parent side: runs processes, imports no torch.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tcompile.minifier.verdict import Verdict

from . import layout
from .cause import Cause, compatible
from .collect import collect, dying_exception
from .protocol import STOP_EXIT, HookConfig
from .runner import ProcessResult, free_port, run_process
from .signature import FailureKind, FailureSignature

if TYPE_CHECKING:
    from collections.abc import Callable

    from .forkserver import ForkPool


@dataclasses.dataclass
class ProgramFailure:
    """A program run's failure as the program-level minify compares them."""

    kind: str  # runtime | compile | accuracy | crash | timeout | exception
    exc_type: str
    message: str  # normalised
    line: str = ""  # the program's own source line it was raised from
    text: str = ""  # as people read it (stage/kind: Type: message)
    # what was raised and where, in the program's file (cause.py): the same program run
    # with and without torch.compile compares causes, not messages
    cause: dict[str, Any] | None = None

    def signature(self) -> FailureSignature:
        """Its identity: ``same`` is FailureSignature's one rule, as the program dies."""
        return FailureSignature("program", self.kind, self.exc_type, self.message, line=self.line)

    def same(self, other: ProgramFailure | None) -> bool:
        """The same failure, as a program dies of it: the same cause -- the raised type
        below torch's wrappers, one the other's or a subclass of it (cause.py) -- and
        the same raising line of the program (or, where the line differs or is not
        known, the same normalised message); for a crash or a timeout, the same kind
        and signal.  Where either side recorded no cause, the signatures' rule."""
        if other is None:
            return False
        mine, theirs = Cause.from_json(self.cause), Cause.from_json(other.cause)
        fatal = ("crash", "timeout")
        if mine is None or theirs is None or self.kind in fatal or other.kind in fatal:
            return self.signature().matches(other.signature(), as_exception=True)
        if not compatible(mine, theirs):
            return False
        if self.line and self.line == other.line:
            return True
        return self.message == other.message and (bool(self.message) or not self.line)

    def same_cause(self, other: ProgramFailure | None) -> bool:
        """The same error from the same line of the same file, however torch worded it
        (only within one program file: candidates are other files)."""
        mine = Cause.from_json(self.cause)
        return other is not None and mine is not None and mine.same(Cause.from_json(other.cause))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProgramFailure:
        return cls(**{f.name: data.get(f.name, "") for f in dataclasses.fields(cls)})


def program_failure(result: ProcessResult) -> ProgramFailure | None:
    """How a run of a program failed (None: it did not).  A failure tcompile classified
    in a graph (compile, runtime, crash) counts first; else the exception the program
    died of, a signal, or a timeout."""
    _, failures, _ = collect(result)
    graph_failures = [
        f
        for f in failures
        if f.kind
        in (
            FailureKind.COMPILE.value,
            FailureKind.RUNTIME.value,
            FailureKind.CRASH.value,
            FailureKind.ACCURACY.value,  # only runs with the accuracy check have them
        )
    ]
    if graph_failures and all(f.kind == FailureKind.ACCURACY.value for f in graph_failures):
        # a wrong value tcompile's check saw, where the program died of its own
        # exception (its assertion on that value): the program's failure is what a repro
        # without tcompile's hooks shows (seen: a dtype check of the hooks' kept, the
        # program's assertion minified away, a repro that could not reproduce)
        if result.returncode not in (0, None, STOP_EXIT) and dying_exception(result):
            graph_failures = []
    if graph_failures:
        sig = graph_failures[0].signature
        died = _died_of(result, sig)
        return ProgramFailure(
            sig.kind, sig.exc_type, sig.message, died.get("line") or "", str(sig), died.get("cause")
        )
    if result.timed_out:
        return ProgramFailure("timeout", "Timeout", "", "", "timeout")
    if result.returncode in (0, None, STOP_EXIT):
        return None
    if result.returncode < 0:
        name = f"signal {-result.returncode}"
        return ProgramFailure("crash", name, "", "", f"crash: {name}")
    died = dying_exception(result)  # a launched job: its first rank's, not torchrun's
    if died is None:
        what = f"exit status {result.returncode}"
        return ProgramFailure("exception", what, "", "", what)
    sig = FailureSignature.from_json(died.get("signature") or {})
    kind = "capture" if died.get("dynamo") else "exception"
    return ProgramFailure(
        kind, sig.exc_type, sig.message, died.get("line") or "", str(sig), died.get("cause")
    )


def _died_of(result: ProcessResult, sig: FailureSignature) -> dict[str, Any]:
    """The exception the program died of, where it is the graph's failure ``sig`` (its
    type, below torch's wrappers): its raising line and cause; else nothing (a failure
    the program caught, then died of something else)."""
    if result.returncode in (0, None, STOP_EXIT):
        return {}
    died = dying_exception(result) or {}
    cause = Cause.from_json(died.get("cause"))
    want = sig.exc_type.rsplit(".", 1)[-1]
    if cause is None or want not in {t.rsplit(".", 1)[-1] for t in cause.types}:
        return {}
    return died


@dataclasses.dataclass
class ProgramTarget:
    """The failure a program-level minify keeps, and how candidates run."""

    failure: ProgramFailure
    stage: str | None  # --backend: every compile uses this stage
    control: str  # "disable": must pass without torch.compile; "eager": with backend eager
    timeout: float
    cwd: str  # where the program ran (relative paths in it resolve from here)
    script_dir: str  # imports of the program's own modules resolve from here
    # the source level of a wrong value: candidates run with the accuracy check
    accuracy: str = "off"
    # text every candidate runs first, never minified itself (repro/program_harness.py:
    # the check that turns a wrong value into an exception)
    prelude: str = ""
    # a launched job (torchrun): the launcher and its arguments every run keeps (the
    # script's path goes after them); or, where the failure shows in one process, no
    # launcher and the variables of a world of one (RANK, WORLD_SIZE, MASTER_ADDR, ...)
    launcher: list[str] | None = None
    one_process: bool = False
    script_file: str = ""  # the program's own path: each candidate's ``__file__``


def with_prelude(prelude: str, source: str, file: str = "") -> str:
    """A candidate as it runs: ``prelude`` first -- after the program's docstring and
    ``from __future__`` imports, which must stay first.  ``file``: the program's own
    path, as ``__file__``: a candidate runs from a folder of its own, and a program
    that finds its files from where it lives (``Path(__file__).parent / "configs"``)
    finds them there (repro.py carries them beside itself instead)."""
    if file:
        prelude = f"__file__ = {file!r}  # where the program lives (tcompile)\n" + prelude
    if not prelude:
        return source
    import ast

    try:
        body = ast.parse(source).body
    except SyntaxError:
        return prelude + source
    end = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            end = stmt.end_lineno or end
        elif not (i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            break
    lines = source.splitlines(keepends=True)
    return "".join(lines[:end]) + prelude + "".join(lines[end:])


class ProgramOracle:
    """Writes each candidate beside the others in a work folder and judges it (see the
    module docstring); thread-safe, so that candidates run in parallel."""

    def __init__(
        self, target: ProgramTarget, work: Path, script_name: str, argv: list[str] | None = None
    ) -> None:
        self.target = target
        self.work = work
        self.script_name = script_name
        self.argv = list(argv or [])
        self.runs = 0  # runs of the program: candidates and their control runs
        self.observations = 0  # runs of instrumented candidates (observe)
        # candidate programs run (judged, observed, the fork's check); the engine's own
        # count (``calls``) is the one said everywhere
        self.candidates = 0
        # the quickest run of a candidate that failed the same way: later candidates get
        # a few times that, not the original program's limit -- a candidate whose loop
        # no longer ends (a data loader shrunk to nothing under ``while step < n``)
        # would otherwise cost the whole limit each time
        self.quickest: float | None = None
        self._n = 0
        self.fork: ForkPool | None = None  # candidates forked (forkserver.py), not started
        # what each candidate that failed the same way opened, in its run and its control
        # run (child/opened.py): the files its repro carries
        self.reads: dict[str, Path] = {}
        import threading

        self._lock = threading.Lock()

    def _slot(self) -> Path:
        with self._lock:
            self._n += 1
            d = self.work / f"cand-{self._n:04d}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def run(self, path: Path, config: HookConfig) -> ProcessResult:
        """One run of a candidate file under the hooks (its output discarded)."""
        with self._lock:
            self.runs += 1
        if self.target.launcher:  # the job's own launcher, a free port each run
            return run_process(
                [*launch_on_free_port(self.target.launcher), str(path), *self.argv],
                config,
                timeout=self.limit(),
                stdout=_SINK,
                stderr=_SINK,
                cwd=self.target.cwd,
                extra_path=[self.target.script_dir],
            )
        if self.fork is not None:  # a launched job's one process too: its world's variables
            try:
                return self.fork.run(
                    str(path),
                    self.argv,
                    config,
                    timeout=self.limit(),
                    cwd=self.target.cwd,
                    extra_path=[self.target.script_dir],
                    extra_env=world_of_one() if self.target.one_process else None,
                )
            except RuntimeError:  # the server is gone: fresh processes from now on
                self.fork = None
        with open(os.devnull, "w") as sink:
            return run_process(
                [sys.executable, str(path), *self.argv],
                config,
                timeout=self.limit(),
                stdout=sink,
                stderr=sink,
                cwd=self.target.cwd,
                extra_path=[self.target.script_dir],
                extra_env=world_of_one() if self.target.one_process else None,
            )

    def limit(self) -> float:
        """A candidate run's time limit: the target's, or 4x the quickest run that failed
        the same way (at least 20 s), whichever is less."""
        if self.quickest is None:
            return self.target.timeout
        return min(self.target.timeout, max(20.0, 4 * self.quickest))

    def observe(self, instrumented: Callable[[str], str]) -> dict[str, Any] | None:
        """One run of an instrumented candidate (``instrumented(path)``: its text, which
        writes what the run showed to ``path`` as JSON; minifier/observe.py), under the
        candidates' hooks: the facts, or None where the run did not fail the same way
        (the instrumentation changed what it does) or wrote none."""
        import json

        d = self._slot()
        path = d / self.script_name
        facts = d / layout.OBSERVED
        t = self.target
        layout.write_file(path, with_prelude(t.prelude, instrumented(str(facts)), t.script_file))
        with self._lock:
            self.observations += 1
            self.candidates += 1
        got = program_failure(
            self.run(
                path,
                HookConfig(
                    dir=str(d / "compiled"), stage=t.stage, record="off", accuracy=t.accuracy
                ),
            )
        )
        if not t.failure.same(got) or not facts.is_file():
            return None
        try:
            data = json.loads(facts.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def __call__(self, source: str) -> Verdict:
        """Same failure, other failure, pass or invalid (it fails without the compiler)."""
        d = self._slot()
        path = d / self.script_name
        t = self.target
        layout.write_file(path, with_prelude(t.prelude, source, t.script_file))
        with self._lock:
            self.candidates += 1
        start = time.monotonic()
        got = program_failure(
            self.run(
                path,
                HookConfig(
                    dir=str(d / "compiled"),
                    stage=t.stage,
                    record="off",
                    accuracy=t.accuracy,
                    opened=str(d / layout.OPENED),
                ),  # fmt: skip
            )
        )
        took = time.monotonic() - start
        if got is None:
            return Verdict.PASS
        if not t.failure.same(got):
            return Verdict.OTHER_FAILURE
        reads = str(d / layout.OPENED)
        control = (
            HookConfig(dir=str(d / "plain"), disable=True, opened=reads)
            if t.control == "disable"
            else HookConfig(dir=str(d / "eager"), stage="eager", record="off", opened=reads)
        )
        if program_failure(self.run(path, control)) is not None:
            return Verdict.INVALID  # it fails anyway: not the compiler's failure
        with self._lock:
            self.quickest = took if self.quickest is None else min(self.quickest, took)
            self.reads[source] = d / layout.OPENED
        return Verdict.SAME_FAILURE


class _Sink:
    """Where a launched candidate's output goes: nowhere."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


_SINK: Any = _Sink()


def launch_on_free_port(launcher: list[str]) -> list[str]:
    """torchrun's arguments with a port of this run's own (``--master-port``): runs side
    by side, and a port a killed run left behind, never collide."""
    out = [a for a in launcher if not a.startswith(("--master-port", "--master_port"))]
    return [*out, f"--master-port={free_port()}"]


def world_of_one() -> dict[str, str]:
    """A launched job's variables for one process: rank 0 of a world of 1."""
    return {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }

"""The minify job's state and its outcome (the ``--json`` of ``tcompile minify``)."""

from __future__ import annotations

import dataclasses
import enum
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypedDict

from tcompile.compiler.observer import Observer
from tcompile.compiler.protocol import HookConfig
from tcompile.compiler.signature import FailureSignature

if TYPE_CHECKING:
    from tcompile.compiler.pool import WorkerPool
    from tcompile.repro.kernel_repro import KernelRepro


class After(str, enum.Enum):
    """``minify --after``: which graph is minified (a str enum: equal to its value)."""

    AUTO = "auto"  # where the failure shows (today: the Dynamo graph)
    DYNAMO = "dynamo"  # the Dynamo graph, judged against the eager Dynamo graph
    AOT = "aot"  # the AOT graph inductor was handed, compiled by compile_fx_inner


class Level(str, enum.Enum):
    """``minify --level``: what is shrunk (a str enum: equal to its value).  Not the
    form of a graph (``dynamo`` or ``aot``: ``After``, ServeSpec.level), nor the kind
    of repro a report holds (``MinifyReport.level``)."""

    AUTO = "auto"  # the failing graph, or the program when no single graph holds it
    GRAPH = "graph"  # the failing graph only
    PROGRAM = "program"  # the program's own source
    SOURCE = "source"  # the graph, then the program shrunk around its source lines


# The sub-records of minify's --json, typed: each kind of minify fills its own (the
# others stay None).  TypedDicts are dicts at run time: the JSON is unchanged.


class InputsSummary(TypedDict):
    """``inputs``: the minimal graph's inputs, shrunk (repro/shrink.py)."""

    numel_before: int
    numel_after: int
    values: str  # random | inline | sidecar
    calls: int
    seconds: float
    steps: list[str]


class CaptureSummary(TypedDict):
    """``capture``: a capture failure's frame function, minified (capture_job.py)."""

    entry: str
    where: str  # file:line of the function
    lines_before: int
    function_lines: int
    oracle_calls: int
    history: list[str]
    source_from: str  # file, or decompiled bytecode (the file gone or changed)


class SourceLine(TypedDict):
    """A user's source line the minimal graph's nodes came from (source_level.user_lines)."""

    file: str
    line: int
    code: str
    ops: list[str]  # the ops of the nodes that came from it


class Seeds(TypedDict):
    """``switches.seeds``: the smallest set of switches checked on two other draws of
    the inputs (minify_graph.seeds_agree)."""

    draws: int
    failure_shows: int
    fixed: int
    said: str


class Switches(TypedDict):
    """``switches``: an accuracy failure's numerics switches, each judged by a worker
    (minify_graph.numerics_of); each as ``key=value``."""

    tried: list[str]
    # the minimal graph with every switch at once, judged first: "same_failure" (then
    # none is judged alone: a miscompile), "pass", another verdict; None: one switch
    at_once: str | None
    passes_with: list[dict[str, str]]  # {"switch": "key=value", "means": what it does}
    smallest: list[str]
    seeds: Seeds | None
    verdict: str


class Numerics(TypedDict):
    """An accuracy failure's report fields (minify_graph.numerics_of)."""

    # the first wrong value in the "minimal" and the "full" graph, as the worker found
    # it (child/numerics.py: node, op, source line, kernel)
    divergence: dict[str, dict[str, Any]]
    switches: Switches


class ProgramSummary(TypedDict, total=False):
    """``program``: the program level (program_job.py); the second group is added
    once the search ends."""

    lines_before: int
    lines_after: int
    seconds_per_run: float
    control: str
    fallback: int
    runs: int
    single_process: bool
    launcher: list[str] | None
    includes: list[str]
    forked: bool
    observations: int
    passes: dict[str, Any]
    pass_errors: list[str]
    module: str  # ``-m pkg.mod``: the module it ran as ("" for a script)
    files: list[str]  # data files carried beside repro.py (its folder), as placed there
    repro_dir: str | None  # repro.py's folder when it carries files (else None)
    command: str  # how to run the repro (``cd DIR && python repro.py``)
    installed: dict[str, str]  # installed packages the repro imports, with versions
    candidates: int  # candidate programs judged: the one count (progress, summary, calls)
    stopped_at_time: bool  # the search stopped at --max-time (the best so far stands)


class SourceSummary(ProgramSummary, total=False):
    """``source``: ``--level source``, the user-level repro made from the program
    (source_level.py): its own fields and the program level's; or only ``error``."""

    repro: str | None
    verified: bool
    repro_lines: int | None
    calls: int
    seconds: float
    message: str
    error: str


# The minify reports, one type per kind of minify.  Every kind writes every field of
# the --json contract (JSON_FIELDS, in this order): a field a kind has no use for is
# written as its default, as when one record held them all.  A kind's own fields are
# on its own type, so what each minify fills is read from the types, not the writers.


@dataclasses.dataclass
class MinifyReport:
    """What every minify says, and all that a minify which found nothing to do says
    (no compiler failure, not a compiler bug, a failure outside any graph)."""

    exit_code: int
    message: str
    seconds: float = 0.0
    signature: str | FailureSignature | None = None
    run_dir: str | None = None
    interrupted: bool = False
    # what was minified: a graph (dynamo/aot), a capture failure's function, the
    # program (program_job.py); "source": a graph, then a user-level repro from it
    level: str = "graph"
    report: str | None = None  # --report: report.md
    # where the failure was tied: its graph (also for the program level, when that
    # graph passed alone), the stage that shows it, and the graph's kind
    graph: int | None = None
    graph_kind: str | None = None
    stage: str | None = None
    launcher: str | None = None  # minifier_launcher.py, to minify again without the program
    # the repro, once written
    repro: str | None = None
    verified: bool = False
    eager_passes: bool | None = None
    repro_form: str | None = None  # short | long | capture | program
    repro_lines: int | None = None
    repro_bytes: int | None = None
    repro_output: str | None = None  # what the verified repro printed
    # a repro that did not verify: why, in one line, with what to do (verify.py)
    not_verified: str | None = None
    # the search: oracle calls, its steps, the workers that had to be restarted
    calls: int | None = None
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    worker_restarts: int = 0
    # the signature as its record (FailureSignature.to_json): what the repro and the
    # program level compare; ``signature`` is its text.  Given the record as
    # ``signature``, the report keeps both
    signature_fields: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.signature, FailureSignature):
            self.signature_fields = self.signature.to_json()
            self.signature = str(self.signature)

    def failure_signature(self) -> FailureSignature | None:
        """The signature as its record (None: the report has none)."""
        return FailureSignature.from_json(self.signature_fields) if self.signature_fields else None

    def to_json(self) -> dict[str, Any]:
        mine = dataclasses.asdict(self)
        return {k: mine[k] if k in mine else _default(k) for k in JSON_FIELDS} | mine


@dataclasses.dataclass
class GraphMinifyReport(MinifyReport):
    """A graph minified (minify_graph.py; one rank's graph: dist_minify.py; with the
    user-level repro beside it: source_level.py)."""

    nodes_before: int | None = None
    nodes_after: int | None = None
    after: str = "dynamo"
    # the graph search, per pass: oracle calls, candidates kept, seconds
    passes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    real_inputs: bool = False
    sidecar: bool = False  # real input values too large to embed, beside the repro
    kernel: str | None = None  # inductor's generated code for the minimal graph
    inputs: InputsSummary | None = None  # input shrinking: numel before/after, calls, seconds
    ops: list[str] | None = None  # the ops of the minimal graph (its culprit, for one node)
    device: str | None = None  # where the repro's tensors live
    pinned_choice: str | None = None  # the autotune choice the repro compiles with alone
    # the long form with real inputs, for comparison (artifacts.Artifacts.before)
    repro_before: dict[str, int | bool] | None = None
    rank: int | None = None  # a distributed job: the rank whose graph was minified
    # a graph with collectives: the inputs that add back what the other ranks sent in
    # the job (compiler/collectives.py), e.g. ["from_other_ranks_0"]; [] none needed;
    # None: nothing replayed (no collectives, or none recorded: a status line says why)
    replayed_collectives: list[str] | None = None
    # the graph failed in the program but passes alone (the failure needs what ran before)
    alone_passes: bool = False
    # an accuracy failure: the first node whose values go wrong, in the full and the
    # minimal graph (node, op, source line, kernel), and which numerics switch fixes it
    divergence: dict[str, dict[str, Any]] | None = None
    switches: Switches | None = None
    # CUDA: the one Triton kernel that writes the wrong value, launched alone
    # (kernel_repro.py beside repro.py: path, kernel, output, verified; or error)
    kernel_repro: KernelRepro | None = None
    # served from the graph a bisect's baseline saved: the program was not run again
    from_capture: bool = False
    # ... by the worker that bisect judged it in (report: no worker of its own started)
    worker_from_bisect: bool = False
    # seconds of each part (search, inputs, numerics, verify, kernel_repro); numerics
    # runs beside the verification, so the parts add up to more than the whole
    phases: dict[str, float] | None = None
    # the user's source lines the minimal graph's nodes came from (file, line, code, ops)
    source_lines: list[SourceLine] | None = None
    # --level source: the user-level repro made from the program (repro, verified,
    # repro_lines, calls, seconds, lines_before, lines_after, ...; or error)
    source: SourceSummary | None = None


@dataclasses.dataclass
class CaptureMinifyReport(MinifyReport):
    """A frame Dynamo could not capture, minified from its record (capture_job.py)."""

    record: str | None = None  # the frame's record, for `tcompile replay`
    capture: CaptureSummary | None = None  # the function minified


@dataclasses.dataclass
class ProgramMinifyReport(MinifyReport):
    """The program's own source minified (program_job.py)."""

    level: str = "program"
    program: ProgramSummary | None = None  # lines, runs, control


# the --json contract of `tcompile minify`: every field, in its order (add, never drop)
JSON_FIELDS = (
    "exit_code", "message", "repro", "launcher", "nodes_before", "nodes_after", "calls",
    "seconds", "signature", "verified", "eager_passes", "real_inputs", "graph", "graph_kind",
    "stage", "after", "run_dir", "interrupted", "worker_restarts", "history", "passes",
    "record", "repro_form", "repro_lines", "repro_bytes", "sidecar", "kernel", "inputs", "ops",
    "device", "repro_output", "pinned_choice", "report", "repro_before", "capture", "rank",
    "replayed_collectives", "level", "program", "alone_passes", "divergence", "switches",
    "kernel_repro", "source_lines", "source", "not_verified", "from_capture", "signature_fields",
    "worker_from_bisect", "phases",
)  # fmt: skip
KINDS = (MinifyReport, GraphMinifyReport, CaptureMinifyReport, ProgramMinifyReport)


def _default(name: str) -> object:
    """A field's value in a report of a kind that does not have it."""
    for kind in KINDS[1:]:
        for f in dataclasses.fields(kind):
            if f.name == name:
                if f.default_factory is not dataclasses.MISSING:
                    return f.default_factory()
                return f.default
    raise KeyError(name)


@dataclasses.dataclass
class MinifyOptions:
    """What ``tcompile minify`` was asked (its options, typed once): run_minify's
    keywords, passed down as one value."""

    after: str = "auto"
    accuracy: str = "off"
    backend: str | None = None
    graph: int | None = None
    match: str | None = None
    jobs: int = 1
    timeout: float | None = None
    real_inputs: bool = False
    out: str | None = None
    observer: Observer | None = None
    stdout: IO[str] | None = None
    stderr: IO[str] | None = None
    level: Level = Level.AUTO
    include: list[str] | None = None
    # the program level's candidates in parallel (None: ``jobs``); the CLI's default is
    # the cores, up to 4 (program_job.default_jobs)
    program_jobs: int | None = None
    # the program level stops its search at this many seconds from its start (None:
    # program_job.MAX_TIME; 0: no limit)
    max_time: float | None = None
    # the failing graph a bisect's baseline saved (capture_bisect.py): minified from
    # there, the program not run again (None: the program's own run finds it)
    capture: str | None = None

    def for_program(self) -> int:
        return self.program_jobs or self.jobs


class GraphJobArgs(TypedDict):
    """What every graph job of one ``tcompile minify`` shares (minify_job's ``common``:
    :class:`Job`'s fields)."""

    jobs: int
    timeout: float | None
    real_inputs: bool
    accuracy: str


class Streams(TypedDict):
    """Where the program's own output goes (RunOptions' keywords, from MinifyOptions)."""

    stdout: IO[str] | None
    stderr: IO[str] | None


class ProgramArgs(TypedDict):
    """The program level's options one ``tcompile minify`` fixes (minify_job's
    ``program``: program_job.ProgramOptions' fields)."""

    max_time: float | None
    backend: str | None
    jobs: int
    timeout: float | None
    observer: Observer
    t0: float
    include: list[str] | None


@dataclasses.dataclass
class Job:
    """One minification: what to run, where to write, how to report."""

    command: list[str]  # the program the workers run (or a launcher's worker)
    config: HookConfig  # the workers' hook config (with the serve spec)
    signature: FailureSignature
    graph: int
    graph_kind: str | None
    run_dir: Path
    jobs: int
    timeout: float | None
    real_inputs: bool
    accuracy: str
    observer: Observer
    t0: float
    write_launcher: bool = True
    command_for_repro: list[str] | None = None
    pool: WorkerPool | None = None  # a pool whose first worker already serves the graph
    message: str = ""  # the failure's unscrubbed text (an autotune choice: autotune.py)
    # the baseline's own localization of the full graph's failing call, where it is the
    # analysis a worker would make of it (minify_job.baseline_divergence): not made again
    known_full: dict[str, Any] | None = None
    from_capture: bool = False  # the graph a bisect's baseline saved (minify_job._from_capture)
    worker_from_bisect: bool = False  # ``pool`` is the bisect's, parked for it (report)

    def report(self, code: int, message: str, **kw: Any) -> GraphMinifyReport:
        if self.from_capture:  # said, not only a field (issue 61)
            message += " (from the graph the baseline saved: the program was not run again)"
        return GraphMinifyReport(
            int(code),
            message,
            signature=self.signature,
            run_dir=str(self.run_dir),
            graph=self.graph,
            from_capture=self.from_capture,
            worker_from_bisect=self.worker_from_bisect,
            seconds=time.monotonic() - self.t0,
            **kw,
        )

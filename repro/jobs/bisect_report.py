"""The report of ``tcompile bisect`` (bisection.py makes it): what the CLI renders,
``--json`` prints, report.md and ``--minify`` read.  Its fields are a public interface:
fields are only ever added."""

from __future__ import annotations

import dataclasses
from typing import IO, TYPE_CHECKING, Any, TypedDict

from tcompile.compiler.culprit import Culprit
from tcompile.compiler.exitcodes import ExitCode

if TYPE_CHECKING:
    from tcompile.compiler.observer import Observer


class MinifyNext(TypedDict, total=False):
    """What a job found, to minify next (``bisect --minify``, ``replay --minify``;
    minify_job.minify_next): a graph of the program, or a frame's record; as
    minify_types.MinifyOptions' keywords (report adds ``level`` and ``max_time``)."""

    graph: int
    backend: str | None  # the culprit stage, when it is not inductor
    capture: str  # the graph the bisect's baseline saved: minified from there
    record: str  # a frame Dynamo could not capture
    trust: bool  # ... a record this tcompile did not sign, run anyway
    level: str
    max_time: float


@dataclasses.dataclass
class BisectOptions:
    """What ``tcompile bisect`` is asked (its options, typed once; ``report`` asks the
    same of each failure it bisects)."""

    accuracy: str = "off"
    match: str | None = None  # the failure to explain (a regex of its signature)
    timeout: float | None = None
    jobs: int = 1
    out: str | None = None
    observer: Observer | None = None
    stdout: IO[str] | None = None
    stderr: IO[str] | None = None
    repeat: int | None = None  # runs a configuration gets before it counts as passing
    peers: str | None = None  # several nodes bisect one job together (peers.py)
    guided: bool = True  # the first divergent node's op guides the search (guided.py)
    whole_program: bool = False  # the program bisect, not the one on the capture
    confirm: bool | None = None  # the culprit confirmed on the whole program (None: short jobs)
    # the capture's worker kept for the minify that follows in this process (report)
    keep_worker: bool = False


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
    # TORCH_BISECT_* to run the program by hand: the culprit off (good), on (bad)
    good: dict[str, str] | None = None
    bad: dict[str, str] | None = None
    next_command: str | None = None
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    run_dir: str | None = None
    minify: dict[str, Any] | None = None
    record: str | None = None  # a capture failure's frame, for `tcompile replay`
    interrupted: bool = False  # stopped by Ctrl-C / SIGTERM: the narrowest answer so far
    candidates: list[str] | None = None  # interrupted: the culprit is one of these
    report: str | None = None  # --report: report.md
    repeat: int | None = None  # runs a configuration gets before it counts as passing
    rank: int | None = None  # a distributed job: the rank the culprit was found on
    # ... and its probes compiled on that rank alone (the others ran eagerly)
    rank_only: bool = False
    # an accuracy failure: the first node whose values go wrong, in the baseline run
    divergence: dict[str, Any] | None = None
    forked: dict[str, int] | None = None  # forked probes, and the check run (probe.py)
    command: list[str] | None = None  # the program's command (good/bad run it by hand)
    # an inductor pattern the failure's own text names (randperm_index_pattern,
    # _sfdp_replacement_28): the culprit in words where bisect names only a stage
    pattern: str | None = None
    # what the culprit application did in the baseline run: the change in inductor's
    # own counters (``{"fuse_attention": 2, "pattern_matcher_count": 2}``)
    effects: dict[str, int] | None = None
    # found on the graph the baseline saved (capture_bisect.py): its compiles, the
    # culprit's switch (the configuration that makes the program pass) and what the
    # whole program did with it; or why the program bisect ran instead
    from_capture: bool = False
    graph_judgements: int = 0
    switch: dict[str, Any] | None = None
    confirmed: str | None = None
    fallback: str | None = None
    capture: str | None = None  # the saved graph it was found on (minify starts there)
    # its first worker was a standby started with the baseline (compiler/standby.py)
    worker_from_standby: bool = False
    # the culprit as ``tcompile run --without``'s argument, for any program: does it
    # make another script's failure go away too?  (triage's membership check)
    without: str | None = None
    # later applications each enough for the failure: the graph passes only with all off
    # (capture_bisect.more_culprits): subsystem, application, detail each
    also: list[dict[str, Any]] | None = None
    # a toggle named instead of the application the search ended at, whose switch alone
    # made the graph fail another way (capture_bisect.toggle_instead): subsystem,
    # application, detail, and ``fails``: that other failure
    instead_of: dict[str, Any] | None = None
    # the culprit as one record (compiler/culprit.py): report and triage say the same
    culprit: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.exit_code != ExitCode.COMPILER_FAILURE:
            return
        if self.without is None:
            from tcompile.compiler.stack import without_of

            self.without = without_of(self.subsystem, self.detail)
        if self.culprit is None and (found := self.found()) is not None:
            self.culprit = found.to_json()

    def found(self) -> Culprit | None:
        """The culprit as its record (None: bisect named none)."""
        if self.exit_code != ExitCode.COMPILER_FAILURE:
            return None
        return Culprit.of_bisect(dataclasses.asdict(self))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def minify_args(self) -> MinifyNext | None:
        """``bisect --minify``: what to minify next (the culprit graph, compiled with the
        culprit stage when it is not inductor; or the record of a frame Dynamo could
        not capture), or None when there is nothing to."""
        if self.exit_code != ExitCode.COMPILER_FAILURE:
            return None
        if self.graph is None:  # a frame Dynamo could not capture: its record
            return {"record": self.record} if self.record else None
        backend = self.stage if self.stage != "inductor" else None
        args: MinifyNext = {"graph": self.graph, "backend": backend}
        if self.capture and backend is None:  # minified from the saved graph
            args["capture"] = self.capture
        return args


def where_found(
    stage: str, graph: int | None, graph_kind: str | None, found: dict[str, Any]
) -> str:
    """``stage inductor, graph 0 (forward), lowerings #3: sum_1``: a culprit in words."""
    from tcompile.compiler.stack import in_words

    where = f"stage {stage}" + in_words(stage)
    where += f", graph {graph} ({graph_kind})" if graph is not None else ""
    if found.get("subsystem"):
        where += f", {found['subsystem']}"
        where += f" #{found['application']}" if found.get("application") is not None else ""
        where += f": {found['detail']}" if found.get("detail") else ""
    return where


def turned(steps: list[dict[str, Any]], items: list[Any], found: dict[str, Any]) -> str:
    """The program bisect's culprit where the configuration below it (it and every later
    item off) failed another way: the search ended where this failure turns into that
    one, said with that failure (#193061's shape, seen on the capture); "" otherwise."""
    sub, app = found.get("subsystem"), found.get("application")
    at = [i for i, it in enumerate(items) if it.name == sub and it.index == app]
    if not at or sub == "config":
        return ""
    from tcompile.compiler.probe import enable_label

    below = enable_label(items, at[0])  # a retry's label adds " (try 2 of 3)"
    other = [s for s in steps if s.get("what", "").startswith(below) and s.get("other")]
    if not other:
        return ""
    return (
        f" (with it and every later item off the program fails another way: "
        f"{other[-1]['other']}; a switch's failure may be what ended the search)"
    )


def pattern_named(text: str | None) -> str | None:
    """The inductor pattern an error's text names: its function (``..._pattern``,
    ``_sfdp_pattern_2``, ``_sfdp_replacement_28``), the first one; None: none."""
    import re

    for m in re.finditer(r"\b(_?\w*?_(?:pattern|replacement)(?:_\d+)?)\b", text or ""):
        if not m.group(1).startswith("pass_pattern"):  # a PatternMatcherPass, not a pattern
            return m.group(1)
    return None


def culprit_effects(run_dir: str | None, found: dict[str, Any]) -> dict[str, int] | None:
    """What the culprit application did in the baseline's compiled run (its counters'
    change: child/subsystems.py); None where it changed none."""
    import os

    from tcompile.compiler import layout
    from tcompile.compiler.collect import last_effects
    from tcompile.compiler.protocol import read_events

    if not run_dir or found.get("application") is None or not found.get("subsystem"):
        return None
    events = read_events(os.path.join(run_dir, layout.COMPILED))
    did = last_effects(events).get(found["subsystem"], {}).get(str(found["application"]))
    return dict(did) if did else None


def effects_besides(did: dict[str, int] | None, pattern: str | None) -> dict[str, int]:
    """What an application did, less the count of the pattern already named beside it."""
    return {k: v for k, v in (did or {}).items() if k != f"pattern {pattern}"}


def effect_words(did: dict[str, int]) -> str:
    """``{"fuse_attention": 2, "pattern_matcher_count": 2}`` -> ``fuse_attention x2``:
    the counters that say what it did first, the pattern matcher's own counts only
    when nothing else does."""
    from tcompile.compiler.collect import GENERIC_COUNTERS, meaningful

    named = meaningful(did) or {k: v for k, v in did.items() if k in GENERIC_COUNTERS} or did
    return ", ".join(f"{k} x{v}" for k, v in sorted(named.items()))

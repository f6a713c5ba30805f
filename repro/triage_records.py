"""Triage's records (issue 60): a script's result, its steps and checks, a cluster.

Every module of triage reads and writes these, never a dict's string keys; the cache,
``--json`` (``triage.json``) and the pages are written from them by ``to_json``, and a
script's result and a check are read back from the cache by ``from_json``.  ``to_json``
keeps the words and the shape the JSON had (a field that was never set is left out, as
before); a key this tcompile does not know -- a cache written by a newer one -- is kept
in ``extra`` and written back, never lost.

What is not triage's own stays a document: the report's bug (``raw_bug``, the JSON of
``tcompile report``), the culprit (compiler/culprit.py's JSON, with ``kind`` and
``text``), the minimal graph's summary, the answers of ``--also`` interpreters.  Pure.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from .triage_verdict import TriageVerdict

Doc = dict[str, Any]  # a JSON document another command wrote (a report's bug, a culprit)


def _known(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} - {"extra"}


def _json(obj: Any) -> Any:
    """A record's fields as JSON, records inside too; a field a record leaves out while
    unset (``OMIT_NONE``: its names, or ``all`` for a script's result, whose fields
    come as triage goes) writes no None, as the dicts before the records did."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        omit = getattr(obj, "OMIT_NONE", ())
        out = {
            f.name: _json(getattr(obj, f.name))
            for f in dataclasses.fields(obj)
            if f.name != "extra"
            and not ((omit == "all" or f.name in omit) and getattr(obj, f.name) is None)
        }
        return {**out, **(getattr(obj, "extra", None) or {})}
    if isinstance(obj, list):
        return [_json(x) for x in obj]
    if isinstance(obj, TriageVerdict):
        return obj.value
    return obj


@dataclasses.dataclass
class Step:
    """One tcompile command a script's triage ran: ``exit_code`` None when it was cut
    at the script's budget (said, never read as an answer: issue 64)."""

    what: str
    exit_code: int | None
    seconds: float = 0.0

    @classmethod
    def from_json(cls, d: Doc) -> Step:
        return cls(str(d.get("what") or ""), d.get("exit_code"), float(d.get("seconds") or 0.0))

    @property
    def finished(self) -> bool:
        return self.exit_code is not None


@dataclasses.dataclass
class Flaky:
    """A failure that did not come back every time: ``failed`` of ``of`` runs (None
    where a bisect said so, with its ``detail``)."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ("detail",)

    failed: int | None
    of: int | None
    detail: str | None = None

    @classmethod
    def from_json(cls, d: Doc) -> Flaky:
        return cls(d.get("failed"), d.get("of"), d.get("detail"))


@dataclasses.dataclass
class Check:
    """A membership check (triage_one.check_one): the script with ``without`` off
    (``off``: its exit status) and as it is (``on``), at ``backend`` where the culprit's
    stage is below inductor; ``passes`` when it passed off and failed on.  ``rep``: the
    representative whose switch it was, once kept in a script's ``checks``."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ("rep", "capture_why")

    without: str
    backend: str | None = None
    off: int | None = None
    on: int | None = None
    passes: bool = False
    flaky: bool = False
    seconds: float = 0.0
    steps: list[Step] = dataclasses.field(default_factory=list)
    rep: str | None = None
    # answered on the failing graph the script's run saved, not by running it (issue 62)
    on_capture: bool = False
    capture_why: str | None = None  # why the capture gave no answer (then: by running)
    extra: Doc = dataclasses.field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Doc) -> Check:
        known = _known(cls)
        return cls(
            without=str(d.get("without") or ""),
            backend=d.get("backend"),
            off=d.get("off"),
            on=d.get("on"),
            passes=bool(d.get("passes")),
            flaky=bool(d.get("flaky")),
            seconds=float(d.get("seconds") or 0.0),
            steps=[Step.from_json(s) for s in d.get("steps") or []],
            rep=d.get("rep"),
            on_capture=bool(d.get("on_capture")),
            capture_why=d.get("capture_why"),
            extra={k: v for k, v in d.items() if k not in known},
        )

    @property
    def key(self) -> str:
        """What the check asked: the switch, at its stage where not inductor."""
        return f"{self.without}@{self.backend}" if self.backend else self.without

    def to_json(self) -> Doc:
        return _json(self)


@dataclasses.dataclass
class ScriptResult:
    """What triage knows of one script: its verdict and the steps that decided it; for a
    bug, what its run said (signature, kind, stage, device, the wrong node's op, the
    pattern its compile failed in), its report (culprit, minimal graph, repro) or the
    check that made it a member of a cluster."""

    OMIT_NONE: ClassVar[str] = "all"

    path: str = ""
    verdict: TriageVerdict | None = None
    message: str = ""
    seconds: float = 0.0
    steps: list[Step] = dataclasses.field(default_factory=list)
    runs: int | None = None
    flaky: Flaky | None = None
    traceback: str | None = None
    # what the script's run said of its failure (triage_one._from_run)
    signature: str | None = None
    kind: str | None = None
    stage: str | None = None
    exc_type: str | None = None
    graphs: int | None = None
    device: str | None = None
    wrong_op: str | None = None
    pattern: str | None = None
    # its run's folder (``run --capture``), where the failing graph was saved: the
    # report's baseline and the membership checks' graph (issue 62)
    baseline: str | None = None
    capture: str | None = None  # the failing graph it saved (None: not graph-tied, not saved)
    # its report: bisect and minify (triage_one.report_one)
    reported: bool | None = None
    raw_bug: Doc | None = None  # the report's bug, whole: culprit and minimal graph from it
    title: str | None = None
    bisect: Doc | None = None  # {"runs", "seconds"}
    minify: Doc | None = None  # {"calls", "seconds"}
    repro_text: str | None = None
    repro_lines: int | None = None
    repro_level: str | None = None
    repro_path: str | None = None
    no_repro: str | None = None  # why a bug has no verified repro
    culprit: Doc | None = None  # triage_cluster.culprit_of
    minimal: Doc | None = None  # triage_cluster.minimal_of
    repro: str | None = None  # the verified repro beside the pages (OUT/repros/)
    also: Doc | None = None  # the first --also interpreter's answer
    also_all: dict[str, Doc] | None = None  # each --also interpreter's answer
    # membership: a check against a representative's culprit (triage_loop.py)
    member_of: str | None = None
    joined: Doc | None = None  # the check (or the clusters' merge) that joined it
    same_as: str | None = None  # a representative whose culprit off explains it too
    checks: list[Check] | None = None
    cluster: str | None = None
    cluster_by_report: str | None = None  # its cluster before checks merged clusters
    cluster_repro: str | None = None  # a member's repro: its cluster's
    # the cache: what it was keyed on, and the budgets it ran under
    key: str | None = None
    cached: bool | None = None
    budgets: Doc | None = None
    ray_attempts: list[str] | None = None  # the Ray nodes its report was tried on
    extra: Doc = dataclasses.field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Doc) -> ScriptResult:
        known = _known(cls)
        fields = {k: v for k, v in d.items() if k in known}
        r = cls(**fields)
        r.extra = {k: v for k, v in d.items() if k not in known and k != "unfinished"}
        r.verdict = TriageVerdict(r.verdict) if r.verdict is not None else None
        r.seconds = float(r.seconds or 0.0)
        r.steps = [Step.from_json(s) for s in d.get("steps") or []]
        flaky = d.get("flaky")
        r.flaky = Flaky.from_json(flaky) if isinstance(flaky, dict) else flaky
        if d.get("checks") is not None:
            r.checks = [Check.from_json(c) for c in d["checks"]]
        return r

    def to_json(self, *, public: bool = False) -> Doc:
        """The result as JSON: the cache's whole; ``public``: as ``--json`` and the pages
        show it (no repro text nor raw report; the steps that did not finish named)."""
        out = _json(self)
        for k in ("verdict", "repro"):  # always said (--json's fields): null where none
            out.setdefault(k, None)
        if public:
            out.pop("repro_text", None)
            out.pop("raw_bug", None)
            out["unfinished"] = [s.what for s in self.steps if not s.finished]
        return out

    def add_steps(self, steps: list[Step]) -> None:
        self.steps = [*self.steps, *steps]


@dataclasses.dataclass
class Cluster:
    """One bug: the scripts that are it (``members``, paths), the representative whose
    report named the culprit, its verified repro or why there is none, and the checks
    that joined members or clusters (``checks``)."""

    id: str
    culprit: str | None
    kind: str | None
    stage: str | None
    ops: list[str]
    members: list[str]
    representative: str
    repro: str | None = None
    repro_lines: int | None = None
    verified: bool = False
    no_repro: str | None = None
    title: str | None = None
    checks: list[Doc] | None = None
    joined: Doc | None = None  # how this cluster joined another (triage_switch.merge)
    asked: int | None = None  # checks asked of it (triage_switch.merge)
    versions: list[Doc] | None = None  # its repro under each interpreter (--also)

    OMIT_NONE: ClassVar[str] = "all"

    def to_json(self) -> Doc:
        out = _json(self)
        for k in ("repro", "repro_lines", "no_repro", "title", "culprit", "kind", "stage"):
            out.setdefault(k, None)  # always said, as before: null where there is none
        return out

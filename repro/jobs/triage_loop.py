"""Bisect and minify once per cluster (issue 52): the scheduler of ``tcompile triage``.

Every script is run first (triage_one.classify_one: cheap, and it tells a bug from a
clean script, a user's bug or a flaky one).  A script that fails is then either

* **checked** against a cluster that has a culprit switch -- the setting its
  representative's bisect found (that lowering, pass, decomposition or toggle off:
  ``tcompile run --without``): it joins when it passes with the switch off and fails
  again as it is (triage_one.check_one: two runs, no bisect of its own); or
* **reported** (bisect + minify, triage_one.report_one): it becomes a representative,
  and its culprit's switch is what the next scripts are checked with.

Proposals only order the checks (at most ``PER_SCRIPT`` per script): a representative
on the same device with a switch (never a whole pattern-matcher pass nor a stage: they
hold many bugs, triage_switch._whole_pass), most alike first -- the same stage, the
same failure kind, the switch's op named in the script or as its wrong node, the same
exception type.  A script that fails like a report under way (same device, stage,
kind, exception and wrong op) waits for it rather than start a second report of what
is probably the same bug; the cheapest script of a kind is reported first (the best
representative: its bisect and minify cost the least).

Event-driven on one pool (local threads, or Ray tasks): whenever a slot is free the
plan is made again from what is known, so a check that finishes early lets the next
script in at once.  ``each=True`` is the former way: every failing script its own
report (``--each``; benchmarks/triage_corpus.py measures both side by side).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

from tcompile.compiler import layout
from tcompile.compiler.observer import Observer
from tcompile.compiler.opname import op_base
from tcompile.compiler.runner import write_json
from tcompile.repro.triage_records import Check, Cluster, Flaky, ScriptResult
from tcompile.repro.triage_verdict import TriageVerdict as Verdict

from .triage_capture import capture_check_one
from .triage_one import check_one, classify_one, report_one
from .triage_switch import _whole_pass, without_of

PER_SCRIPT = 3  # checks of one script against clusters before it gets a report of its own


# Budgets: how long tcompile may work, not what it finds.  Never in a result's key
# (issue 62): a rerun with other budgets keeps what finished; a result a budget cut is
# tried again under a larger one (_stale).
BUDGETS = ("timeout", "max_time", "jobs", "per_gpu")


def stale(cached: ScriptResult, options: dict[str, Any]) -> bool:
    """A cached result its budget cut, now given a larger one: done again.  A
    ``timeout`` verdict, and a bug whose bisect and minify did not finish (a step with
    no exit status), under a larger ``--timeout`` (or ``--max-time``); anything that
    finished stands whatever the budgets."""
    ran = cached.budgets or {}
    larger = any(
        float(options.get(k) or 0) > float(ran.get(k) or 0) for k in ("timeout", "max_time")
    )
    cut = cached.verdict == Verdict.TIMEOUT or any(not st.finished for st in cached.steps)
    return cut and larger


def is_final(r: ScriptResult) -> bool:
    """Nothing left to do for this script: not a bug, or reported, or a member."""
    return r.verdict not in (None, Verdict.BUG) or bool(r.reported or r.member_of)


def _switch_op(off: str) -> str:
    """``lowerings:convert_element_type`` -> ``convert_element_type``;
    ``decomposition:aten.native_group_norm.default`` -> ``native_group_norm``; a lowering
    of one overload ``lowerings:slice_scatter_default`` -> ``slice_scatter`` (``copy__default``
    -> ``copy_``): opname.op_base."""
    return op_base(off.split(":", 1)[-1])


# how a program names an aten op a lowering switch turns off (a cast is ``.to``/``.float``)
_SPELLED = {
    "convert_element_type": ("to", "float", "half", "bfloat16", "double", "type_as", "_to_copy"),
    "_to_copy": ("to", "float", "half", "bfloat16", "double", "type_as"),
}


# lowerings checked as one (off together).  None: argmax and argmin are one arg-reduction
# in inductor (one make_reduction lowering, one codegen path; the tracker fixed its
# #193661 family for both, PR #195063), and checking them as one joined the dupes
# corpus's weak argmin member -- but on the main corpus it joined the int8 vectorized
# argmin bug (#191499, two scripts) to the transposed-argmax one (#193492): a lowering
# switch turns off the op's code generation too, so it cannot tell two bugs of one op
# apart.  Precision first: a member joins by the switch bisect found, not a wider one.
FAMILIES: list[tuple[str, ...]] = []


def family(off: str) -> str:
    """The switch a membership check turns off: the culprit's, and its family's where
    FAMILIES lists one (``lowerings:argmax`` -> ``lowerings:argmax lowerings:argmin``
    were that pair listed), space-separated."""
    sub, _, name = off.partition(":")
    for fam in FAMILIES if sub == "lowerings" else []:
        if name in fam:
            return " ".join(f"{sub}:{n}" for n in fam)
    return off


def _named(op: str, r: ScriptResult, text: str) -> bool:
    """The script names ``op`` (or one of its family): its wrong node's op, or a word of
    its source; a decomposition's op as a module is spelled too (``native_group_norm``:
    ``nn.GroupNorm``)."""
    fam = next((f for f in FAMILIES if op in f), (op,))
    names = tuple(n for o in fam for n in (o, *_SPELLED.get(o, ())))
    if r.wrong_op in names:
        return True
    if any(re.search(rf"\b{re.escape(n)}\b", text) for n in names if n):
        return True
    squeezed = re.sub(r"^_*(native_)?|_", "", op.lower())  # native_group_norm -> groupnorm
    return len(squeezed) > 4 and squeezed in text.lower().replace("_", "")


def _similar(r: ScriptResult) -> tuple[Any, ...]:
    """What two scripts that may be one bug share: a report under way for one makes the
    other wait for it (then it is checked against that report's culprit)."""
    return (r.device, r.stage, r.kind, r.exc_type)


def switch_stage(rep: ScriptResult) -> str | None:
    """The stage a representative's switch is checked at: its culprit's, where that is
    below inductor (None: inductor, the scripts' own)."""
    stage = (((rep.raw_bug or {}).get("bisect") or {}).get("stage")) or None
    return stage if stage and stage != "inductor" else None


def proposals(r: ScriptResult, reps: list[ScriptResult], text: str = "") -> list[str]:
    """The representatives (paths) to check ``r`` against, most alike first: only those
    that failed the same kind with the same exception, and a lowering switch only where
    the script names the op -- every lowering of ``add`` or ``sum`` off makes unrelated
    programs pass (an argmax bug of the dupes corpus; two bugs of the main corpus).
    A representative whose switch is one pattern (``pattern:NAME``) is proposed whatever
    the failure where the script's own bisect named that pattern, or its run's compile
    failed inside it: one pattern's reports crash one way and compute a wrong dtype
    another (fixtures/families/cumsum_*)."""
    scored = []
    for rep in reps:
        off = without_of(rep)
        if not off or _whole_pass(off) or rep.device != r.device:
            continue
        if rep.path == r.path:
            continue
        named = _named(_switch_op(off), r, text)
        alike = rep.kind == r.kind and rep.exc_type == r.exc_type
        mine = {without_of(r), f"pattern:{r.pattern}" if r.pattern else None}
        alike = alike or (off.startswith("pattern:") and off in mine)
        if not alike or (off.startswith("lowerings:") and not named):
            # another failure, or nothing ties the script to this lowering: on the main
            # corpus, every lowering of ``sum`` off made a C++ compile error and a uint8
            # wrong value pass, both bugs of their own (the switch breaks a fusion)
            continue
        scored.append((rep.stage != r.stage, rep.kind != r.kind, not named,
                       rep.exc_type != r.exc_type, rep.path))  # fmt: skip
    scored.sort()
    return [s[-1] for s in scored]


class Scheduler:
    """One triage's work: ``submit(fn, task, *args) -> Future`` runs it (engine),
    ``done(path, result)`` keeps a result (cache, progress)."""

    def __init__(
        self,
        tasks: dict[str, dict[str, Any]],
        results: dict[str, ScriptResult],
        *,
        submit: Callable[..., Future[Any]],
        done: Callable[..., None],
        slots: int,
        base: Path,
        each: bool = False,
        observer: Observer,
    ) -> None:
        self.tasks, self.results = tasks, results
        self.submit, self.done, self.slots = submit, done, max(1, slots)
        self.base, self.each, self.observer = base, each, observer
        self.tried: dict[str, set[str]] = {p: set() for p in tasks}
        self.inflight: dict[Future[Any], tuple[str, str, str | None]] = {}
        self.text: dict[str, str] = {}

    # -- what to do next ------------------------------------------------------------
    def _reps(self) -> list[ScriptResult]:
        return [r for r in self.results.values() if r.reported and r.verdict == Verdict.BUG]

    def _script_text(self, path: str) -> str:
        if path not in self.text:
            try:
                self.text[path] = Path(path).read_text(errors="replace")
            except OSError:
                self.text[path] = ""
        return self.text[path]

    def plan(self, free: int) -> list[tuple[str, str, str | None]]:
        busy = {p for _, p, _ in self.inflight.values()}
        out: list[tuple[str, str, str | None]] = []
        for p in self.tasks:  # every script is run first (cheap, in order)
            if p not in self.results and p not in busy and len(out) < free:
                out.append(("classify", p, None))
        waiting = sorted(
            (
                p
                for p, r in self.results.items()
                if p in self.tasks and not is_final(r) and p not in busy
            ),
            key=lambda p: (self.results[p].seconds, p),
        )
        reps = self._reps()
        rest = []
        for p in waiting:
            if len(out) >= free:
                break
            untried = self._untried(p, reps)
            if not self.each and untried and len(self.tried[p]) < PER_SCRIPT:
                out.append(("check", p, untried[0]))
            else:
                rest.append(p)
        reporting = [self.results[p] for kind, p, _ in self.inflight.values() if kind == "report"]
        under_way = {_similar(r) for r in reporting}
        spare = []
        for p in rest:
            if len(out) >= free:
                break
            if not self.each and _similar(self.results[p]) in under_way:
                spare.append(p)  # a report of what may be the same bug is under way: wait
                continue
            out.append(("report", p, None))
            under_way.add(_similar(self.results[p]))
        if len(out) < free and not self.each and spare and not self._checks_ahead():
            # a slot would stay idle, nothing else can use it: report a waiting script
            # unlike those under way (another wrong op or another message; the least
            # alike first) beside them; if it is the same bug after all, the
            # representatives' checks at the end join them
            going = reporting + [self.results[p] for k, p, _ in out if k == "report"]
            pairs = {(g.wrong_op, g.signature) for g in going}
            spare.sort(key=lambda p: self._likeness(self.results[p], going))
            for p in spare:
                r = self.results[p]
                if len(out) < free and (r.wrong_op, r.signature) not in pairs:
                    out.append(("report", p, None))  # the same wrong op and text: it waits
                    pairs.add((r.wrong_op, r.signature))
        if not out and not self.inflight and not waiting and not self.each:
            # everything final: representatives reported side by side (a slot was free)
            # are checked against each other, the same way
            for r in reps:
                untried = self._untried(r.path, reps)
                if untried and len(self.tried[r.path]) < PER_SCRIPT and len(out) < free:
                    out.append(("cross", r.path, untried[0]))
        return out

    def _checks_ahead(self) -> bool:
        """Checks are running that may yet explain the waiting scripts' kind."""
        return any(kind == "check" for kind, _, _ in self.inflight.values())

    @staticmethod
    def _likeness(r: ScriptResult, going: list[ScriptResult]) -> tuple[int, int, float]:
        same_op = sum(1 for g in going if g.wrong_op == r.wrong_op)
        same_text = sum(1 for g in going if g.signature == r.signature)
        return same_op, same_text, r.seconds

    def _untried(self, p: str, reps: list[ScriptResult]) -> list[str]:
        r = self.results[p]
        return [
            q
            for q in proposals(r, reps, self._script_text(p))
            if q not in self.tried[p] and not self._same(q, p)
        ]

    def _same(self, a: str, b: str) -> bool:
        """Already one cluster (a representative that joined another by running)."""
        return a in self._chain(b) or b in self._chain(a)

    def _chain(self, a: str) -> set[str]:
        out: set[str] = set()
        while a and a not in out:
            out.add(a)
            known = self.results.get(a)
            a = (known.same_as if known else None) or ""
        return out

    # -- running it -----------------------------------------------------------------
    def start(self, kind: str, path: str, rep: str | None) -> None:
        task = self.tasks[path]
        if kind == "classify":
            f = self.submit(classify_one, task)
        elif kind == "report":
            f = self.submit(report_one, task, self.results[path])
        else:  # a check, or a representative's cross check
            assert rep is not None
            self.tried[path].add(rep)
            off = family(without_of(self.results[rep]) or "")
            backend = switch_stage(self.results[rep])
            cached = self._check_cache(path, f"{off}@{backend}" if backend else off)
            if cached.is_file():
                f = Future()
                f.set_result(Check.from_json(json.loads(cached.read_text())))
            else:
                r = self.results[path]
                budget = max(30.0, float(task["timeout"]) - r.seconds)
                if r.capture:  # on the graph its run saved: no run of the program
                    f = self.submit(capture_check_one, task, r, off, budget, backend)
                else:
                    f = self.submit(check_one, task, off, budget, backend)
        self.inflight[f] = (kind, path, rep)

    def _check_cache(self, path: str, off: str) -> Path:
        digest = hashlib.sha256(off.encode()).hexdigest()[:12]
        key = self.tasks[path]["key"][:16]
        return self.base / layout.TRIAGE_CACHE / f"check-{key}-{digest}.json"

    def finished(self, f: Future[Any]) -> None:
        kind, path, rep = self.inflight.pop(f)
        got = f.result()
        if kind in ("classify", "report"):
            got.reported = kind == "report"
            self.done(path, got)
        elif kind == "cross":
            r = self._record(path, rep or "", got)
            if got.passes:
                r.same_as = rep  # its cluster joins rep's (triage.py: merge_reps)
            self.done(path, r, quiet=True)
        else:
            self._joined(path, rep or "", got)

    def _record(self, path: str, rep: str, got: Check) -> ScriptResult:
        """A check's answer: cached, in the script's ``checks``, its runs in ``steps``."""
        if all(st.finished for st in got.steps):
            write_json(self._check_cache(path, got.key), got.to_json())  # not one cut short
        r = self.results[path]
        r.checks = r.checks or []
        if not any(c.rep == rep for c in r.checks):
            r.checks.append(dataclasses.replace(got, rep=rep, steps=[]))
            r.add_steps(got.steps)
        return r

    def _joined(self, path: str, rep: str, got: Check) -> None:
        r = self._record(path, rep, got)
        r.seconds = round(r.seconds + got.seconds, 2)
        if got.passes:
            r.member_of = rep
            r.joined = {"representative": rep, "without": got.without,
                        "checked_by_running": not got.on_capture, "on_capture": got.on_capture,
                        "off_exit": got.off, "on_exit": got.on,
                        "backend": got.backend}  # fmt: skip
            self.done(path, r)
        elif got.flaky:  # passed with the switch off and as it is: no failure to join
            r.flaky = Flaky(r.runs or 1, (r.runs or 1) + 1)
            r.verdict = Verdict.FLAKY
            r.message = f"passed when run again: {r.signature or ''}"
            self.done(path, r)
        else:
            self.results[path] = r

    def run(self) -> None:
        """Until every script is final; Ctrl-C propagates (the caller stops the children)."""
        while True:
            free = self.slots - len(self.inflight)
            for item in self.plan(free) if free > 0 else []:
                self.start(*item)
            if not self.inflight:
                return
            finished, _ = wait(list(self.inflight), timeout=1.0, return_when=FIRST_COMPLETED)
            for f in finished:
                self.finished(f)


def reset_orphans(results: dict[str, ScriptResult]) -> None:
    """A cached member whose representative is gone (its script removed, or now failing
    otherwise) is checked again."""
    for r in results.values():
        rep = results.get(r.member_of or "")
        if r.member_of and not (rep and rep.reported):
            r.member_of = r.joined = None


def attach_members(results: list[ScriptResult], clusters: list[Cluster]) -> None:
    """Each member into its representative's cluster: the cluster's id and culprit, and
    the check that put it there in the cluster's ``checks``."""
    by_member = {m: c for c in clusters for m in c.members}
    by_path = {r.path: r for r in results}
    for r in results:
        c = by_member.get(r.member_of or "")
        if c is None or r.path in c.members:
            continue
        c.members.append(r.path)
        rep = by_path.get(r.member_of or "") or ScriptResult()
        # the culprit its representative's bisect named, which the check showed is its too;
        # its repro is the cluster's (``cluster_repro``): it has none of its own
        r.cluster, r.cluster_repro = c.id, c.repro
        r.culprit = {**(rep.culprit or {"text": c.culprit}), "of": rep.path or None}
        own, theirs = r.wrong_op, rep.wrong_op
        if own and theirs and own != theirs:  # the switch's op spelled otherwise: say its op
            r.culprit["own_op"] = own
            r.culprit["text"] = f"{r.culprit.get('text') or '-'} (this script: {own})"
        c.checks = [*(c.checks or []), {"member": r.path, **(r.joined or {})}]


def merge_reps(clusters: list[Cluster], results: list[ScriptResult]) -> list[Cluster]:
    """The clusters of the representatives' reports, joined where one representative
    passed with another's culprit off and failed again as it is (``same_as``)."""
    cid = {m: c.id for c in clusters for m in c.members}
    parent = {c.id: c.id for c in clusters}

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    joined: dict[str, dict[str, Any]] = {}
    by_path = {r.path: r for r in results}
    for r in results:
        a, b = cid.get(r.path), cid.get(r.same_as or "")
        if a and b and r.same_as and find(a) != find(b):
            joined[find(a)] = {
                "cluster": find(a),
                "representative": r.path,
                "joined": r.same_as,
                "without": without_of(by_path[r.same_as]),
                "checked_by_running": True,
            }
            parent[find(a)] = find(b)
    out: dict[str, Cluster] = {}
    for c in clusters:
        root = find(c.id)
        if root not in out:
            base = next(x for x in clusters if x.id == root)
            out[root] = dataclasses.replace(base, members=[], checks=list(base.checks or []))
        out[root].members += c.members
        if c.id in joined:
            out[root].checks = [*(out[root].checks or []), joined[c.id]]
    for c in out.values():
        for m in c.members:
            r = by_path[m]
            if r.cluster != c.id:
                r.cluster_by_report, r.cluster = r.cluster, c.id
    return sorted(out.values(), key=lambda c: (-len(c.members), c.culprit or "", c.id))

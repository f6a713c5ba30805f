"""Bisect and minify once per cluster (issue 52): the scheduler of ``tcompile triage``.

Every script is run first (triage_one.classify_one: cheap, and it tells a bug from a
clean script, a user's bug or a flaky one).  A script that fails is then either

* **checked** against a cluster that has a culprit switch -- the setting its
  representative's bisect found (that lowering, pass, decomposition or toggle off:
  ``tcompile run --without``): it joins when it passes with the switch off and fails
  again as it is (triage_one.check_one: two runs, no bisect of its own); or
* **reported** (bisect + minify, triage_one.report_one): it becomes a representative,
  and its culprit's switch is what the next scripts are checked with.

Proposals (triage_propose.py) only order the checks (at most ``PER_SCRIPT`` per
script).  A script whose run saved its failing graph (``run --capture``) is asked all
its untried proposals on that graph in one check, one worker (triage_capture.py).  A
script that may be the same bug as a report under way (the same device, stage, kind
and exception; or one pattern ties them: triage_propose._one_pattern) waits for it
rather than start a second report of what is probably the same bug -- and only until
that report's bisect has named its switch (report.py writes it before its minify:
``bisected.json``): it is checked against it while the minify runs.  The cheapest
script of a kind is reported first (the best representative: its bisect and minify
cost the least).

Event-driven on one pool (local threads, or Ray tasks): whenever a slot is free the
plan is made again from what is known, so a check that finishes early lets the next
script in at once.  ``each=True`` is the former way: every failing script its own
report (``--each``; benchmarks/triage_corpus.py measures both side by side).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

from tcompile.compiler import layout
from tcompile.compiler.observer import Observer
from tcompile.compiler.runner import write_json
from tcompile.repro.triage_records import Check, Cluster, Flaky, ScriptResult
from tcompile.repro.triage_verdict import TriageVerdict as Verdict

from .triage_capture import capture_checks_many
from .triage_one import check_one, classify_one, report_one
from .triage_propose import _may_be_one, _one_pattern, _twin, family, proposals, switch_stage
from .triage_switch import without_of

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
        early: bool = True,
        observer: Observer,
    ) -> None:
        self.tasks, self.results = tasks, results
        self.submit, self.done, self.slots = submit, done, max(1, slots)
        self.base, self.each, self.observer = base, each, observer
        self.tried: dict[str, set[str]] = {p: set() for p in tasks}
        self.inflight: dict[Future[Any], tuple[str, str, str | None]] = {}
        self.text: dict[str, str] = {}
        self.uncaptured: set[str] = set()  # scripts whose capture gave no answer once
        self.batch: dict[Future[Any], list[str]] = {}  # a capture check's representatives
        # a report's bisect, read while its minify runs (report.py writes it first): the
        # waiting scripts are checked against its switch at once.  ``early``: the
        # reports' folders are on this machine (not Ray's other nodes)
        self.early_ok = early
        self.early: dict[str, dict[str, Any]] = {}
        self.began: dict[str, float] = {}

    # -- what to do next ------------------------------------------------------------
    def _reps(self) -> list[ScriptResult]:
        """The representatives: reported bugs, and reports under way whose bisect has
        named its switch (provisional: a member of one is checked again if its report
        ends otherwise)."""
        done = [r for r in self.results.values() if r.reported and r.verdict == Verdict.BUG]
        return done + [self._rep(p) for p in self.early if not self.results[p].reported]

    def _rep(self, path: str) -> ScriptResult:
        r = self.results[path]
        if r.reported or path not in self.early:
            return r
        return dataclasses.replace(r, raw_bug={"bisect": self.early[path]})

    def _read_early(self) -> None:
        """The bisect of each report under way, once its report.py wrote it."""
        for kind, path, _ in list(self.inflight.values()) if self.early_ok else []:
            if kind != "report" or path in self.early:
                continue
            for f in (Path(self.tasks[path]["work_dir"]) / "report").glob(f"*/{layout.BISECTED}"):
                try:
                    if f.stat().st_mtime >= self.began.get(path, 0.0):
                        self.early[path] = json.loads(f.read_text())
                except (OSError, ValueError):
                    continue

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
        reporting = [self.results[p] for kind, p, _ in self.inflight.values() if kind == "report"]
        bisecting = [g for g in reporting if self.early_ok and g.path not in self.early]
        checks, rest = [], []
        for p in waiting:
            r = self.results[p]
            if not self.each and any(_twin(r, g) for g in bisecting):
                continue  # its twin's report names a switch soon: asked that one first
            untried = self._untried(p, reps)
            if not self.each and untried and len(self.tried[p]) < PER_SCRIPT:
                checks.append(("check", p, untried[0]))
            else:
                rest.append(p)
        under_way = list(reporting)
        spare = []
        for p in rest:  # reports first: they are the long steps (a shorter tail)
            if len(out) >= free:
                break
            r = self.results[p]
            if not self.each and any(_may_be_one(r, g) for g in under_way):
                spare.append(p)  # a report of what may be the same bug is under way: wait
                continue
            out.append(("report", p, None))
            under_way.append(r)
        out += checks[: max(0, free - len(out))]
        checking = self._checks_ahead() or any(k == "check" for k, _, _ in out)
        if len(out) < free and not self.each and spare and not checking:
            # a slot would stay idle, nothing else can use it: report a waiting script
            # unlike those under way (another wrong op or another message; the least
            # alike first) beside them; if it is the same bug after all, the
            # representatives' checks at the end join them
            going = reporting + [self.results[p] for k, p, _ in out if k == "report"]
            pairs = {(g.wrong_op, g.signature) for g in going}
            spare.sort(key=lambda p: self._likeness(self.results[p], going))
            bisecting += [g for g in going if self.early_ok and g not in reporting]
            if len(spare) <= free - len(out):
                # a slot for each: none waits for a bisect (14 GPU slots, 14 scripts of
                # one failure kind: waiting would have run their bisects one by one)
                bisecting = []
            for p in spare:
                r = self.results[p]
                if any(_one_pattern(r, g) for g in going):
                    continue  # a pattern ties it to a report under way: it waits
                if any(_may_be_one(r, g) for g in bisecting):
                    continue  # its culprit is known soon (before the report's minify)
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
        """Its proposals not asked yet; one representative per switch (two reported side
        by side with one switch: its answer is the same for both)."""
        r = self.results[p]
        asked = {self._switch(q) for q in self.tried[p]}
        out = []
        for q in proposals(r, reps, self._script_text(p)):
            if q not in self.tried[p] and not self._same(q, p) and self._switch(q) not in asked:
                out.append(q)
                asked.add(self._switch(q))
        return out

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
            self.began[path] = time.time()
        else:  # a check, or a representative's cross check
            assert rep is not None
            self.tried[path].add(rep)
            off, backend = self._switch(rep)
            cached = self._cache_of(path, rep)
            r = self.results[path]
            budget = max(30.0, float(task["timeout"]) - r.seconds)
            if cached.is_file():
                f = Future()
                f.set_result(Check.from_json(json.loads(cached.read_text())))
            elif r.capture and path not in self.uncaptured:
                # on the graph its run saved, no run of the program; the other switches
                # it would be checked against next asked on the same worker
                more = [q for q in self._untried(path, self._reps()) if q != rep]
                more = [q for q in more if not self._cache_of(path, q).is_file()]
                more = more[: max(0, PER_SCRIPT - len(self.tried[path]))]
                self.tried[path].update(more)
                asked = [(q, *self._switch(q)) for q in (rep, *more)]
                f = self.submit(capture_checks_many, task, r, asked, budget)
                self.batch[f] = [rep, *more]
            else:
                f = self.submit(check_one, task, off, budget, backend)
        self.inflight[f] = (kind, path, rep)

    def _switch(self, rep: str) -> tuple[str, str | None]:
        """A representative's switch (its family's) and the stage it is checked at."""
        r = self._rep(rep)
        return family(without_of(r) or ""), switch_stage(r)

    def _cache_of(self, path: str, rep: str) -> Path:
        """Where the answer of ``path`` checked against ``rep``'s switch is kept."""
        off, backend = self._switch(rep)
        return self._check_cache(path, f"{off}@{backend}" if backend else off)

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
            if kind == "report":
                self._provisional_members(path, got)
            return
        # a check's answer, or a batch's (capture_checks_many): one per switch asked
        answers = got if isinstance(got, list) else [(rep or "", got)]
        # those a batch did not reach (it stopped at a member or at no answer): not tried
        self.tried[path] -= set(self.batch.pop(f, [])) - {q for q, _ in answers}
        if any(c.capture_why for _, c in answers):
            self.uncaptured.add(path)  # its capture does not answer: by running from now
        if kind == "cross":
            for q, c in answers:
                r = self._record(path, q, c)
                if c.passes:
                    r.same_as = q  # its cluster joins q's (triage.py: merge_reps)
            self.done(path, self.results[path], quiet=True)
        else:
            for q, c in answers:
                self._joined(path, q, c)

    def _provisional_members(self, path: str, got: ScriptResult) -> None:
        """Members that joined a report under way by its bisect's switch: where the
        report ended otherwise (not a bug, another switch), checked again."""
        early = self.early.pop(path, None)
        if early is None or (
            got.verdict == Verdict.BUG and without_of(got) == early.get("without")
        ):
            return
        for q, r in self.results.items():
            if r.member_of == path:
                r.member_of = r.joined = None
                self.tried[q].discard(path)
            if r.same_as == path:
                r.same_as = None

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
            self._read_early()
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
    otherwise, or its report -- joined while it ran -- ended as no bug) is checked
    again."""
    for r in results.values():
        rep = results.get(r.member_of or "")
        if r.member_of and not (rep and rep.reported and rep.verdict == Verdict.BUG):
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

"""Duplicates checked by running (issue 52): does another cluster's culprit, turned off,
make this cluster's failure go away?

The clusters of triage_cluster.py come from what the reports say (culprit, minimal
graph); they only *propose*.  Two clusters are one bug when the representative of one
passes with the other's culprit off: ``tcompile run --without SUBSYSTEM:NAME`` (that
lowering, pass, decomposition or toggle off wherever it applies; bisect's ``without``),
one run of the program.  Its own runs already failed with the culprit on.  So a bug
reached through another op (a crash and a wrong value of one SDPA pattern) joins the
cluster whose culprit explains it, and the same failure text from two causes stays
apart.

Proposals, per cluster: the others on the same device whose culprit is a subsystem's
application (not a whole pattern-matcher pass: _whole_pass), most alike first (the same ``without``, the same subsystem, ops of the
minimal graphs in common), at most ``PER_CLUSTER``.  A pair is asked both ways where
both have a culprit: B's off must make A pass and A's off B (turning every lowering of
``add`` off makes unrelated programs pass too: on the dupes corpus an argmax bug joined
the bf16 round trip's cluster that way).  Each answer is cached beside the scripts'
results (``cache/without-KEY-HASH.json``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler import layout
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.runner import write_json
from tcompile.repro.triage_records import Cluster, Doc, ScriptResult

if TYPE_CHECKING:
    from collections.abc import Callable

PER_CLUSTER = 3  # checks of one cluster against others (the most alike first)


def without_of(r: ScriptResult) -> str | None:
    """The switch its report's bisect found (``--without``'s word), if any."""
    return ((r.raw_bug or {}).get("bisect") or {}).get("without")


def _whole_pass(off: str) -> bool:
    """A pattern-matcher pass as a whole (``joint_graph_passes:pass_pattern_0``): it holds
    many patterns, and two bugs in two of its patterns both pass with it off (on the
    dupes corpus the SDPA pair #195320/#195282 and two other SDPA bugs, #191203 and
    #196468, all did).  Not evidence of one bug: never proposed."""
    return off.split(":", 1)[-1].startswith("pass_pattern")


def _ops(r: ScriptResult) -> set[str]:
    return set((r.minimal or {}).get("ops") or [])


def proposals(
    clusters: list[Cluster], by_path: dict[str, ScriptResult]
) -> list[tuple[str, str, str]]:
    """(cluster asked, cluster whose culprit is turned off, its ``without``) to check."""
    out = []
    for a in clusters:
        ra = by_path[a.representative]
        scored = []
        for b in clusters:
            if b is a:
                continue
            rb = by_path[b.representative]
            off = without_of(rb)
            device = (ra.minimal or {}).get("device") == (rb.minimal or {}).get("device")
            if not off or not device or _whole_pass(off):
                continue  # nothing to turn off, another device, or too broad a switch
            sub = off.split(":", 1)[0]
            mine = (without_of(ra) or "").split(":", 1)[0]
            common = len(_ops(ra) & _ops(rb))
            if sub != mine and not common:
                continue  # nothing in common: not proposed
            scored.append((off == without_of(ra), sub == mine, common, b.id, off))
        scored.sort(reverse=True)
        out += [(a.id, bid, off) for *_, bid, off in scored[:PER_CLUSTER]]
    return out


def check(base: Path, r: ScriptResult, off: str, timeout: float, python: str | None = None) -> Doc:
    """``tcompile run --without OFF`` of one script (cached): ``passes`` when the run
    found no compiler failure (exit 0)."""
    digest = hashlib.sha256(off.encode()).hexdigest()[:12]
    cached = base / layout.TRIAGE_CACHE / f"without-{(r.key or 'x')[:16]}-{digest}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    cmd = [python or sys.executable, "-m", "tcompile", "run", "--json", "--without", off]
    cmd += ["--timeout", str(int(timeout)), "--out", str(base / "without"), r.path]
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout + 60,
            cwd=str(Path(r.path).parent),
            stdin=subprocess.DEVNULL,
        )
        code: int | None = done.returncode
    except subprocess.TimeoutExpired:
        code = None
    res: Doc = {"without": off, "exit_code": code, "passes": code == ExitCode.OK}
    res["seconds"] = round(time.monotonic() - t0, 2)
    if code is not None:  # a check its budget cut is asked again next time (issue 62)
        write_json(cached, res)
    return res


def merge(
    base: Path,
    results: list[ScriptResult],
    clusters: list[Cluster],
    *,
    jobs: int = 1,
    timeout: float = 300.0,
    run: Callable[[ScriptResult, str], Doc] | None = None,
) -> list[Cluster]:
    """The clusters after the checks: a cluster whose representative passes with
    another's culprit off joins it (its members with it).  ``run``: the check (tests
    pass a fake); each result keeps ``cluster_by_report`` (before) and ``joined``."""
    run = run or (lambda r, off: check(base, r, off, timeout))
    by_path = {r.path: r for r in results}
    by_id = {c.id: c for c in clusters}
    for r in results:
        if r.cluster:
            r.cluster_by_report = r.cluster
    asks = proposals(clusters, by_path)
    # both ways: B's culprit off makes A pass, and A's own culprit off makes B pass (a
    # broad switch -- every lowering of ``add`` off -- makes many programs pass alone)
    back = []
    for a, b, _ in asks:
        mine = without_of(by_path[by_id[a].representative])
        if mine:
            back.append((b, a, mine))
    asked = list(dict.fromkeys(asks + back))
    with ThreadPoolExecutor(max(1, jobs)) as ex:
        got = list(ex.map(lambda q: run(by_path[by_id[q[0]].representative], q[2]), asked))
    answer = dict(zip(asked, got))
    answers = []
    for a, b, off in asks:
        mine = without_of(by_path[by_id[a].representative])
        reverse = answer.get((b, a, mine), {"passes": True}) if mine else {"passes": True}
        both = bool(answer[(a, b, off)].get("passes") and reverse.get("passes"))
        answers.append({**answer[(a, b, off)], "passes": both, "reverse": reverse})
    parent = {c.id: c.id for c in clusters}

    def find(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    for (a, b, off), ans in zip(asks, answers):
        ra, rb = find(a), find(b)
        if ans.get("passes") and ra != rb:
            parent[ra] = rb  # a's set (a, or what a joined before) joins b's
            by_id[ra].joined = {
                "cluster": b,
                "asked": a,
                "without": off,
                "exit_code": ans.get("exit_code"),
            }
    out: dict[str, Cluster] = {}
    for c in clusters:
        root = find(c.id)
        if root not in out:
            out[root] = dataclasses.replace(by_id[root], members=[], checks=[])
        out[root].members += c.members
        if c.id != root:
            out[root].checks = [*(out[root].checks or []), {"cluster": c.id, **(c.joined or {})}]
    for c in out.values():
        for m in c.members:
            by_path[m].cluster = c.id
            if by_path[m].cluster_by_report != c.id:
                by_path[m].joined = {"cluster": c.id, "checked_by_running": True}
    merged = sorted(out.values(), key=lambda c: (-len(c.members), c.culprit or "", c.id))
    for c in merged:
        c.asked = sum(1 for q in asked if find(q[0]) == c.id)
    return merged

"""Duplicates by culprit and minimal failing graph, not by message text (triage).

Pure: report documents in, clusters out.  Two scripts are one bug when bisect and the
accuracy localization name the same culprit -- failure kind, stage, inductor
subsystem, and the op (the lowering or decomposition bisect names; else, for wrong
values, the first wrong node) -- on the same device, and their minimal graphs share
most of their ops (Jaccard >= ``SAME_OPS`` over op families, views and casts aside;
single linkage inside one culprit).  Where no op is named, the minimal graphs' ops
decide alone; with no graph either (a program-level failure whose bisect named no
culprit) only the same signature is the same bug.  Two bugs that raise the same text on different
ops land apart; one bug reached through a model, a loop and a one-liner lands together,
because minify strips what the programs do around it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tcompile.compiler.culprit import Culprit
from tcompile.repro.triage_records import Cluster, ScriptResult
from tcompile.repro.triage_verdict import TriageVerdict

if TYPE_CHECKING:
    from collections.abc import Callable

SAME_OPS = 0.5  # minimal graphs of one culprit share at least half their ops


def culprit_of(bug: dict[str, Any]) -> dict[str, Any]:
    """The culprit of one report bug, as bisect named it (compiler/culprit.py, the one
    record every command reports), with the failure's ``kind``; where the minimal
    graph's values first went wrong is ``first_wrong``, never the culprit's op."""
    bis = bug.get("bisect") or {}
    div = (((bug.get("minify") or {}).get("divergence") or {}).get("minimal")) or None
    found = {**bis, "stage": bis.get("stage") or bug.get("stage")}
    if not bis.get("record") and bug.get("record") and found.get("graph") is None:
        found["record"] = bug["record"]
    culprit = Culprit.of_bisect(found, first_wrong=div)
    out: dict[str, object] = culprit.to_json() if culprit else {"stage": None, "subsystem": None, "detail": None,
                                            "op": None, "pattern": None, "effects": None}  # fmt: skip
    out["kind"] = bug.get("kind")
    out["text"] = (culprit.text() if culprit else "") or str(bug.get("signature") or "?")
    return out


def minimal_of(bug: dict[str, Any]) -> dict[str, Any]:
    """The minimal failing graph of one report bug: its ops, size, device, level."""
    mini = bug.get("minify") or {}
    return {
        "ops": list(mini.get("ops") or []),
        "nodes_before": mini.get("nodes_before"),
        "nodes_after": mini.get("nodes_after"),
        "graph_kind": mini.get("graph_kind") or bug.get("graph_kind"),
        "device": mini.get("device"),
        "level": mini.get("level"),
        "verified": bool(mini.get("verified")),
    }


# ops one bug may be reached through: one family (a Linear's matmul is a matmul)
_FAMILY = {"linear": "matmul", "mm": "matmul", "addmm": "matmul", "bmm": "matmul",
           "baddbmm": "matmul"}  # fmt: skip
# views, copies and casts around the op that matters: not evidence of which bug it is
_PLUMBING = {
    "view", "reshape", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze",
    "contiguous", "clone", "float", "to", "_to_copy", "getitem", "size", "sym_size",
}  # fmt: skip


def _ops(r: ScriptResult) -> set[str]:
    ops = {_FAMILY.get(o, o) for o in (r.minimal or {}).get("ops") or []}
    return (ops - _PLUMBING) or ops


def _key(r: ScriptResult) -> tuple[object, ...]:
    """The bucket: what must agree.  Inside it, minimal graphs are compared by ops."""
    c = r.culprit or {}
    op = c.get("op") or c.get("first_wrong")
    if op:
        anchor: str | tuple[str, str | None] | None = _FAMILY.get(op, op)
    elif _ops(r):
        anchor = None  # no op named: the minimal graphs' ops decide
    else:
        anchor = ("signature", r.signature)  # nothing but the failure itself
    return (
        r.kind,
        c.get("stage") or r.stage,
        c.get("subsystem"),
        anchor,
        (r.minimal or {}).get("device"),
    )


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a or not b:
        return 1.0  # nothing to tell them apart by
    return len(a & b) / len(a | b)


def _finder(parent: list[int]) -> Callable[[int], int]:
    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    return find


def cluster(results: list[ScriptResult]) -> list[Cluster]:
    """Clusters of the ``bug`` results: ``id``, ``culprit``, ``members`` (paths),
    ``repro`` (the shortest verified member's), ``ops``, ``kind``, ``stage``,
    ``verified``, ``title``.  Ordered by size, then culprit; ids stable (cluster_id).
    Each result gets its ``cluster``."""
    bugs = sorted((r for r in results if r.verdict == TriageVerdict.BUG), key=lambda r: r.path)
    buckets: dict[tuple[object, ...], list[ScriptResult]] = {}
    for r in bugs:
        buckets.setdefault(_key(r), []).append(r)
    groups: list[list[ScriptResult]] = []
    for members in buckets.values():
        parent = list(range(len(members)))
        find = _finder(parent)
        ops = [_ops(m) for m in members]
        for i in range(len(members)):
            for j in range(i):
                if _jaccard(ops[i], ops[j]) >= SAME_OPS:
                    parent[find(i)] = find(j)
        split: dict[int, list[ScriptResult]] = {}
        for i, m in enumerate(members):
            split.setdefault(find(i), []).append(m)
        groups.extend(split.values())
    groups.sort(key=lambda g: (-len(g), (g[0].culprit or {}).get("text") or "", g[0].path))
    out = []
    for g in groups:
        with_repro = [m for m in g if m.repro]
        rep = (
            min(with_repro, key=lambda m: (m.repro_lines or 10**9, m.path)) if with_repro else g[0]
        )
        text = (rep.culprit or {}).get("text") or rep.signature
        cid = cluster_id(text, rep.path)
        for m in g:
            m.cluster = cid
        ops = sorted(set().union(*[set((m.minimal or {}).get("ops") or []) for m in g]))
        out.append(
            Cluster(
                id=cid,
                culprit=text,
                kind=rep.kind,
                stage=rep.stage,
                ops=ops,
                members=[m.path for m in g],
                representative=rep.path,
                repro=rep.repro,
                repro_lines=rep.repro_lines,
                verified=bool(rep.repro),  # only a verified repro is kept
                no_repro=None if rep.repro else rep.no_repro,  # why not
                title=rep.title,
            )
        )
    return out


def cluster_id(culprit: str | None, path: str) -> str:
    """A cluster's id, the same from run to run and machine to machine: from its culprit
    and its representative script's name (not from its place in the list, which
    another script's arrival changes; not from a folder of this machine)."""
    import hashlib

    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return "C" + hashlib.sha256(f"{culprit}|{name}".encode()).hexdigest()[:6]


def scores(
    results: list[dict[str, Any]], truth: dict[str, str | None], by: str = "cluster"
) -> dict[str, float]:
    """Pairwise precision and recall of a clustering against ``truth`` (path -> bug id)
    over the scripts both call bugs: a pair is positive when both share a bug id.
    ``results``: the scripts of triage's ``--json`` (a measurement reads the output)."""
    paths = [r["path"] for r in results if r.get(by) and truth.get(r["path"])]
    label = {r["path"]: r[by] for r in results if r.get(by)}
    tp = fp = fn = 0
    for i, a in enumerate(paths):
        for b in paths[:i]:
            same_pred = label[a] == label[b]
            same_true = truth[a] == truth[b]
            tp += same_pred and same_true
            fp += same_pred and not same_true
            fn += same_true and not same_pred
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {"precision": round(precision, 3), "recall": round(recall, 3), "pairs": tp + fp + fn}

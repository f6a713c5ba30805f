"""triage.md and triage.html: one page a maintainer reads (or opens in a browser).

Written from the triage document (its ``--json``) only, each file atomically: a
reader never sees half a page.  The HTML page is one file, no scripts, no network:
verdicts coloured, each cluster's representative repro inline.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from tcompile.compiler import layout

ISSUES = "issues"  # OUT/issues/CLUSTER.md: a ready issue text per cluster

_COLOURS = {
    "bug": "#d73a49",
    "flaky": "#e36209",
    "timeout": "#b08800",
    "error": "#6f42c1",
    "not_compiler": "#586069",
    "clean": "#22863a",
    "needs_gpu": "#0366d6",
}


def _atomic(path: Path, text: str) -> str:
    return str(layout.write_file(path, text))


def _rel(base: Path, p: str | None) -> str:
    if not p:
        return "-"
    try:
        return os.path.relpath(p, base)
    except ValueError:
        return p


def _root(doc: dict[str, Any]) -> str:
    """The folder the scripts share: their paths are shown from there."""
    paths = [r["path"] for r in doc["scripts"]]
    if not paths:
        return ""
    root = os.path.commonpath(paths)
    return os.path.dirname(root) if root in paths else root


def _name(root: str, p: str) -> str:
    return os.path.relpath(p, root) if root else p


def _link(base: Path, root: str, p: str) -> str:
    """A script, named from the scripts' folder, linked from the page's."""
    return f"[{_name(root, p)}]({_rel(base, p)})"


def _culprit(r: dict[str, Any]) -> str:
    return (r.get("culprit") or {}).get("text") or "-"


def _also(r: dict[str, Any]) -> str:
    """Each --also interpreter's answer for this script's repro."""
    said = [a.get("result") or "" for a in (r.get("also_all") or {}).values()]
    return "; ".join(x for x in said if x) or (r.get("also") or {}).get("result") or ""


def versions(c: dict[str, Any]) -> str:
    """``2.13.0+cpu: fails (this run); 2.14.1: fixed in 2.14.1``: the cluster's repro on
    each torch triage was given (--also), the one it ran under first."""
    return "; ".join(
        f"{v.get('torch') or '?'}: {v.get('result') or '?'}" for v in c.get("versions") or []
    )


def _how(r: dict[str, Any]) -> str:
    """How a script got its cluster: its own report, or a check of the culprit's switch."""
    j = r.get("joined") or {}
    if r.get("member_of") and j.get("without"):
        at = f" at {j['backend']}" if j.get("backend") else ""
        where = " (its captured graph: no run of it)" if j.get("on_capture") else ""
        return f"joined: passes with `{j['without']}` off{at}, fails with it on{where}"
    if r.get("same_as"):
        return "its report; joined by the same check"
    return "its own report" if r.get("raw_bug") or r.get("reported") else "-"


def markdown(base: Path, doc: dict[str, Any]) -> str:
    root = _root(doc)
    counts = ", ".join(f"{v} {k}" for k, v in doc["counts"].items() if v)
    lines = [
        "# tcompile triage",
        "",
        f"{len(doc['scripts'])} scripts ({counts}); {len(doc['clusters'])} cluster(s) of bugs; "
        f"torch {doc['torch']}; {doc['seconds']:.0f} s ({doc['done_now']} run now, "
        f"{doc['from_cache']} from the cache, engine: {doc['engine']}); scripts under `{_rel(base, root)}`"
        + ("; **interrupted**: the rest is not done yet" if doc["interrupted"] else ""),
        "",
        "## Clusters",
        "",
        "| cluster | culprit | kind | ops of the minimal graph | members | repro | verified "
        "| versions | issue text |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in doc["clusters"]:
        members = "<br>".join(_link(base, root, m) for m in c["members"])
        repro = (
            f"[{_rel(base, c['repro'])}]({_rel(base, c['repro'])}) ({c['repro_lines']} lines)"
            if c.get("repro")
            else "-"
        )
        issue = f"[{ISSUES}/{c['id']}.md]({ISSUES}/{c['id']}.md)"
        lines.append(
            f"| {c['id']} | {c['culprit']} | {c['kind'] or '-'} | {', '.join(c['ops']) or '-'} "
            f"| {members} | {repro} | {_verified_words(c)} "
            f"| {versions(c) or '-'} | {issue} |"
        )
    also = any(r.get("also") or r.get("also_all") for r in doc["scripts"])
    lines += [
        "",
        "## Scripts",
        "",
        "| script | verdict | culprit | cluster | how | repro (verified) | seconds |"
        + (" other torch |" if also else ""),
        "|---|---|---|---|---|---|---|" + ("---|" if also else ""),
    ]
    for r in doc["scripts"]:
        verdict = r["verdict"]
        if r.get("flaky") and r["flaky"].get("of"):
            verdict += f" ({r['flaky']['failed']} of {r['flaky']['of']})"
        repro = f"[{r['repro_lines']} lines]({_rel(base, r['repro'])})" if r.get("repro") else "-"
        lines.append(
            f"| {_link(base, root, r['path'])} | {verdict} | {_culprit(r)} "
            f"| {r.get('cluster') or '-'} | {_how(r)} | {repro} | {r.get('seconds', 0):.0f} |"
            + (f" {_also(r)} |" if also else "")
        )
    lines += ["", "## Why", ""]
    for r in doc["scripts"]:
        said = f"- `{_name(root, r['path'])}`: {r['verdict']}: {r.get('message') or '-'}"
        if r.get("unfinished"):  # steps cut at the budget: no answer came from them
            said += f" (did not finish in the script's budget: {', '.join(r['unfinished'])})"
        if r.get("ray_attempts"):  # its Ray node was lost: where each attempt ran
            said += f" ({_lost_nodes(r)})"
        if r.get("traceback"):  # tcompile's own failure: its traceback, under OUT
            said += f" (tcompile's traceback: [{_rel(base, r['traceback'])}]({_rel(base, r['traceback'])}))"
        lines.append(said)
    return "\n".join(lines) + "\n"


def _lost_nodes(r: dict[str, Any]) -> str:
    nodes = r["ray_attempts"]
    return f"run {len(nodes)} times on Ray, a node lost under it: nodes {', '.join(nodes)}"


def _traceback_link(base: Path, r: dict[str, Any]) -> str:
    if not r.get("traceback"):
        return ""
    rel = html.escape(_rel(base, r["traceback"]))
    return f" (<a href='{rel}'>tcompile's traceback</a>)"


def page(base: Path, doc: dict[str, Any]) -> str:
    e = html.escape
    root = _root(doc)
    rows = []
    for r in doc["scripts"]:
        colour = _COLOURS.get(r["verdict"], "#000")
        rows.append(
            f"<tr><td><a href='{e(_rel(base, r['path']))}'>{e(_name(root, r['path']))}</a></td>"
            f"<td style='color:{colour};font-weight:bold'>{e(r['verdict'])}</td>"
            f"<td>{e(_culprit(r))}</td><td>{e(r.get('cluster') or '-')}</td>"
            f"<td>{e(str(r.get('repro_lines') or '-'))}</td><td>{r.get('seconds', 0):.0f}</td>"
            f"<td>{e(_also(r))}</td><td>{e(r.get('message') or '')}"
            + (f" ({e(_lost_nodes(r))})" if r.get("ray_attempts") else "")
            + f"{_traceback_link(base, r)}</td></tr>"
        )
    clusters = []
    for c in doc["clusters"]:
        code = ""
        if c.get("repro") and Path(c["repro"]).is_file():
            code = f"<details><summary>repro.py</summary><pre>{e(Path(c['repro']).read_text())}</pre></details>"
        members = "<br>".join(
            f"<a href='{e(_rel(base, m))}'>{e(_name(root, m))}</a>" for m in c["members"]
        )
        repro = (
            f"<a href='{e(_rel(base, c['repro']))}'>{e(_rel(base, c['repro']))}</a>"
            if c.get("repro")
            else "-"
        )
        issue = f"<a href='{ISSUES}/{e(c['id'])}.md'>issue text</a>"
        clusters.append(
            f"<tr><td>{e(c['id'])}</td><td>{e(str(c['culprit']))}</td><td>{e(c['kind'] or '-')}</td>"
            f"<td>{e(', '.join(c['ops']))}</td><td>{members}</td><td>{repro}{code}</td>"
            f"<td>{e(_verified_words(c))}</td><td>{e(versions(c) or '-')}</td>"
            f"<td>{issue}</td></tr>"
        )
    counts = ", ".join(f"{v} {k}" for k, v in doc["counts"].items() if v)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>tcompile triage</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; margin-bottom: 2em; }}
td, th {{ border: 1px solid #ddd; padding: 4px 8px; vertical-align: top; font-size: 90%; }}
th {{ background: #f6f8fa; }}
pre {{ background: #f6f8fa; padding: 8px; max-width: 70em; overflow-x: auto; }}
</style></head><body>
<h1>tcompile triage</h1>
<p>{len(doc["scripts"])} scripts under {e(_rel(base, root))} ({e(counts)}); {len(doc["clusters"])} cluster(s); torch {e(doc["torch"] or "?")};
{doc["seconds"]:.0f} s{"; <b>interrupted</b>" if doc["interrupted"] else ""}</p>
<h2>Clusters</h2>
<table><tr><th>cluster</th><th>culprit</th><th>kind</th><th>ops</th><th>members</th><th>repro</th>
<th>verified</th><th>versions</th><th>issue</th></tr>
{"".join(clusters)}</table>
<h2>Scripts</h2>
<table><tr><th>script</th><th>verdict</th><th>culprit</th><th>cluster</th><th>repro lines</th>
<th>seconds</th><th>other torch</th><th>why</th></tr>
{"".join(rows)}</table>
</body></html>
"""


def issue_text(base: Path, doc: dict[str, Any], c: dict[str, Any]) -> str:
    """A cluster as a bug report: title, culprit, the verified repro inline, its members,
    the torch it was seen on (the shape of tcompile report's page, for many scripts)."""
    root = _root(doc)
    title = c.get("title") or f"[{c.get('stage') or 'torch.compile'}] {c['culprit']}"
    members = [_name(root, m) for m in c["members"]]
    lines = [
        f"# {title}",
        "",
        "### 🐛 Describe the bug",
        "",
        f"{len(members)} script(s) fail the same way under `torch.compile` "
        f"({c.get('kind') or 'failure'}). Culprit (tcompile bisect): **{c['culprit']}**.",
        "",
    ]
    if c.get("repro") and Path(c["repro"]).is_file():
        lines += [
            "Repro (verified: `python repro.py` prints `REPRODUCED`, and passes with "
            "`--backend eager`):",
            "",
            "```python",
            Path(c["repro"]).read_text().rstrip(),
            "```",
            "",
        ]
    else:
        why = f" ({c['no_repro']})" if c.get("no_repro") else ""
        lines += [f"No verified repro{why}: see the members.", ""]
    lines += ["Scripts that show it:", ""] + [f"- `{m}`" for m in members]
    seen = [
        f"- torch {v.get('torch') or '?'}: {v.get('result') or '?'}"
        for v in c.get("versions") or []
    ]
    lines += ["", "### Versions", "", *(seen or [f"torch {doc.get('torch') or '?'}"]), ""]
    return "\n".join(lines)


def _verified_words(c: dict[str, Any]) -> str:
    """``yes``, or ``no`` and why (issue 62: a cluster without a repro says why)."""
    if c.get("verified"):
        return "yes"
    return f"no: {c['no_repro']}".replace("|", "/") if c.get("no_repro") else "no"


def write_pages(base: Path, doc: dict[str, Any]) -> tuple[str, str]:
    """triage.md and triage.html under ``base``; their paths.  Scripts are named from
    the folder they share, files under ``base`` from the pages themselves: no folder of
    this machine is on a page (shareable.py)."""
    from .shareable import places, scrub

    where = places([_root(doc)], None)
    where[os.path.abspath(base)] = ""  # links are relative to the pages, which live there
    for c in doc["clusters"]:
        (base / ISSUES).mkdir(parents=True, exist_ok=True)
        _atomic(base / ISSUES / f"{c['id']}.md", scrub(issue_text(base, doc, c), where))
    return _atomic(base / layout.TRIAGE_MD, scrub(markdown(base, doc), where)), _atomic(
        base / layout.TRIAGE_HTML, scrub(page(base, doc), where)
    )

"""The README is short and every page beside it is reachable: its links resolve, every
page in docs/ is linked from it, and CI runs the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _links(path: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(path.read_text())]


def test_the_readme_is_short():
    assert (ROOT / "README.md").read_text().count("\n") <= 150


def test_every_relative_link_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for link in _links(page):
            if re.match(r"[a-z]+:", link) or link.startswith("#"):
                continue
            target = (page.parent / link.split("#")[0]).resolve()
            if not target.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {link}")
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / link.split("#")[0]).resolve() for link in _links(ROOT / "README.md")}
    pages = set((ROOT / "docs").glob("*.md"))
    assert pages and {p.resolve() for p in pages} <= linked


def test_ci_runs_the_readme_s_test_command():
    ci = [
        ln.strip()
        for ln in (ROOT / ".ci" / "run").read_text().splitlines()
        if ln.strip() and not ln.strip().startswith(("#", "set ", "cd "))
    ]
    assert ci[-1] in (ROOT / "README.md").read_text()

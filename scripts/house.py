#!/usr/bin/env python3
"""Figures of the house: the largest modules, the longest functions, file-level import
cycles (deferred imports inside functions count: a cycle that survives only because
an import is deferred is still a cycle), and which modules import what.

    python scripts/house.py            # the figures, for the README and closing notes
    python scripts/house.py --json     # the same as JSON (tests/unit/test_layers.py uses it)

Imports under ``if TYPE_CHECKING:`` do not count: they never run.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the client's folders and the import package they install as (pyproject.toml)
PACKAGES = {
    "pkg": "tcompile",
    "cli": "tcompile.cli",
    "compiler": "tcompile.compiler",
    "minifier": "tcompile.minifier",
    "repro": "tcompile.repro",
}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out: dict[str, Path] = {}
    for folder, dotted in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "bootstrap" in path.parts:
                continue  # sitecustomize.py: imported by the interpreter, not by tcompile
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([dotted, *parts])] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                for n in ast.walk(sub):
                    if hasattr(n, "lineno"):
                        lines.add(n.lineno)
    return lines


def imports_of(name: str, path: Path, known: set[str]) -> dict[str, bool]:
    """Modules of the package that ``name`` imports -> whether at module level."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_lines(tree)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    top_level = {id(n) for n in tree.body}
    for node in tree.body:  # module-level try/if blocks are still module level
        if isinstance(node, (ast.Try, ast.If)):
            for n in ast.walk(node):
                top_level.add(id(n))
    out: dict[str, bool] = {}
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rsplit(".", 1)[0] if "." in t else ""
            if t and t != name:
                out[t] = out.get(t, False) or id(node) in top_level
    return out


def graph() -> dict[str, dict[str, bool]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(g: dict[str, dict[str, bool]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, {}):
            # a package's __init__ re-exporting its modules is not a cycle of files
            if v.startswith(w + "."):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in g:
        if v not in index:
            visit(v)
    return out


def sizes() -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(lines, module) largest first; (lines, function) longest first."""
    mods, funcs = [], []
    for path in modules().values():
        text = path.read_text()
        mods.append((len(text.splitlines()), str(path.relative_to(ROOT))))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                funcs.append((n, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"))
    return sorted(mods, reverse=True), sorted(funcs, reverse=True)


def figures() -> dict[str, object]:
    g = graph()
    mods, funcs = sizes()
    return {
        "modules": len(mods),
        "largest_modules": mods[:5],
        "longest_functions": funcs[:5],
        "modules_over_500": [m for m in mods if m[0] > 500],
        "functions_over_100": [f for f in funcs if f[0] > 100],
        "import_cycles": cycles(g),
        "imports": {k: sorted(v) for k, v in g.items()},
        "top_level_imports": {k: sorted(m for m, top in v.items() if top) for k, v in g.items()},
    }


def main() -> int:
    f = figures()
    if "--json" in sys.argv:
        print(json.dumps(f, indent=1))
        return 0
    print(f"modules: {f['modules']}")
    print("largest modules:", ", ".join(f"{p} ({n})" for n, p in f["largest_modules"]))
    print("longest functions:", ", ".join(f"{p} ({n})" for n, p in f["longest_functions"]))
    print(f"modules over 500 lines: {len(f['modules_over_500'])}")
    print(f"functions over 100 lines: {len(f['functions_over_100'])}")
    print(f"import cycles: {len(f['import_cycles'])}")
    for c in f["import_cycles"]:
        print("  " + " <-> ".join(c))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A program split into files, as one (the program level, program_job.py).

A user's script imports its own modules (``train.py``: ``from model import Net``); a
repro must run on a machine that has only repro.py.  The modules beside the script that
its top-level imports name are found (:func:`local_modules`), with those ``--include``
names (:func:`program_files`), and pasted into the program (:func:`inline_modules`)
before the search starts: the search and the repro see one file.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from tcompile.compiler.exitcodes import UsageError


def local_modules(script: Path) -> list[Path]:
    """The program's own modules: those its top-level imports name (``import m``,
    ``from m import a``) that are ``.py`` files beside the script, and theirs in turn.
    A program split into files (``train.py`` importing ``model.py``) is minified -- and
    its repro written -- as one file: a repro must run on a machine that has only it."""
    found: list[Path] = []

    def visit(path: Path) -> None:
        try:
            tree = ast.parse(path.read_text())
        except (OSError, SyntaxError, ValueError):
            return
        for name in _imported(tree):
            mod = script.parent / f"{name}.py"
            if mod.is_file() and mod.resolve() != script.resolve() and mod.resolve() not in found:
                found.append(mod.resolve())
                visit(mod)

    visit(script)
    return found


def program_files(script: Path, include: list[str] | None = None) -> list[Path]:
    """The script, the modules ``--include`` names, and its own local modules."""
    files = [Path(p).resolve() for p in include or []]
    for p in files:
        if not p.is_file():
            raise UsageError(f"--include {p}: no such file")
    return [script, *files, *(m for m in local_modules(script) if m not in files)]


def _imported(tree: ast.Module) -> list[str]:
    """The modules a module's top-level imports name (absolute, first part only)."""
    names: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            names.append(stmt.module)
        elif isinstance(stmt, ast.Import):
            names += [a.name for a in stmt.names]
    return [n for n in names if "." not in n]


def _bound(tree: ast.AST) -> set[str]:
    """Every name a module binds other than by ``import`` (assignments, arguments,
    definitions, loop and ``with`` targets)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
    return out


def _is_main_guard(stmt: ast.stmt) -> bool:
    """``if __name__ == "__main__":``: an included module's own script part."""
    t = stmt.test if isinstance(stmt, ast.If) else None
    return (
        isinstance(t, ast.Compare)
        and isinstance(t.left, ast.Name)
        and t.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in t.comparators)
    )


def inline_modules(source: str, includes: list[Path]) -> str:
    """The program with the local modules it imports (``includes``) pasted in: ``from m
    import a`` becomes m's source (``a as b`` adds ``b = a``); ``import m`` too, and
    ``m.a`` becomes ``a`` -- unless the program also binds the name ``m`` (a variable
    ``model`` beside a module ``model``): that import stays.  An included module's
    ``if __name__ == "__main__":`` part is left out, its ``from __future__`` imports go
    to the top."""
    names = {p.stem: p.read_text() for p in includes}
    tree = ast.parse(source)
    bound = _bound(tree)
    body: list[ast.stmt] = []
    future: list[ast.stmt] = []
    used: set[str] = set()
    flat: set[str] = set()  # ``import m``: its ``m.a`` become ``a``
    for stmt in tree.body:
        mods = []
        if isinstance(stmt, ast.ImportFrom) and stmt.module in names and not stmt.level:
            mods = [stmt.module]
        elif isinstance(stmt, ast.Import) and all(
            a.name in names and not a.asname and a.name not in bound for a in stmt.names
        ):
            mods = [a.name for a in stmt.names]
            flat.update(mods)
        if not mods:
            body.append(stmt)
            continue
        for m in mods:
            if m not in used:
                used.add(m)
                inner = ast.parse(inline_modules(names[m], includes)).body
                future += [
                    s for s in inner if isinstance(s, ast.ImportFrom) and s.module == "__future__"
                ]
                body += [
                    s
                    for s in inner
                    if not _is_main_guard(s)
                    and not (isinstance(s, ast.ImportFrom) and s.module == "__future__")
                ]
            if isinstance(stmt, ast.ImportFrom):
                for a in stmt.names:
                    if a.asname and a.asname != a.name:
                        body.append(ast.parse(f"{a.asname} = {a.name}").body[0])
    own = [s for s in body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    seen = {ast.dump(s) for s in own}
    tree.body = (
        own + [s for s in future if ast.dump(s) not in seen] + [s for s in body if s not in own]
    )

    class Flatten(ast.NodeTransformer):
        def visit_Attribute(self, node: ast.Attribute) -> Any:
            self.generic_visit(node)
            if isinstance(node.value, ast.Name) and node.value.id in flat:
                return ast.Name(node.attr, node.ctx)
            return node

    return ast.unparse(Flatten().visit(tree)) + "\n"

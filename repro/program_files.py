"""A program split into files, as one (the program level, program_job.py).

A user's script imports its own code: modules beside it (``train.py``: ``from model
import Net``) and packages (``from models.mlp import MLP``, a ``models/`` folder with an
``__init__.py``, whose modules import each other relatively: ``from .layers import
Block``, ``from ..utils import seed``).  A repro must run on a machine that has only
repro.py.  The program's own modules -- those its top-level imports name that are files
under the script's folder, and theirs in turn, a package's ``__init__.py`` with each of
its modules -- are found (:func:`local_modules`), with what ``--include`` names (files,
or folders: every module in them) (:func:`program_files`), and pasted into the program
(:func:`inline_modules`) before the search starts: the search and the repro see one
file, and the search shrinks the pasted code with the rest.

Modules are named by their dotted path from the script's folder (``models.mlp``).  A
module is pasted once, where it is first imported, after the packages above it and the
modules it imports; ``from m import a as b`` adds ``b = a``; a reference through a
module (``models.mlp.MLP``, ``mlp.MLP`` after ``from models import mlp``) becomes the
name itself -- unless the importing module also binds the module's name itself (a
variable ``model`` beside a module ``model``): that import stays.  An included module's
``if __name__ == "__main__":`` part is left out, its ``from __future__`` imports go to
the top.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from tcompile.compiler.exitcodes import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable


def _module_file(roots: list[Path], name: str) -> Path | None:
    """``a.b`` under the first root that has it: ``a/b.py`` or ``a/b/__init__.py``."""
    for root in roots:
        base = root.joinpath(*name.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate.resolve()
    return None


def module_name(roots: Path | list[Path], path: Path) -> str:
    """A file's dotted name from the innermost root it is under (``models/mlp.py`` ->
    ``models.mlp``, ``models/__init__.py`` -> ``models``; ``src/pkg/a.py`` -> ``pkg.a``
    where both the project and its src/ are roots); elsewhere, its stem."""
    parts = [path.stem]
    inside = []
    for root in [roots] if isinstance(roots, Path) else roots:
        try:
            inside.append(list(path.resolve().relative_to(root.resolve()).with_suffix("").parts))
        except ValueError:
            continue
    if inside:
        parts = min(inside, key=len)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _absolute(stmt: ast.ImportFrom, current: str, is_package: bool) -> str | None:
    """The module a ``from ... import`` names, relative imports resolved from
    ``current`` (a package's ``__init__`` is its package)."""
    if not stmt.level:
        return stmt.module
    parts = current.split(".") if current else []
    if not is_package:
        parts = parts[:-1]
    if stmt.level - 1 > len(parts):
        return None
    parts = parts[: len(parts) - (stmt.level - 1)]
    return ".".join([*parts, *([stmt.module] if stmt.module else [])]) or None


def _wanted(tree: ast.Module, current: str, is_package: bool) -> list[str]:
    """The modules a module's top-level imports may name, and for ``from m import a``
    also ``m.a`` (a submodule, where there is one); outermost package first."""
    names: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            mod = _absolute(stmt, current, is_package)
            if mod is None:
                continue
            names.append(mod)
            names += [f"{mod}.{a.name}" for a in stmt.names if a.name != "*"]
        elif isinstance(stmt, ast.Import):
            names += [a.name for a in stmt.names]
    out: list[str] = []
    for name in names:
        parts = name.split(".")
        out += [".".join(parts[: k + 1]) for k in range(len(parts))]  # packages first
    return list(dict.fromkeys(out))


def local_modules(
    script: Path,
    roots: list[Path] | None = None,
    current: str = "",
    project: Path | None = None,
) -> list[Path]:
    """The program's own modules: those its top-level imports name that are files under
    its roots (by default the script's folder: a module beside it, a package and its
    modules; repro/project.py finds the others), and theirs in turn; ``current``: the
    script's dotted name when it runs as ``-m pkg.mod`` (its packages too, its relative
    imports); ``project``: a package of the project installed editable imports from
    where it is (its folder joins ``roots``).  A program split into files is minified
    -- and its repro written -- as one file: a repro must run on a machine that has
    only it."""
    from .project import editable_root

    script = script.resolve()
    roots = roots if roots is not None else [script.parent]
    roots += [] if roots else [script.parent]
    found: list[Path] = []

    def add(name: str) -> None:
        mod = _module_file(roots, name)
        if mod is None and "." not in name and project is not None:
            extra = editable_root(name, project)
            if extra is not None and extra not in roots:
                roots.append(extra)
                mod = _module_file(roots, name)
        if mod is not None and mod != script and mod not in found:
            found.append(mod)
            visit(mod, name)

    def visit(path: Path, name: str) -> None:
        try:
            tree = ast.parse(path.read_text())
        except (OSError, SyntaxError, ValueError):
            return
        for each in _wanted(tree, name, path.name == "__init__.py"):
            add(each)

    parts = current.split(".")[:-1] if current else []
    for k in range(len(parts)):  # ``-m a.b.c``: a, then a.b, import first
        add(".".join(parts[: k + 1]))
    visit(script, current)
    return found


def program_files(
    script: Path,
    include: list[str] | None = None,
    roots: list[Path] | None = None,
    current: str = "",
    project: Path | None = None,
) -> list[Path]:
    """The script, what ``--include`` names (a file, or a folder: every module in it),
    and its own local modules."""
    script = script.resolve()
    files: list[Path] = []
    for given in include or []:
        p = Path(given).resolve()
        if p.is_dir():
            files += sorted(f.resolve() for f in p.rglob("*.py") if "__pycache__" not in f.parts)
        elif p.is_file():
            files.append(p)
        else:
            raise UsageError(f"--include {given}: no such file or folder")
    files = list(dict.fromkeys(f for f in files if f != script))
    found = local_modules(script, roots, current, project)
    return [script, *files, *(m for m in found if m not in files)]


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


class _Paster:
    """Pastes the program's modules into one body, each once, dependencies first."""

    def __init__(self, modules: dict[str, Path]) -> None:
        self.modules = modules  # dotted name -> file
        self.used: set[str] = set()
        self.future: list[ast.stmt] = []

    def _is_module(self, name: str) -> bool:
        return name in self.modules

    def _is_prefix(self, name: str) -> bool:
        """A package the program's modules are in (with or without an __init__ here)."""
        return name in self.modules or any(m.startswith(name + ".") for m in self.modules)

    def module(self, name: str) -> list[ast.stmt]:
        """``name``'s packages (outermost first) and ``name`` itself, those not pasted
        yet, as statements."""
        out: list[ast.stmt] = []
        parts = name.split(".")
        for k in range(len(parts)):
            each = ".".join(parts[: k + 1])
            if each in self.modules and each not in self.used:
                self.used.add(each)
                path = self.modules[each]
                body = self.body(path.read_text(), each, path.name == "__init__.py")
                self.future += [s for s in body if _is_future(s)]
                out += [s for s in body if not _is_main_guard(s) and not _is_future(s)]
        return out

    def body(self, source: str, current: str, is_package: bool) -> list[ast.stmt]:
        """One module's statements with the program's modules it imports pasted in, and
        its references through them made plain names."""
        tree = ast.parse(source)
        bound = _bound(tree)
        body: list[tuple[bool, ast.stmt]] = []  # (the module's own statement?, it)
        aliases: dict[str, str] = {}  # a local name -> the module it stands for
        for stmt in tree.body:
            pasted = self._import(stmt, current, is_package, bound, aliases)
            if pasted is None:
                body.append((True, stmt))
            else:
                body += [(False, s) for s in pasted]
        flatten = _Flatten(aliases, self._is_prefix)
        return [flatten.visit(s) if own and aliases else s for own, s in body]

    def _import(
        self,
        stmt: ast.stmt,
        current: str,
        is_package: bool,
        bound: set[str],
        aliases: dict[str, str],
    ) -> list[ast.stmt] | None:
        """The statements an import of the program's own modules becomes; None: keep it."""
        if isinstance(stmt, ast.ImportFrom):
            mod = _absolute(stmt, current, is_package)
            if mod is None or mod == "__future__" or not self._is_prefix(mod):
                return None
            if any(a.name == "*" for a in stmt.names) and not self._is_module(mod):
                return None
            out = self.module(mod) if self._is_module(mod) else []
            for a in stmt.names:
                local = a.asname or a.name
                sub = f"{mod}.{a.name}"
                if self._is_prefix(sub):  # a submodule: its names are pasted
                    if local in bound:
                        return None  # the program binds the module's name itself
                    out += self.module(sub) if self._is_module(sub) else []
                    aliases[local] = sub
                elif not self._is_module(mod):
                    return None  # a name of a package this program does not carry
                elif a.asname and a.asname != a.name:
                    out.append(ast.parse(f"{a.asname} = {a.name}").body[0])
            return out
        if isinstance(stmt, ast.Import):
            if not all(self._is_prefix(a.name) for a in stmt.names):
                return None
            out = []
            for a in stmt.names:
                local = a.asname or a.name.split(".")[0]
                if local in bound:
                    return None
                out += self.module(a.name)
                aliases[local] = a.name if a.asname else a.name.split(".")[0]
            return out
        return None


def _is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"


class _Flatten(ast.NodeTransformer):
    """``m.a`` (``m`` a module alias) -> ``a``; through packages: ``pkg.sub.a`` -> ``a``."""

    def __init__(self, aliases: dict[str, str], is_module: Callable[[str], bool]) -> None:
        self.aliases, self.is_module = aliases, is_module

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        chain: list[str] = []
        base: ast.AST = node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in self.aliases:
            self.generic_visit(node)
            return node
        chain.reverse()  # base.a.b.c -> [a, b, c]
        module = self.aliases[base.id]
        for k, attr in enumerate(chain):
            if self.is_module(f"{module}.{attr}"):
                module = f"{module}.{attr}"
                continue
            plain: ast.expr = ast.Name(attr, ast.Load())
            for rest in chain[k + 1 :]:
                plain = ast.Attribute(plain, rest, ast.Load())
            plain.ctx = node.ctx  # type: ignore[attr-defined]
            return ast.copy_location(plain, node)
        return node  # the chain ends at a module: left as it is


def inline_modules(
    source: str,
    includes: list[Path],
    root: Path | None = None,
    roots: list[Path] | None = None,
    current: str = "",
) -> str:
    """The program with its own modules (``includes``, named from ``roots``, or
    ``root``: the script's folder; by default the folder of the first) pasted in (the
    module docstring says how); ``current``: the script's dotted name under ``-m``
    (its packages are pasted first, as Python imports them first)."""
    if not includes:
        return source
    roots = roots or [root or min(includes, key=lambda p: len(p.parts)).parent]
    paster = _Paster({module_name(roots, p): p.resolve() for p in includes})
    tree = ast.parse(source)
    parts = current.split(".")[:-1] if current else []
    first = paster.module(".".join(parts)) if parts else []
    body = paster.body(source, current, False)
    own = [s for s in body if _is_future(s)]
    seen = {ast.dump(s) for s in own}
    future = [s for s in paster.future if ast.dump(s) not in seen]
    future = list({ast.dump(s): s for s in future}.values())
    tree.body = own + future + first + [s for s in body if not _is_future(s)]
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"

"""repro.py for a capture failure: the minimal function, its inputs, ``torch.compile``
with the options that matter, the check, the versions header -- standalone (torch
only), at most about 40 lines.

It prints ``REPRODUCED: <signature>`` and exits 1, or ``NOT REPRODUCED`` and exits 0;
``--no-compile`` runs the same function without torch.compile (it must not fail: the
failure is TorchDynamo's, not the program's).
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, TypedDict

from tcompile.compiler import signature as _sig
from tcompile.compiler.literals import py_literal
from tcompile.compiler.signature import FailureSignature

from .writer import _header

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .environment import Environment


# What the capture worker says about the values the function reads
# (compiler/child/capture_info.describe): JSON, as it comes back from the worker.


class TensorWhat(TypedDict, total=False):
    """A tensor, as capture_entries.tensor_spec describes it."""

    shape: list[int]
    dtype: str  # without "torch."
    device: str
    requires_grad: bool
    range: list[int]  # integer tensors: [min, max]
    values: object  # small CPU tensors: their values, nested lists


# one of the kinds' keys ("import" is a keyword: the functional form); a tensor argument
# also says how it is filled and which of its dims are marked dynamic
What = TypedDict(
    "What",
    {
        "import": str,
        "import_from": list[str],  # [module, name]
        "constant": str,  # its repr
        "source": str,
        "tensor": TensorWhat,
        "module": str,
        "unknown": str,
        "fill": str,  # random | recorded
        "marks": list[int],
    },
    total=False,
)


class Described(TypedDict, total=False):
    """What the final function reads: its parameters (and those of the calls before
    it), the global names it uses, and the config the program changed."""

    params: dict[str, What]
    names: dict[str, What]
    history: list[dict[str, What]]
    config: dict[str, dict[str, object]]  # {module: {key: value}}


# tcompile's FailureSignature for a capture failure, in a few lines (signature.py:
# root_cause, qualified_type, normalize_message)
_SIGNATURE = """
def signature(exc):  # as tcompile names a failure: stage/kind: type: first line, scrubbed
    while isinstance(inner := getattr(exc, "inner_exception", None) or getattr(exc, "real_exception", None), BaseException):
        exc = inner
    mod, name = type(exc).__module__, type(exc).__name__
    name = name if mod in ("builtins", "__main__") else f"{mod.rsplit('.', 1)[-1]}.{name}"
    text = next((ln for ln in str(exc).strip().splitlines() if ln.strip()), "")
    for pattern, repl in SCRUBS:
        text = re.sub(pattern, repl, text)
    return f"eager/capture: {name}" + (f": {text.strip()[:300]}" if text.strip() else "")
"""

_MAIN = """
if __name__ == "__main__":
    fn = forward if "--no-compile" in sys.argv else torch.compile(forward, {kwargs})
    try:
        {earlier}fn(**inputs())
    except Exception as exc:
        sys.exit(print(f"REPRODUCED: {{signature(exc)}}") or 1)
    print("NOT REPRODUCED")
"""


def _tensor_expr(name: str, what: What) -> list[str]:
    spec = what["tensor"]
    dtype = f"torch.{spec['dtype']}"
    shape = tuple(spec["shape"])
    device = "" if spec.get("device", "cpu") == "cpu" else f", device={spec['device']!r}"
    values = spec.get("values")
    if what.get("fill") != "random" and values is not None:
        expr = f"torch.tensor({py_literal(values)}, dtype={dtype}{device})"
    elif spec["dtype"] == "bool":
        expr = f"torch.rand({shape!r}{device}) > 0.5"
    elif spec["dtype"].startswith(("float", "bfloat", "complex")):
        expr = f"torch.randn({shape!r}, dtype={dtype}{device})"
    else:
        lo, hi = spec.get("range") or (0, 9)
        expr = f"torch.randint({lo}, {hi + 1}, {shape!r}, dtype={dtype}{device})"
    if spec.get("requires_grad"):
        expr = f"({expr}).requires_grad_()"
    lines = [f"    {name} = {expr}"]
    for d in what.get("marks") or []:
        lines.append(f"    torch._dynamo.mark_dynamic({name}, {d})")
    return lines


def _inputs(
    params: dict[str, What], name: str = "inputs", base: dict[str, What] | None = None
) -> str | None:
    """``def inputs()`` building the arguments.  With ``base`` (the final call's), an
    earlier call's function builds only the arguments that differ and takes the rest
    from ``inputs()``."""
    body = [f"def {name}():", "    torch.manual_seed(0)"]
    own = [a for a, what in params.items() if base is None or base.get(a) != what]
    for arg in own:
        what = params[arg]
        if "tensor" in what:
            body += _tensor_expr(arg, what)
        elif "constant" in what:
            body.append(f"    {arg} = {what['constant']}")
        else:
            return None  # a module or an object a standalone repro cannot build
    pairs = ", ".join(f"{n}={n}" for n in own)
    if base is None:
        body.append(f"    return dict({pairs})")
    elif set(params) != set(base):
        return None  # an earlier call with other arguments: not written as a difference
    else:
        body.append(f"    return dict(inputs(){', ' if pairs else ''}{pairs})")
    return "\n".join(body) + "\n"


def _earlier(
    history: list[dict[str, What]], final: dict[str, What]
) -> tuple[str, list[str]] | None:
    """The calls before the one that fails (a recompilation needs them): (functions,
    call lines).  A call whose differing arguments are one expression each is written
    in place, ``fn(**dict(inputs(), x=torch.randn((8, 16))))``; others get a function."""
    defs, calls = [], []
    for i, params in enumerate(history):
        if set(params) != set(final):
            return None  # an earlier call with other arguments
        diff = {a: w for a, w in params.items() if final.get(a) != w}
        inline = {}
        for arg, what in diff.items():
            lines = _tensor_expr(arg, what) if "tensor" in what else []
            if "constant" in what:
                inline[arg] = what["constant"]
            elif len(lines) == 1:
                inline[arg] = lines[0].split(" = ", 1)[1]
        if len(inline) == len(diff):
            pairs = "".join(f", {a}={e}" for a, e in inline.items())
            calls.append(f"fn(**dict(inputs(){pairs}))" if pairs else "fn(**inputs())")
            continue
        text = _inputs(params, f"earlier_{i}", base=final)
        if text is None:
            return None
        defs.append(text)
        calls.append(f"fn(**earlier_{i}())")
    return "\n".join(defs), calls


def _config_lines(config: dict[str, dict[str, object]]) -> str:
    """The config the program changed (error_on_recompile, recompile_limit, ...)."""
    return "".join(
        f"{module}.{key} = {py_literal(value)}\n"
        for module, diffs in sorted((config or {}).items())
        for key, value in sorted(diffs.items())
    )


def _names(names: dict[str, What]) -> tuple[list[str], list[str]] | None:
    """(import lines, definitions) for the global names the function reads."""
    imports: list[str] = []
    defs: list[str] = []
    for name, what in names.items():
        if "import" in what:
            mod = what["import"]
            imports.append(f"import {mod}" if mod == name else f"import {mod} as {name}")
        elif "import_from" in what:
            mod, attr = what["import_from"]
            imports.append(f"from {mod} import {attr}" + ("" if attr == name else f" as {name}"))
        elif "constant" in what:
            defs.append(f"{name} = {what['constant']}")
        elif "source" in what:
            defs.append(what["source"].strip())
        elif name not in ("torch",):
            return None
    return imports, defs


def capture_repro(
    *,
    source: str,
    name: str,
    described: Described,
    signature: FailureSignature,
    options: Mapping[str, object],
    env: Environment,
) -> str | None:
    """The text of repro.py, or None when the function needs something a standalone
    file cannot build (a module object, say)."""
    inputs = _inputs(described.get("params") or {})
    history = described.get("history") or []
    earlier = _earlier(history, described.get("params") or {})
    names = _names({k: v for k, v in (described.get("names") or {}).items() if k != "torch"})
    if inputs is None or names is None or earlier is None:
        return None
    imports, defs = names
    earlier_defs, earlier_calls = earlier
    tree = ast.parse(source)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for fn in fns:
        if fn.name == name:
            fn.name = "forward"
    body = "\n\n".join(ast.unparse(f) for f in fns)
    if name != "forward":
        body = re.sub(rf"\b{re.escape(name)}\(", "forward(", body)
    kwargs = {"backend": "eager", "fullgraph": bool(options.get("fullgraph"))}
    if options.get("dynamic") is not None:
        kwargs["dynamic"] = options["dynamic"]
    scrubs = ", ".join(f"({p.pattern!r}, {r!r})" for p, r in _sig.SCRUBS)
    header = _header(env, signature).replace("[--backend eager]", "[--no-compile]")
    out = [
        header,
        "import re\nimport sys\nimport torch\n",
        "".join(f"{i}\n" for i in sorted(set(imports))),
        _config_lines(described.get("config") or {}),
        f"\nSCRUBS = [{scrubs}]\n",
        "".join(f"\n{d}\n" for d in defs),
        "\n" + body + "\n",
        ("\n" + earlier_defs) if earlier_defs else "",
        "\n" + inputs,
        _SIGNATURE,
        _MAIN.format(
            kwargs=", ".join(f"{k}={py_literal(v)}" for k, v in kwargs.items()),
            earlier="".join(f"{call}\n        " for call in earlier_calls),
        ),
    ]
    return re.sub(r"\n{3,}", "\n\n", "".join(out))

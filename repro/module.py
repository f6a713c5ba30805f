"""The minimal graph as Python source: ``class Repro(torch.nn.Module)``.

The forward is FX's own code generation.  What the graph reads with ``get_attr`` --
tensor constants, parameters and buffers, and the subgraphs of higher-order ops
(``cond``, ``while_loop``, ...) -- is made in ``__init__``: tensors by the same
expressions as the inputs (inputs.py: seeded random values, or real values inline or
from the sidecar), subgraphs as classes of their own.  A repro never refers to an
attribute it does not define.
"""

from __future__ import annotations

import os
import re
import textwrap
from typing import TYPE_CHECKING, cast

from tcompile.compiler.graph_io import fetch_attr
from tcompile.compiler.literals import py_literal

from .inputs import INLINE_LIMIT, real_values, spec_of, tensor_expr, with_values

if TYPE_CHECKING:
    import torch
    from torch.fx.graph import PythonCode


def _imports(code: PythonCode) -> list[str]:
    imports: list[str] = []
    known = {
        "inf": "from math import inf",
        "nan": "from math import nan",
        "device": "from torch import device",
        "NoneType": "NoneType = type(None)",
    }
    for name, value in sorted(code.globals.items()):
        if name == "torch":
            continue
        if name in known:
            imports.append(known[name])
            continue
        mod = getattr(value, "__module__", None)
        qual = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        if mod and qual and "." not in qual and mod != "builtins":
            imports.append(f"from {mod} import {qual} as {name}")
        elif isinstance(value, type(os)):
            imports.append(f"import {value.__name__} as {name}")
    return imports


def _bound(line: str) -> str:
    """The name an import line (or ``X = ...``) binds."""
    return line.split(" = ")[0] if " = " in line else line.split()[-1]


def _attr_targets(gm: torch.fx.GraphModule) -> list[str]:
    seen: list[str] = []
    for n in gm.graph.nodes:
        if n.op == "get_attr" and n.target not in seen:
            seen.append(cast(str, n.target))  # get_attr: a dotted name
    return seen


def module_source(
    gm: torch.fx.GraphModule, *, real: bool, sidecar: list[torch.Tensor], name: str = "Repro"
) -> tuple[str, list[str]]:
    """(class source, import lines).  ``real``: attributes carry their real values
    (inline when small, else appended to ``sidecar``); else seeded random values."""
    import torch

    code = gm.graph.python_code(root_module="self")
    imports = _imports(code)
    classes: list[str] = []
    init: list[str] = []
    made: set[str] = set()
    for target in _attr_targets(gm):
        value = fetch_attr(gm, target)
        parts = target.split(".")
        for i in range(1, len(parts)):  # the submodules a dotted name goes through
            prefix = ".".join(parts[:i])
            if prefix not in made:
                made.add(prefix)
                init.append(f"self.{prefix} = torch.nn.Module()")
        owner, leaf = (f"self.{'.'.join(parts[:-1])}" if len(parts) > 1 else "self"), parts[-1]
        if isinstance(value, torch.fx.GraphModule):
            sub = f"{name}_{leaf}"
            sub_src, sub_imports = module_source(value, real=real, sidecar=sidecar, name=sub)
            classes.append(sub_src)
            imports += [i for i in sub_imports if i not in imports]
            init.append(f"{owner}.{leaf} = {sub}()")
        elif isinstance(value, torch.Tensor):
            holder = fetch_attr(gm, ".".join(parts[:-1])) if len(parts) > 1 else gm
            buffer = leaf in getattr(holder, "_buffers", {})
            init.append(_assign(owner, leaf, value, buffer, real, sidecar))
        else:
            init.append(f"{owner}.{leaf} = {py_literal(value)}")
    body = code.src.strip("\n")
    if init:
        if any("generator=g" in ln for ln in init):
            init.insert(0, "g = torch.Generator().manual_seed(1)")
        init.insert(0, "super().__init__()")
        body = "def __init__(self):\n" + "".join(f"    {ln}\n" for ln in init) + "\n" + body
    text = f"class {name}(torch.nn.Module):\n{textwrap.indent(body, '    ')}\n"
    source = "\n\n\n".join([*classes, text])
    used = [i for i in imports if re.search(rf"\b{re.escape(_bound(i))}\b", source)]
    return source, used


def _assign(
    owner: str,
    leaf: str,
    value: torch.Tensor,
    buffer: bool,
    real: bool,
    sidecar: list[torch.Tensor],
) -> str:
    """One tensor attribute, made as the graph had it: a parameter, a registered buffer
    (both follow ``.to(float64)``), or a plain tensor attribute (a constant)."""
    import torch

    spec = spec_of(value)
    if real and value.numel() <= INLINE_LIMIT:
        spec = with_values(spec, value)
    elif real:
        sidecar.append(real_values(spec, value).clone())
        spec = with_values(spec, value, sidecar_index=len(sidecar) - 1)
    expr = tensor_expr(spec).removesuffix(".requires_grad_()")
    if isinstance(value, torch.nn.Parameter):
        return f"{owner}.{leaf} = torch.nn.Parameter({expr}, requires_grad={value.requires_grad})"
    if buffer:
        return f"{owner}.register_buffer({leaf!r}, {expr})"
    return f"{owner}.{leaf} = {expr}"

"""The accuracy rule, written once: is a compiled tensor acceptably close to eager's?

Non-strict (``--accuracy``): the compiled result may be at most MULTIPLIER times
further from a float64 reference (RMSE) than eager is, plus ULPS steps of the dtype.
Strict (``--strict-accuracy``) and where no float64 reference is usable: compared
with eager directly, within ``eager_tolerance`` (torch.testing.assert_close's
tolerances; loosened when not strict).

Portable: this module imports nothing of tcompile, torch only inside its functions,
and every name in it is public.  Its text *is* the rule every repro.py carries: the
writers generate their checks from it by name (``portable_source``) -- the long form
(repro/writer_full.py) takes ``compare_tensor`` and what it calls, the short form
``differs_loose`` or ``differs_strict``, the program-level check ``eager_tolerance`` -- instead of restating it.
tcompile judges with the same functions (compiler/accuracy.py).  Renaming a function
here changes what repro files contain; tests/unit/test_accuracy_rule.py holds the rule and
the generated checks to one another.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ast

    import torch

# rtol, atol per dtype: torch.testing.assert_close's defaults (float32's for others)
STRICT_TOLERANCES = {
    "torch.float16": (1e-3, 1e-5),
    "torch.bfloat16": (1.6e-2, 1e-5),
    "torch.float32": (1.3e-6, 1e-5),
    "torch.float64": (1e-7, 1e-7),
}
# non-strict: compiled's RMSE to float64 may be MULTIPLIER times eager's + ULPS steps
MULTIPLIER, ULPS = 3.0, 16
# non-strict without a float64 reference: assert_close's tolerances times this ...
LOOSE_SCALE = 100
# ... or this in 16 bits (their tolerances are already a step or two of the dtype)
LOOSE_SCALE_16BIT = 4


def eager_tolerance(dtype: str, strict: bool) -> tuple[float, float]:
    """(rtol, atol) for comparing with eager directly; ``dtype`` as ``str(t.dtype)``."""
    rtol, atol = STRICT_TOLERANCES.get(dtype, STRICT_TOLERANCES["torch.float32"])
    if strict:
        return rtol, atol
    scale = LOOSE_SCALE_16BIT if "16" in dtype else LOOSE_SCALE
    return rtol * scale, atol * scale


def eps(dtype: torch.dtype) -> float:
    """One step of a floating dtype at 1.0 (0.0 for others)."""
    import torch

    return float(torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0


def too_far(
    ref: torch.Tensor, res: torch.Tensor, exact: torch.Tensor, step: float
) -> tuple[bool, float, float, float]:
    """The rule's measure: (wrong?, compiled's RMSE to float64, eager's, the floor)."""
    rms = lambda a: a[a.isfinite()].pow(2).mean().sqrt().item() if a.isfinite().any() else 0.0  # noqa: E731
    exact = exact.double()
    res_err, ref_err = rms(res.double() - exact), rms(ref.double() - exact)
    floor = ULPS * step * (rms(exact) + 1e-30)
    wrong = res_err > MULTIPLIER * ref_err + floor and not math.isclose(res_err, ref_err)
    return wrong, res_err, ref_err, floor


def differs_loose(
    ref: torch.Tensor, res: torch.Tensor, ref64: torch.Tensor, coarse: torch.dtype | None = None
) -> bool:
    """The rule in short, as a short repro.py checks (``compare_tensor`` is the whole
    rule, with its reasons; ``coarse`` as there)."""
    import torch

    if ref.shape != res.shape or ref.dtype != res.dtype or not ref.is_floating_point():
        return ref.shape != res.shape or ref.dtype != res.dtype or not torch.equal(ref, res)
    ref, res, exact = ref.detach().cpu(), res.detach().cpu(), ref64.detach().cpu().double()
    if not torch.equal(finite := ref.isfinite(), res.isfinite()):
        return True
    step = torch.finfo(ref.dtype).eps
    if coarse is not None and torch.equal(exact.to(coarse).double(), exact):
        step = max(step, torch.finfo(coarse).eps)
    return too_far(ref[finite], res[finite], exact[finite], step)[0]


def differs_strict(ref: torch.Tensor, res: torch.Tensor, ref64: torch.Tensor | None = None) -> bool:
    """The strict rule in short: eager's tolerances (``ref64`` is not used)."""
    import torch

    if ref.shape != res.shape or ref.dtype != res.dtype or not ref.is_floating_point():
        return ref.shape != res.shape or ref.dtype != res.dtype or not torch.equal(ref, res)
    rtol, atol = eager_tolerance(str(ref.dtype), True)
    return not torch.allclose(res.cpu(), ref.cpu(), rtol=rtol, atol=atol, equal_nan=True)


def compare_tensor(
    ref: object, res: object, fp64: object, *, strict: bool, coarse: torch.dtype | None = None
) -> str | None:
    """None when ``res`` is acceptable, else a short description of the mismatch.
    ``coarse``: the lower precision of the program's autocast; a reference whose values
    that precision holds exactly (the policy rounded them) gets that precision's floor."""
    import torch

    if not isinstance(ref, torch.Tensor) or not isinstance(res, torch.Tensor):
        if isinstance(ref, torch.Tensor) != isinstance(res, torch.Tensor):
            return f"type {type(res).__name__} where eager gives {type(ref).__name__}"
        try:
            same = bool(ref == res)
        except Exception:
            same = True
        return None if same else f"{res!r} where eager gives {ref!r}"
    if ref.shape != res.shape:
        return f"shape {tuple(res.shape)} where eager gives {tuple(ref.shape)}"
    if ref.dtype != res.dtype:
        return f"dtype {res.dtype} where eager gives {ref.dtype}"
    res = res.detach().cpu()
    ref = ref.detach().cpu()
    if not ref.is_floating_point() and not ref.is_complex():
        if torch.equal(ref, res):
            return None
        n = int((ref != res).sum())
        return f"{n} of {ref.numel()} {ref.dtype} elements differ"
    if ref.is_complex():
        ref, res = torch.view_as_real(ref), torch.view_as_real(res)
        fp64 = (
            torch.view_as_real(fp64)
            if isinstance(fp64, torch.Tensor) and fp64.is_complex()
            else None
        )
    nan_ref, nan_res = ~torch.isfinite(ref), ~torch.isfinite(res)
    if not torch.equal(nan_ref, nan_res):
        # Eager overflowing (or NaN-ing) where the compiled kernel, computing in a wider
        # type, stays finite and agrees with the float64 reference is the compiled
        # kernel being *better*: those elements are not held against it.
        better = None
        if not strict and isinstance(fp64, torch.Tensor) and fp64.shape == ref.shape:
            f64 = fp64.detach().cpu()
            close = (res.double() - f64).abs() <= 8 * eps(ref.dtype) * f64.abs() + 1e-30
            better = nan_ref & ~nan_res & torch.isfinite(f64) & close
        if better is None or not torch.equal(nan_ref & ~better, nan_res):
            differ = (nan_ref != nan_res) if better is None else ((nan_ref & ~better) != nan_res)
            return f"{int(differ.sum())} non-finite values differ from eager"
        keep = ~better
        ref, res, nan_ref = ref[keep], res[keep], nan_ref[keep]
        fp64 = fp64[keep]
        if ref.numel() == 0:
            return None
    usable64 = (
        isinstance(fp64, torch.Tensor)
        and fp64.shape == ref.shape
        and torch.equal(~torch.isfinite(fp64.cpu()), nan_ref)
    )
    if strict or not usable64:
        # strict, or no float64 reference: compared with eager directly
        rtol, atol = eager_tolerance(str(ref.dtype), strict)
        if torch.allclose(res, ref, rtol=rtol, atol=atol, equal_nan=True):
            return None
        diff = float((res.double() - ref.double()).abs().nan_to_num(0).max())
        if not strict:
            return f"max |compiled - eager| = {diff:.3g} (no float64 reference)"
        return f"max |compiled - eager| = {diff:.3g} (strict: rtol={rtol:g}, atol={atol:g})"
    step = eps(ref.dtype)
    if coarse is not None and torch.equal(fp64.to(coarse).double(), fp64.double()):
        step = max(step, eps(coarse))
    wrong, res_err, ref_err, floor = too_far(ref, res, fp64.detach().cpu(), step)
    if not wrong:
        return None
    return (
        f"RMSE vs float64 {res_err:.3g} compiled, {ref_err:.3g} eager "
        f"(allowed {MULTIPLIER:g}x eager + {floor:.2g})"
    )


def portable_source(*names: str) -> str:
    """The text of these definitions of this module and of every one they use, in the
    module's order, docstrings left here: what a repro.py carries of the rule."""
    import ast
    import pathlib
    import re

    text = pathlib.Path(__file__).read_text()
    tree = ast.parse(text)
    defs: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in ast.walk(node.targets[0]):
                if isinstance(target, ast.Name):
                    defs[target.id] = node
    wanted: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        if name not in defs:
            raise KeyError(f"accuracy_rule has no {name!r}")
        wanted.add(name)
        todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name) and n.id in defs]
    lines = text.splitlines()
    parts = []
    for node in tree.body:
        if any(defs.get(n) is node for n in wanted):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            # the comment lines right above a constant belong to it
            while start > 1 and lines[start - 2].startswith("#"):
                start -= 1
            body = lines[start - 1 : node.end_lineno]
            doc = getattr(node, "body", [None])[0]
            if isinstance(node, ast.FunctionDef) and isinstance(doc, ast.Expr):
                if isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                    # the docstring stays here; the repro has the code
                    del body[doc.lineno - start : doc.end_lineno - start + 1]
            text_of = _unannotated("\n".join(body), node, start)
            # a repro.py imports torch at its top: not again in each function
            parts.append(re.sub(r"\n +import torch\n(\n(?= ))?", "\n", text_of))
    return "\n\n".join(parts) + "\n"


def _unannotated(text: str, node: ast.stmt, start: int) -> str:
    """A definition's text without the annotations of its header (a repro.py imports
    no typing): ``def f(a: Any) -> float:`` as ``def f(a):``."""
    import ast

    if not isinstance(node, ast.FunctionDef):
        return text
    lines = text.split("\n")
    spans = []  # (line, start col, end col) to cut, on the header's lines
    for arg in node.args.args + node.args.kwonlyargs:
        if arg.annotation is not None:
            a = arg.annotation
            spans.append((a.lineno, arg.col_offset + len(arg.arg), a.end_col_offset))
    if node.returns is not None:
        r = node.returns
        line = lines[r.lineno - start]
        spans.append((r.lineno, line.rindex(" ->", 0, r.col_offset), r.end_col_offset))
    for lineno, a, b in sorted(spans, reverse=True):
        line = lines[lineno - start]
        rest = line[b:]
        lines[lineno - start] = line[:a] + ("=" + rest[3:] if rest.startswith(" = ") else rest)
    # a header the annotations had wrapped, on one line again where it fits
    first = end = node.lineno - start

    def closed(header: str) -> bool:  # its parentheses balanced, a colon at its end
        return header.count("(") == header.count(")") and header.rstrip().endswith(":")

    while end < len(lines) and not closed("".join(lines[first : end + 1])):
        end += 1
    one = lines[first].rstrip()
    for h in lines[first + 1 : end + 1]:
        one += ("" if one.endswith("(") or h.strip().startswith(")") else " ") + h.strip()
    if end > first and len(one) <= 100:
        lines[first : end + 1] = [one.replace(",)", ")")]
    return "\n".join(lines)

"""One accuracy rule (issue 36): compiler/accuracy_rule.py is the rule; tcompile judges
with it and every repro.py form carries text generated from it, never a restatement.
Fast: no compiles."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest
import torch

from tcompile.compiler import accuracy, accuracy_rule
from tcompile.repro import program_harness, snippets, writer_full

ROOT = Path(__file__).resolve().parents[2]


def _exec(text: str) -> dict:
    ns: dict = {"torch": torch, "math": math}
    exec(text, ns)  # noqa: S102 -- tcompile's own generated text
    return ns


def _battery():
    """(eager, compiled, float64) triples from exact to far off, 32- and 16-bit, with
    non-finite values and integers."""
    out = []
    for seed, scale in enumerate([0, 1e-7, 1e-6, 1e-5, 1e-3, 0.1, 1.0, 10.0]):
        g = torch.Generator().manual_seed(seed)
        exact = torch.randn(32, generator=g, dtype=torch.float64)
        noise = scale * torch.randn(32, generator=g, dtype=torch.float64)
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            out.append((exact.to(dtype), (exact + noise).to(dtype), exact))
    inf = torch.tensor([1.0, float("inf"), 3.0])
    out.append((inf, torch.tensor([1.0, 2.0, 3.0]), inf.double()))
    out.append((torch.arange(4), torch.arange(4), torch.arange(4).double()))
    out.append((torch.arange(4), torch.arange(4) + 1, torch.arange(4).double()))
    out.append((torch.ones(3), torch.ones(4), torch.ones(3).double()))
    return out


def test_the_rule_is_portable_text_that_runs_with_torch_and_math_alone():
    tree = ast.parse((ROOT / "compiler" / "accuracy_rule.py").read_text())
    imports = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.level or "tcompile" in (n.module or ""))
    ]
    assert not imports, "the rule imports nothing of tcompile: a repro carries its text"
    for node in tree.body:
        name = getattr(node, "name", None)
        if name and name not in ("_unannotated", "portable_source"):
            assert not name.startswith("_"), f"{name}: a repro's text has public names only"
    ns = _exec(accuracy_rule.portable_source("compare_tensor", "differs_loose", "differs_strict"))
    assert {"compare_tensor", "differs_loose", "differs_strict", "eager_tolerance"} <= set(ns)
    text = accuracy_rule.portable_source("differs_loose")
    assert "Any" not in text and '"""' not in text  # no annotations, no docstrings
    assert "Tensor" not in text and "def differs_loose(ref, res, ref64, coarse=None):" in text
    assert "import torch" not in text  # a repro.py imports it once, at its top


def test_tcompile_judges_with_the_rule_itself():
    assert accuracy.compare_tensor is accuracy_rule.compare_tensor


@pytest.mark.parametrize("strict", [False, True])
def test_the_short_form_agrees_with_the_whole_rule(strict):
    ns = _exec(snippets.STRICT if strict else snippets.LOOSE)
    for eager, compiled, exact in _battery():
        whole = accuracy_rule.compare_tensor(eager, compiled, exact, strict=strict) is not None
        differs = ns["differs_strict" if strict else "differs_loose"]
        assert differs(eager, compiled, exact) == whole, (eager, compiled, strict)


def test_the_long_form_carries_the_rule_and_no_private_name():
    helpers = writer_full._helpers()
    assert accuracy_rule.portable_source("compare_tensor") in helpers
    # every definition a long repro.py carries has a public name in tcompile
    names = re.findall(r"^(?:def|class) (\w+)", helpers, flags=re.M)
    assert names and not [n for n in names if n.startswith("_")]


@pytest.mark.parametrize("strict", [False, True])
def test_the_program_check_uses_the_rules_tolerances(strict):
    prelude = program_harness.accuracy_check(strict)
    assert accuracy_rule.portable_source("eager_tolerance").strip() in prelude
    ns = _exec(accuracy_rule.portable_source("eager_tolerance"))
    for dtype in accuracy_rule.STRICT_TOLERANCES:
        assert ns["eager_tolerance"](dtype, strict) == accuracy_rule.eager_tolerance(dtype, strict)
    # and without a float64 reference, the graph check compares with eager the same way
    x = torch.ones(8, dtype=torch.bfloat16)
    y = x + 0.05  # 5%: inside bfloat16's x100 tolerance, outside its x4 one
    graph_says = accuracy_rule.compare_tensor(x, y, None, strict=strict) is not None
    rtol, atol = accuracy_rule.eager_tolerance("torch.bfloat16", strict)
    assert graph_says == (not torch.allclose(y, x, rtol=rtol, atol=atol))

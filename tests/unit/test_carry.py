"""What a repro carries of the program's own code (child/torch_config.py): the source
of a pass, decomposition or backend and everything it reaches, runnable in a namespace
that holds only torch.  No compiles."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from tcompile.compiler.child.torch_config import name_of, object_of, source_of
from tcompile.compiler.configs import config_source

DATA = Path(__file__).resolve().parents[1] / "data" / "carried.py"


def _module():
    spec = importlib.util.spec_from_file_location("carried_under_test", DATA)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as the program's own modules are (inspect finds classes)
    spec.loader.exec_module(mod)
    return mod


def _run(source: str) -> dict:
    namespace = {"torch": torch, "__file__": __file__}  # as in a repro: its own file
    exec(compile(source, "<repro>", "exec"), namespace)  # noqa: S102
    return namespace


def test_a_pass_object_carries_its_imports_helpers_and_constants():
    mod = _module()
    lines, extra = config_source({"post_grad_custom_post_pass": object_of(mod.MulToSub())})
    ns = _run(lines + "\n" + extra)
    obj = ns["inductor_config"].post_grad_custom_post_pass
    assert type(obj).__name__ == "MulToSub"
    assert isinstance(obj.uuid(), bytes)  # get_hash_for_files came along
    assert ns["SCALE"] == 2.0 and ns["LIMITS"]["low"] == float("-inf")
    assert "/" not in extra.split("class MulToSub")[0].replace("</", "")  # no paths


def test_a_lambda_is_carried_by_its_source():
    mod = _module()
    fn = mod.TABLE["gelu"]
    name = name_of(fn, "aten.gelu.default")
    assert name.isidentifier()
    ns = _run(source_of(fn, "aten.gelu.default"))
    x = torch.randn(5)
    assert torch.equal(ns[name](x), fn(x))


def test_closure_values_are_carried():
    fn = _module().make_pass(3.5)
    ns = _run(source_of(fn))
    assert torch.equal(ns["shifted"](torch.zeros(2)), torch.full((2,), 3.5))


def test_a_decomposition_table_with_a_lambda_parses_and_runs():
    mod = _module()
    fn = mod.TABLE["gelu"]
    table = {
        "changed": {
            "aten.gelu.default": {
                "function": name_of(fn, "aten.gelu.default"),
                "source": source_of(fn, "aten.gelu.default"),
            }
        },
        "removed": [],
    }
    lines, extra = config_source({"decomposition_table": table})
    ns = _run(lines + "\n" + extra)
    import torch._inductor.compile_fx as compile_fx

    original = compile_fx.select_decomp_table
    try:
        chosen = ns["program_table"]()[torch.ops.aten.gelu.default]
        assert torch.equal(chosen(torch.ones(3)), fn(torch.ones(3)))
    finally:
        compile_fx.select_decomp_table = original

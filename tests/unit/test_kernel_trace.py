"""kernel_repro.py's choice of kernel (compiler/kernel_trace.py) on hand-made launch
events: pure, no GPU, no tritonparse."""

import torch

from tcompile.compiler.kernel_trace import _culprit, kernel_source
from tcompile.repro.kernel_repro import render


def _launch(name, **args):
    return {"event_type": "launch", "name": name, "extracted_args": args}


def _out(t, offset=0, shape=None):
    shape = list(shape or t.shape)
    return {
        "type": "tensor",
        "data_ptr": hex(t.data_ptr() + offset * t.element_size()),
        "shape": shape,
        "stride": list(torch.empty(shape).stride()),
    }


def test_the_last_writer_of_the_wrong_region_is_the_culprit():
    got = torch.zeros(2, 4)
    want = got.clone()
    want[1] = 5.0  # the second row is wrong in the compiled output
    events = [
        _launch("fill_zeros_0", out_ptr0=_out(got)),  # the whole buffer, first
        _launch("first_row_1", out_ptr0=_out(got, 0, [4])),  # right
        _launch("second_row_2", out_ptr0=_out(got, 4, [4])),  # wrong
        _launch("reads_only_3", in_ptr0=_out(got)),  # not a writer
    ]
    d, ev, name, index, at = _culprit(events, [got], [want])
    assert ev["name"] == "second_row_2" and name == "out_ptr0" and (index, at) == (0, 4)
    assert d > 0.9


def test_no_culprit_when_every_output_is_right():
    got = torch.ones(3)
    assert _culprit([_launch("k", out_ptr0=_out(got))], [got], [got.clone()]) is None


def test_the_kernel_is_a_plain_jit_function_with_its_module_imports(tmp_path):
    mod = tmp_path / "k.py"
    mod.write_text(
        "import triton\nimport triton.language as tl\nfrom torch._inductor.runtime import "
        "triton_helpers\n\n@triton_heuristics.pointwise(size_hints={'x': 8})\n@triton.jit\n"
        "def k(in_ptr0, out_ptr0, XBLOCK: tl.constexpr):\n    pass\n"
    )
    code = mod.read_text()[mod.read_text().index("@triton_heuristics") :]
    comp = {"payload": {"python_source": {"code": code, "file_path": str(mod), "start_line": 5}}}
    header, source = kernel_source(comp)
    assert source.startswith("@triton.jit\ndef k(") and "triton_heuristics" not in source
    assert "from torch._inductor.runtime import triton_helpers" in header
    doc = {
        "kernel": "k",
        "output": "out_ptr0",
        "output_index": 0,
        "relative_error": 1.0,
        "header": header,
        "source": source,
        "grid": [1, 1, 1],
        "view": [[8], [1]],
        "at": 0,
        "args": [
            {"name": "in_ptr0", "type": "tensor", "shape": [8], "stride": [1]},
            {"name": "out_ptr0", "type": "tensor", "shape": [8], "stride": [1]},
            {"name": "XBLOCK", "type": "int", "value": 8},
        ],
    }
    text = render(doc, "0")
    compile(text, "kernel_repro.py", "exec")
    assert "k[GRID](**ARGS" in text and "'XBLOCK': 8" in text


def test_a_kernel_that_fails_to_compile_is_launched_with_placeholders():
    from tcompile.repro.kernel_repro import render_compile

    doc = {
        "mode": "triton",
        "kernel": "triton_poi_fused__to_copy_0",
        "source": "@triton.jit\ndef triton_poi_fused__to_copy_0(in_ptr0, out_ptr0, xnumel, "
        "XBLOCK: tl.constexpr):\n    pass\n",
        "header": "import triton\nimport triton.language as tl",
        "signature": {
            "in_ptr0": "*i32",
            "out_ptr0": "*fp8e5",
            "xnumel": "i32",
            "XBLOCK": "constexpr",
        },
        "constants": {"XBLOCK": 16},
        "num_warps": 1,
        "num_stages": 1,
        "exception": {"type": "CompilationError", "message": "at 8:11:\n...\ncannot cast int32"},
    }
    text = render_compile(doc, "0")
    compile(text, "kernel_repro.py", "exec")
    assert "dtype=torch.float8_e5m2" in text and "'xnumel': 16" in text
    assert "**CONSTANTS, num_warps=1" in text and "CONSTANTS = {'XBLOCK': 16}" in text
    assert "#   CompilationError: cannot cast int32" in text


def test_a_kernel_module_that_does_not_load_reproduces_on_its_own(tmp_path):
    """Mode "source" (the generated module does not parse): the repro needs no GPU."""
    import subprocess
    import sys

    from tcompile.repro.kernel_repro import render_compile

    module = "import triton\n@triton.jit\ndef k(x):\n    tmp1 = compile error!\n"
    doc = {
        "mode": "source",
        "kernel": "k",
        "module": module,
        "exception": {"type": "SyntaxError", "message": "invalid syntax (k.py, line 4)"},
    }
    path = tmp_path / "kernel_repro.py"
    path.write_text(render_compile(doc, "0"))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stdout.startswith("REPRODUCED: SyntaxError"), proc
    path.write_text(render_compile({**doc, "module": "x = 1\n"}, "0"))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0 and "NOT REPRODUCED" in proc.stdout, proc

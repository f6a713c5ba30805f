"""Real bugs from PyTorch's tracker (fixtures/real/, each still failing on torch 2.13
CPU): `run` classifies every one; `bisect` and `minify` get a representative handful
right.  Slow: a real compile per fixture."""

import json

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow

REAL = FIXTURES / "real"
MANIFEST = {e["file"]: e for e in json.loads((REAL / "MANIFEST.json").read_text())}

# what `tcompile run --accuracy` says of each: (kind, words its signature holds,
# graph kind or None)
EXPECTED = {
    "adaptive_avgpool1d_argmax_transposed.py": ("accuracy", "inference output differs", None),
    "adaptive_maxpool2d_indices_transposed.py": ("accuracy", "inference output differs", None),
    "adaptive_maxpool3d_channels_last_grad.py": ("accuracy", "backward grad differs", "backward"),
    "amax_bf16_backward_nan.py": ("accuracy", "backward grad differs", "backward"),
    "any_uint8_returns_bool.py": ("accuracy", "DtypeMismatch", None),
    "amp_outer_autocast_backward_precision.py": ("accuracy", "backward grad differs", "backward"),
    "atan2_amin_wrong_grad.py": ("accuracy", "backward grad differs", "backward"),
    "autocast_inner_disabled_backward.py": ("accuracy", "backward grad differs", "backward"),
    "autocast_block_head_fp32_grad.py": ("accuracy", "backward grad differs", "backward"),
    "conv_maxpool_where_wrong_grads.py": ("accuracy", "backward grad differs", "backward"),
    "cumsum_dtype_pattern_matcher.py": ("accuracy", "DtypeMismatch", None),
    "gaussian_nll_loss_fullgraph_dde.py": ("capture", "Could not guard on data-dependent", None),
    "groupnorm_eval_decomposition.py": ("runtime", "AssertionError", None),
    "int8_minmax_argmin_reduction.py": ("accuracy", "inference output differs", None),
    "interpolate_inplace_backward_error.py": ("runtime", "modified by an inplace", "backward"),
    "jacfwd_fp16_cpp_compile_error.py": ("compile", "CppCompileError", None),
    "oob_index_parallel_abort.py": ("crash", "SIGABRT", None),
    "split_normalization_pass_uneven.py": ("compile", "Split sizes add up", None),
    "stale_float_rms_norm_eps.py": ("accuracy", "inference output differs", None),
    "strided_input_inplace_as_strided_copy.py": ("accuracy", "output differs", None),
    "sum_int32_of_inf_overflow.py": ("compile", "OverflowError", None),
    "uint8_abs_cat_sum.py": ("accuracy", "inference output differs", None),
    "while_loop_cond_aliasing.py": ("compile", "cond_fn might be aliasing", None),
    "while_loop_int_carry_inductor.py": ("compile", "AssertionError", None),
}


def _json(*args):
    r = run_tcompile(*args)
    assert "Traceback" not in r.stdout, r.stderr[-3000:]
    return r, json.loads(r.stdout)


def test_every_real_fixture_has_an_expectation():
    assert set(EXPECTED) == set(MANIFEST) and len(MANIFEST) >= 15


def check_real_bug(doc, name):
    """What `tcompile run --accuracy` must say of a real bug (EXPECTED):
    tests/e2e/test_differential.py runs every fixture in every mode and calls this on the
    --accuracy run of each real bug."""
    kind, words, graph_kind = EXPECTED[name]
    assert doc["exit_code"] == 1, (name, doc["explanation"])
    groups = [
        g for g in doc["groups"] if g["kind"] == kind and words in g["signature"] + g["message"]
    ]
    assert groups, (name, [g["signature"] for g in doc["groups"]])
    if graph_kind:
        assert graph_kind in groups[0]["graph_kinds"], groups[0]
    if name == "groupnorm_eval_decomposition.py":  # compiled is more precise: said, not hidden
        assert "more precise than eager" in groups[0]["message"]


@pytest.mark.parametrize(
    "name",
    [
        "split_normalization_pass_uneven.py",  # a nested config dict (fusion options) carried
        "while_loop_cond_aliasing.py",
        pytest.param(  # a graph that runs a functorch transform: its AOT graph
            "jacfwd_fp16_cpp_compile_error.py", marks=pytest.mark.extended
        ),
        pytest.param(  # a CustomGraphPass object carried along (test_faithful carries one too)
            "custom:../custom_graph_pass_bug.py", marks=pytest.mark.extended
        ),
    ],
)
def test_minify_real_bugs_to_verified_repros(name, tmp_path):
    path = REAL / name.split(":")[1] if name.startswith("custom:") else REAL / name
    r, doc = _json("minify", "--accuracy", "--json", "--out", str(tmp_path), str(path))
    assert r.returncode == 1 and doc["verified"], (name, doc["message"])
    text = open(doc["repro"]).read()
    if name.startswith("custom:"):
        assert "class MulToSub(CustomGraphPass)" in text and doc["nodes_after"] == 1
    if name.startswith("jacfwd"):  # short, compiled as inductor compiles an AOT graph
        assert doc["repro_form"] == "short" and "compile_fx_inner" in text
        assert doc["nodes_after"] <= 8 and "_add_batch_dim" not in text


def test_minify_says_a_graphless_failure_is_not_a_capture_failure(tmp_path):
    # --level graph: what the graph level says of it (auto goes on to the program level,
    # minutes of candidate runs: docs/program-minify.md)
    r, doc = _json(
        "minify",
        "--accuracy",
        "--level",
        "graph",
        "--json",
        "--out",
        str(tmp_path),
        str(REAL / "groupnorm_eval_decomposition.py"),
    )
    assert r.returncode == 1 and doc["repro"] is None
    assert "outside any compiled graph" in doc["message"] and "capture" not in doc["message"]
    assert "more precise" in doc["message"]

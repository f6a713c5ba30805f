"""GPU checks (Triton codegen, CUDA faults, CUDA graphs, low precision, replay).

Skipped without CUDA.  `bash scripts/gpu_tests.sh` runs them on a GPU machine and
writes a results table.
"""

import json

import pytest
import torch

from helpers import FIXTURES, run_tcompile
from tcompile.compiler.signature import CUDA_FATAL

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def _json(*args, tmp_path, name, **kw):
    r = run_tcompile(*args[:1], "--json", "--out", str(tmp_path / name), *args[1:], **kw)
    assert "Traceback (most recent call last)" not in r.stdout, r.stdout[-3000:]
    try:
        return r, json.loads(r.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"exit {r.returncode}: {r.stderr[-3000:]}") from None


def _minified_relu_on_cuda(doc):
    assert doc["verified"] and doc["nodes_after"] == 1, doc
    text = open(doc["repro"]).read()
    assert "torch.relu(" in text and "'cuda:0'" in text


def test_triton_relu_accuracy_run_bisect_minify(tmp_path):
    fixture = str(FIXTURES / "gpu_triton_relu_accuracy.py")
    r, doc = _json("run", "--accuracy", fixture, tmp_path=tmp_path, name="run")
    assert [(f["kind"], f["graph"]) for f in doc["failures"]] == [("accuracy", 0)]
    r, doc = _json("bisect", "--accuracy", fixture, tmp_path=tmp_path, name="bisect")
    assert (doc["stage"], doc["subsystem"]) == ("inductor", "lowerings"), doc
    assert "relu" in doc["detail"]
    r, doc = _json("minify", "--accuracy", fixture, tmp_path=tmp_path, name="min")
    _minified_relu_on_cuda(doc)


@pytest.mark.parametrize("bug", ["compile_error", "runtime_error"])
def test_triton_relu_bugs_bisect_and_minify(bug, tmp_path):
    fixture = str(FIXTURES / f"gpu_triton_relu_{bug}.py")
    r, doc = _json("run", fixture, tmp_path=tmp_path, name="run")
    [failure] = doc["failures"]
    # a device-side assert poisons the CUDA context: a crash, not a runtime error
    assert failure["kind"] == ("compile" if bug == "compile_error" else "crash"), failure
    assert failure["graph"] == 0
    # the device assert fires on every run: one run per configuration is enough (the
    # default, 3 for a crash, takes this test past 10 minutes on one GPU)
    r, doc = _json("bisect", "--repeat", "1", fixture, tmp_path=tmp_path, name="bisect")
    assert (doc["stage"], doc["subsystem"]) == ("inductor", "lowerings"), doc
    assert "relu" in doc["detail"]
    r, doc = _json("minify", fixture, tmp_path=tmp_path, name="min")
    _minified_relu_on_cuda(doc)
    if bug == "compile_error":  # the generated kernel does not parse: its module alone
        kr = doc["kernel_repro"]
        assert kr and kr.get("verified") and kr["mode"] == "source", kr
        assert "compile error!" in open(kr["path"]).read()


def test_faulting_kernel_is_a_crash_and_workers_are_replaced(tmp_path):
    fixture = str(FIXTURES / "gpu_cuda_fault.py")
    r, doc = _json("run", fixture, tmp_path=tmp_path, name="run")
    assert r.returncode == 1
    [failure] = doc["failures"]
    fields = failure["signature_fields"]
    assert (failure["kind"], failure["graph"], fields["exc_type"]) == ("crash", 0, "CUDAError")
    # an illegal address: "illegal memory access" or, this far out, "operation not
    # supported on global/shared address space" (cudaErrorInvalidAddressSpace)
    assert any(p in fields["message"] for p in CUDA_FATAL), fields
    r, doc = _json("minify", fixture, tmp_path=tmp_path, name="min")
    # each faulting candidate retires its worker; the rest run in fresh CUDA contexts
    assert doc["worker_restarts"] >= 1, doc
    # shrinking to the one relu node needs candidates without it judged "pass" after
    # a fault: in a poisoned context every candidate would fail
    assert doc["verified"] and doc["nodes_after"] == 1, doc
    assert "relu_kernel_backend" in open(doc["repro"]).read()


def test_cudagraphs_only_bug_bisects_to_cudagraphs(tmp_path):
    fixture = str(FIXTURES / "gpu_cudagraphs_overwrite.py")
    r, doc = _json("run", fixture, tmp_path=tmp_path, name="run")
    assert r.returncode == 1, doc
    r, doc = _json("bisect", fixture, tmp_path=tmp_path, name="bisect")
    assert doc["stage"] == "inductor" and doc["subsystem"] == "cudagraphs", doc
    # the error is CUDA graph trees' own and the program passes with them off: the run
    # with them off is the answer (repro/jobs/owned.py), 2 runs of the program in all
    assert doc["runs"] == 2 and doc["confirmed"] == "pass", doc


@pytest.mark.parametrize(
    "script", ["c6_122192_warmup_count_inconsistent.py", "c6_169545_grad_accumulation_error.py"]
)
def test_real_cuda_graph_tree_failures_bisect_in_two_runs(script, tmp_path):
    """Issue 61: the tracker's CUDA-graph failures (outside any graph) in 2 program runs."""
    fixture = str(FIXTURES / "real_gpu" / script)
    r, doc = _json("bisect", fixture, tmp_path=tmp_path, name="bisect")
    assert r.returncode == 1 and doc["subsystem"] == "cudagraphs", doc
    assert doc["runs"] == 2 and doc["graph"] is None, doc


def test_half_more_precise_kernel_is_not_reported(tmp_path):
    fixture = str(FIXTURES / "gpu_half_more_precise.py")
    r, doc = _json("run", "--accuracy", fixture, tmp_path=tmp_path, name="loose")
    assert r.returncode == 0 and doc["failures"] == [], doc["failures"]
    # compared with eager directly, the results do differ: the float64 reference is
    # what says the compiled one is the better
    r, doc = _json("run", "--strict-accuracy", fixture, tmp_path=tmp_path, name="strict")
    assert [f["kind"] for f in doc["failures"]] == ["accuracy"], doc


def test_bf16_accuracy_bug_is_reported(tmp_path):
    fixture = str(FIXTURES / "gpu_bf16_relu_accuracy.py")
    r, doc = _json("run", "--accuracy", fixture, tmp_path=tmp_path, name="run")
    assert [(f["kind"], f["graph"]) for f in doc["failures"]] == [("accuracy", 0)], doc


def test_record_and_replay_on_cuda(tmp_path):
    fixture = str(FIXTURES / "gpu_capture_module.py")
    r, doc = _json("run", fixture, tmp_path=tmp_path, name="run")
    [failure] = doc["failures"]
    assert failure["kind"] == "capture" and failure["record"]
    r, info = _json("replay", "--info", failure["record"], tmp_path=tmp_path, name="info")
    assert "cuda" in info["arguments"]["x"]
    r, rep = _json("replay", failure["record"], tmp_path=tmp_path, name="replay")
    assert r.returncode == 1 and rep["outcome"] == "reproduced", rep["explanation"]
    r, rep = _json("replay", "--no-fullgraph", failure["record"], tmp_path=tmp_path, name="replay2")
    assert r.returncode == 0, rep["explanation"]


def test_fault_reported_later_is_pinned_to_the_graph(tmp_path):
    """The fault shows at the program's own .item(), outside any graph: it is still a
    crash in graph 0 (the graph that ran last), confirmed by the plain re-run."""
    fixture = str(FIXTURES / "gpu_cuda_fault_later.py")
    r, doc = _json("run", fixture, tmp_path=tmp_path, name="run")
    assert r.returncode == 1, doc
    [failure] = doc["failures"]
    assert (failure["kind"], failure["graph"]) == ("crash", 0), failure
    assert failure["signature_fields"]["exc_type"] == "CUDAError"


def test_the_accuracy_check_does_not_hide_a_cuda_graph_sequence_bug(tmp_path):
    """Issue 22: the check adds no call of the compiled graph, so the program's own
    sequence of CUDA-graph replays -- and its failure -- stays as it is."""
    fixture = str(FIXTURES / "gpu_cudagraphs_overwrite.py")
    r, doc = _json("run", "--accuracy", fixture, tmp_path=tmp_path, name="run")
    assert r.returncode == 1 and doc["returncode"] != 0, doc["explanation"]
    assert any("overwritten" in f["message"] for f in doc["failures"]), doc["failures"]


def test_program_level_minify_of_a_cuda_graph_sequence_bug(tmp_path):
    """Issue 23: no graph holds a failure of the sequence of calls: the program shrinks."""
    fixture = str(FIXTURES / "gpu_cudagraphs_overwrite.py")
    r, doc = _json("minify", "--jobs", "2", fixture, tmp_path=tmp_path, name="minify")
    assert r.returncode == 1 and doc["level"] == "program" and doc["verified"], doc["message"]
    assert doc["program"]["lines_after"] <= doc["program"]["lines_before"]
    assert "reduce-overhead" in open(doc["repro"]).read()


def test_max_autotune_failing_choice_is_pinned_in_the_repro(tmp_path):
    # pytorch#173068 (fixtures/real_gpu/): autotuning's verification rejects a Triton conv
    # template choice; in a fresh process without that verification, autotuning may pick
    # a correct choice, so the repro compiles with the failing one alone
    fixture = str(FIXTURES / "real_gpu" / "c5_173068_conv_template_incorrect_choice.py")
    r, doc = _json("minify", fixture, tmp_path=tmp_path, name="min")
    assert doc["verified"] and doc["pinned_choice"], doc
    assert (
        doc["pinned_choice"].startswith("TritonTemplateCaller(")
        and "num_warps=" in doc["pinned_choice"]
    )
    text = open(doc["repro"]).read()
    assert "autotune_choice_desc_regex" in text and "max_autotune = True" in text
    # the repro does not need autotuning's verification: no code line sets it (a comment
    # saying the program set it, and why it is not restated, is fine)
    code = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    assert not any("VERIFY" in ln for ln in code), text


def test_triton_accuracy_bug_gets_a_kernel_repro(tmp_path):
    """kernel_repro.py: the Triton kernel that writes the wrong value, launched alone
    with the arguments it had, against eager (needs tritonparse)."""
    pytest.importorskip("tritonparse")
    fixture = str(FIXTURES / "gpu_triton_relu_accuracy.py")
    r, doc = _json("minify", "--accuracy", fixture, tmp_path=tmp_path, name="min")
    _minified_relu_on_cuda(doc)
    kr = doc["kernel_repro"]
    assert kr and kr.get("verified"), kr
    text = open(kr["path"]).read()
    assert "@triton.jit" in text and kr["kernel"] in text and "relu" in kr["kernel"]
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, kr["path"]], capture_output=True, text=True)
    assert proc.returncode == 1 and "REPRODUCED" in proc.stdout, proc.stdout + proc.stderr


def test_a_kernel_triton_cannot_compile_gets_a_kernel_repro(tmp_path):
    """#151018 (int32 -> float8_e5m2): Triton's compile of the generated kernel fails;
    kernel_repro.py is that kernel alone, launched with placeholders of its signature."""
    fixture = str(FIXTURES / "real_gpu" / "c4_151018_int_to_float8_triton.py")
    r, doc = _json("minify", fixture, tmp_path=tmp_path, name="min")
    assert doc["verified"], doc
    kr = doc["kernel_repro"]
    assert kr and kr.get("verified") and kr["mode"] == "triton", kr
    assert "CompilationError" in kr["says"] and "fp8" in open(kr["path"]).read()

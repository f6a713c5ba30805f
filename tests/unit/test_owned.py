"""repro/jobs/owned.py: which failures outside any graph are a subsystem's own words
(pure: no compile; the runs are tests/gpu/test_gpu.py's and test_run_e2e's)."""

from tcompile.compiler.failure import Failure
from tcompile.compiler.signature import FailureSignature
from tcompile.repro.jobs.owned import owned_note, owner, switch

# torch 2.11's words (#122192, #169545 on an H200)
OVERWRITTEN = (
    "Error: accessing tensor output of CUDAGraphs that has been overwritten by a subsequent "
    'run. Stack trace: File "x.py", line 9. To prevent overwriting, clone the tensor '
    "outside of torch.compile() or call torch.compiler.cudagraph_mark_step_begin() before "
    "each model invocation."
)


def test_cuda_graph_trees_words_name_cudagraphs_and_nothing_else_does():
    assert owner(OVERWRITTEN) == "cudagraphs"
    assert owner("RuntimeError: static input data pointer changed.") == "cudagraphs"
    for other in (None, "", "mat1 and mat2 shapes cannot be multiplied", "CUDA error: an "
                  "illegal memory access was encountered"):  # fmt: skip
        assert owner(other) is None


def test_the_switch_turns_off_every_application_and_nothing_else():
    assert switch("cudagraphs") == {"limits": {"cudagraphs": 0}, "toggles": {}}


def test_the_note_says_whose_words_and_what_passed():
    sig = FailureSignature(stage="inductor", kind="runtime", exc_type="RuntimeError",
                           message=OVERWRITTEN)  # fmt: skip
    f = Failure(graph=None, graph_kind="dynamo", signature=sig, message=OVERWRITTEN)
    owned_note(f, "cudagraphs")
    assert f.passes_without == "cudagraphs"
    assert f.to_json()["passes_without"] == "cudagraphs"
    assert "CUDA graph trees' own words" in f.message
    assert "a later run of the tree reused the memory" in f.message
    assert "passes with inductor's cudagraphs off" in f.message
    assert Failure.from_json(f.to_json()).passes_without == "cudagraphs"

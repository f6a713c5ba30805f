import pytest

from tcompile.compiler.child.recorder import Recorder
from tcompile.compiler.protocol import HookConfig, read_events, read_markers


def test_config_roundtrip_and_schema():
    cfg = HookConfig(dir="/tmp/x", stage="aot_eager", accuracy="strict", gate=[1, 3])
    assert HookConfig.from_env(cfg.to_env()) == cfg
    with pytest.raises(ValueError):
        HookConfig.from_env('{"dir": "/x", "schema": 99}')


def test_recorder_events_and_marker(tmp_path):
    rec = Recorder(str(tmp_path))
    rec.emit("graph", index=0, nodes=3)
    rec.mark(0, 2, "backward")
    events = read_events(tmp_path)
    assert [e["event"] for e in events] == ["graph"]
    (marker,) = read_markers(tmp_path).values()
    assert marker == {"graph": 0, "phase": "run", "graph_kind": "backward"}
    # a line cut short by a crash is skipped, not fatal
    with open(next(tmp_path.glob("events-*.jsonl")), "a") as f:
        f.write('{"event": "fail')
    assert len(read_events(tmp_path)) == 1


def _result(events, returncode=1):
    from tcompile.compiler.runner import ProcessResult

    return ProcessResult(
        returncode=returncode,
        seconds=1.0,
        timed_out=False,
        stderr_tail=[],
        events=events,
        markers={},
        run_dir="/nonexistent",
    )


_GRAPH = {"event": "graph", "pid": 1, "index": 0, "kind": "dynamo", "stage": "inductor"}
_CUDA_SIG = {
    "stage": "script",
    "kind": "crash",
    "exc_type": "CUDAError",
    "message": "CUDA error: an illegal memory access was encountered",
    "frame": "train.py:40 in main",
}


def test_async_cuda_fault_is_pinned_to_the_graph_that_ran_last():
    """A faulting kernel reported at a later synchronisation, outside any graph."""
    from tcompile.compiler.collect import collect

    exc = {
        "event": "exception",
        "pid": 1,
        "dynamo": False,
        "signature": _CUDA_SIG,
        "message": "AcceleratorError: CUDA error: an illegal memory access was encountered",
        "after_graph": 0,
        "after_graph_kind": "forward",
        "after_stage": "inductor",
    }
    _, failures, _ = collect(_result([_GRAPH, exc]))
    [f] = failures
    assert (f.graph, f.graph_kind, f.kind, f.stage) == (
        0,
        "forward",
        "crash",
        "inductor",
    )
    assert f.signature.exc_type == "CUDAError"
    assert f.unconfirmed  # the plain re-run still decides whether it is the program's own
    # the graph reported it itself (synchronised at its first call): not twice
    own = {
        "event": "failure",
        "pid": 1,
        "graph": 0,
        "graph_kind": "forward",
        "kind": "crash",
        "stage": "inductor",
        "signature": {**_CUDA_SIG, "stage": "inductor"},
    }
    _, failures, _ = collect(_result([_GRAPH, own, exc]))
    assert [f.kind for f in failures] == ["crash"] and not failures[0].unconfirmed


def test_cuda_fatal_errors_are_crashes():
    from tcompile.compiler.signature import FailureSignature, cuda_fatal_message

    inner = RuntimeError("CUDA error: device-side assert triggered\nCUDA kernel errors might be")
    outer = RuntimeError("wrapped")
    outer.__cause__ = inner
    assert cuda_fatal_message(outer) == "CUDA error: device-side assert triggered"
    sig = FailureSignature.from_exception("inductor", "runtime", outer)
    assert (sig.kind, sig.exc_type) == ("crash", "CUDAError")
    assert (
        FailureSignature.from_exception(
            "inductor", "runtime", RuntimeError("CUDA out of memory")
        ).kind
        == "runtime"
    )


def test_a_function_torch_makes_inside_another_crosses_by_name():
    """F.adaptive_max_pool2d is made inside boolean_dispatch (qualname with <locals>):
    a graph holding it is saved for the workers by its module and name, not pickled."""
    import torch.nn.functional as F

    from tcompile.compiler.graph_io import _resolve_target, _target_ref

    ref = _target_ref(F.adaptive_max_pool2d)
    assert ref == ("fn", "torch.nn.functional", "adaptive_max_pool2d")
    assert _resolve_target(ref) is F.adaptive_max_pool2d


def test_a_launched_jobs_failure_is_the_first_rank_that_raised():
    """Issue 37: a job's failure outside any graph is the first rank's exception (by
    time), with every rank that raised -- not torchrun's ChildFailedError (rank null)."""
    from tcompile.compiler.collect import dying_exception
    from tcompile.compiler.runner import ProcessResult
    from tcompile.repro.jobs.classify import _graphless_failure

    def exc(t, rank, text):
        sig = {"stage": "script", "kind": "exception", "exc_type": text.split(":")[0],
               "message": text, "frame": "x.py:1 in f"}  # fmt: skip
        e = {"event": "exception", "time": t, "signature": sig, "message": text}
        return e | ({"rank": rank, "world_size": 2} if rank is not None else {})

    events = [
        exc(2.0, 1, "AssertionError: rank 1 differs"),
        exc(1.0, 0, "AssertionError: rank 0 differs"),
        exc(3.0, None, "ChildFailedError: ==="),  # torchrun's own, last
    ]
    result = ProcessResult(1, 1.0, False, [], events, {}, "/nonexistent")
    assert dying_exception(result)["rank"] == 0
    f = _graphless_failure(result, [], None, [])
    assert f.rank == 0 and f.ranks_raised == [0, 1] and f.signature.exc_type == "AssertionError"
    assert "raised on rank 0 first; ranks 1 raised too" in f.message


def test_a_note_every_rank_says_is_shown_once_with_its_ranks():
    from tcompile.compiler.collect import _add_note

    notes: list = []
    for rank in (1, 0, 1):
        _add_note(notes, {"graph": 0, "text": "holds collectives", "rank": rank})
    _add_note(notes, {"graph": None, "text": "other"})
    assert notes == [
        {"graph": 0, "text": "holds collectives", "ranks": [0, 1]},
        {"graph": None, "text": "other"},
    ]

"""Bisect from the capture (repro/jobs/capture_bisect.py): the search on the failing
graph the baseline saved, one whole-program run to confirm.  Fast: the graph-scoped
counter, the reasons the program bisect takes over, the culprit's place among the
program's applications.  Slow: real runs, compared with the program bisect."""

import json
from types import SimpleNamespace

import pytest

from helpers import FIXTURES, run_tcompile
from tcompile.compiler import layout
from tcompile.compiler.child.subsystems import Counter
from tcompile.compiler.failure import Failure
from tcompile.compiler.probe import Item
from tcompile.compiler.signature import FailureSignature
from tcompile.repro.jobs.bisect_report import BisectReport
from tcompile.repro.jobs.capture_bisect import capture_of
from tcompile.repro.jobs.capture_result import _torch_envs


def _failure(kind="compile", graph=0, rank=None):
    sig = FailureSignature("inductor", kind, "ValueError", "boom")
    return Failure(graph=graph, graph_kind="inference", signature=sig, rank=rank)


def test_a_graph_scoped_counter_limits_that_graph_alone():
    c = Counter({}, {"lowerings": [1]}, graph=2)
    assert c.disable("inductor", "lowerings") is False  # no graph compiling: not counted
    c.current = 0
    assert c.disable("inductor", "lowerings") is False  # another graph's: not counted
    c.current = 2
    assert [c.disable("inductor", "lowerings") for _ in range(3)] == [False, True, False]
    assert c.snapshot() == {"lowerings": ["", "", ""]}  # numbered as in a compile of it alone
    assert c.graphs() == {"lowerings": [2, 2, 2]}


def test_an_unscoped_counter_tags_each_application_with_its_graph():
    c = Counter({}, None)
    for g in (0, 1, 0, 1):
        c.current = g
        c.disable("inductor", "lowerings")
    assert c.graphs() == {"lowerings": [0, 1, 0, 1]}


def test_why_the_program_bisect_takes_over(tmp_path):
    assert "outside any graph" in capture_of(str(tmp_path), _failure(graph=None))[1]
    assert "a crash (the process died" in capture_of(str(tmp_path), _failure(kind="crash"))[1]
    assert "launched job" in capture_of(str(tmp_path), _failure(rank=1))[1]
    assert "not saved" in capture_of(str(tmp_path), _failure())[1]
    cap = tmp_path / layout.CAPTURES / "graph-0"
    cap.mkdir(parents=True)
    (cap / "not-saved.txt").write_text("PicklingError: no")
    assert "PicklingError" in capture_of(str(tmp_path), _failure())[1]
    (cap / "not-saved.txt").unlink()
    (cap / layout.CAPTURE_META).write_text(json.dumps({"collectives": True}))
    assert "other ranks" in capture_of(str(tmp_path), _failure())[1]
    (cap / layout.CAPTURE_META).write_text(json.dumps({"collectives": False}))
    assert capture_of(str(tmp_path), _failure()) == (cap, "")


def test_the_culprit_is_placed_among_the_programs_applications(tmp_path):
    """TORCH_BISECT_MAX counts the whole program's applications: the culprit's index in
    its graph's compile is mapped through the baseline's graph tags."""
    compiled = tmp_path / layout.COMPILED
    compiled.mkdir()
    event = {
        "event": "bisect_counts",
        "counts": {"lowerings": ["mm", "add", "relu", "mm", "relu"]},
        "graphs": {"lowerings": [0, 0, 1, 1, 1]},
    }
    (compiled / "events-1.jsonl").write_text(json.dumps(event) + "\n")
    job = SimpleNamespace(base_dir=str(tmp_path))
    envs = _torch_envs(job, _failure(graph=1), "inductor", Item("application", "lowerings", 2))
    assert envs["bad"]["TORCH_BISECT_MAX"] == "4" and envs["good"]["TORCH_BISECT_MAX"] == "3"
    # another stage than the baseline's, or a culprit past what it saw: none said
    assert _torch_envs(job, _failure(graph=1), "aot_eager", Item("application", "x", 0)) == {}
    assert (
        _torch_envs(job, _failure(graph=1), "inductor", Item("application", "lowerings", 3)) == {}
    )


def test_minify_starts_from_the_capture_only_at_its_own_stage():
    r = BisectReport(1, "m", stage="inductor", graph=1, capture="/c/graph-1")
    assert r.minify_args() == {"graph": 1, "backend": None, "capture": "/c/graph-1"}
    r = BisectReport(1, "m", stage="aot_eager_decomp_partition", graph=1, capture="/c/graph-1")
    assert "capture" not in r.minify_args()


# the program bisect and the bisect on the saved graph, compared on a real run; a
# gradient and a program's own backend from the capture: tests/e2e/test_bisect_e2e.py


@pytest.mark.slow
@pytest.mark.extended  # benchmarks/long_job.py measures it; the rule is test_timing's (fast)
def test_a_long_jobs_report_runs_it_once(tmp_path):
    """fixtures/long_job (the tracker's #197080 after training, in a new graph compiled
    for the last, short batch): report bisects and minifies from what its one run saved;
    the confirmation is the second run (--confirm: this short version is under 2 min)."""
    r = run_tcompile(
        "report", "--json", "--out", str(tmp_path), str(FIXTURES / "long_job" / "train_late.py"),
        "--steps", "20",
    )  # fmt: skip
    doc = json.loads(r.stdout)
    (bug,) = doc["bugs"]
    bis, mini = bug["bisect"], bug["minify"]
    assert bis["from_capture"] and bis["runs"] == 1, bis  # + the shared baseline: 2
    # its worker was started beside the baseline; the minify had it next (issue 61)
    assert bis["worker_from_standby"] and mini["worker_from_bisect"], bis
    assert (bis["graph"], bis["subsystem"], bis["detail"]) == (
        1,
        "post_grad_passes",
        "normalization_aten_pass",
    )
    assert mini["from_capture"] and mini["verified"] and mini["graph"] == 1, mini
    assert "split" in open(mini["repro"]).read()

"""End-to-end `tcompile bisect` on fixtures (real runs of the program).  --jobs 1: the
suite itself runs two tests at once on the CI machine's two cores (the distributed
bisects search blind, --jobs 1 too)."""

import json

import pytest

from helpers import FIXTURES, run_tcompile

pytestmark = pytest.mark.slow


def bisect(tmp_path, fixture, *flags, jobs="1"):
    r = run_tcompile(
        "bisect", "--json", "--jobs", jobs, "--out", str(tmp_path), *flags, str(FIXTURES / fixture)
    )
    assert "Traceback" not in r.stdout, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == r.returncode
    for key in (
        "stage",
        "graph",
        "graph_kind",
        "subsystem",
        "application",
        "detail",
        "runs",
        "seconds",
        "flaky",
    ):
        assert key in doc
    return doc


@pytest.mark.extended  # relu's lowering: test_a_wrong_value_...; bisect --minify: test_capture_minify
def test_lowering_bug_then_minify(tmp_path):
    doc = bisect(tmp_path, "cpp_relu_accuracy.py", "--accuracy", "--minify")
    assert (doc["stage"], doc["subsystem"], doc["detail"]) == ("inductor", "lowerings", "relu")
    assert doc["graph"] == 0 and not doc["flaky"]
    assert doc["bad"]["TORCH_BISECT_SUBSYSTEM"] == "lowerings"
    assert doc["divergence"]["op"] == "relu"  # from the baseline run (localize.py)
    m = doc["minify"]
    assert m["verified"] and m["nodes_after"] == 1
    assert "torch.relu(" in open(m["repro"]).read()


@pytest.mark.extended  # since 2026-11-29 (the suite's time): a decomposition culprit on
# the saved graph is test_families' (a real lost validation), on the program this file's
# random-op test
def test_decomposition_bug(tmp_path):
    doc = bisect(tmp_path, "bad_decomposition.py", "--accuracy")
    assert (doc["stage"], doc["subsystem"]) == ("aot_eager_decomp_partition", "decomposition")
    assert "aten.silu" in doc["detail"]


@pytest.mark.extended  # since 2026-11-29 (the suite's time): backward_only's bisect
# names the same subsystem (post_grad_passes) on its saved graph
def test_custom_post_grad_pass_bug(tmp_path):
    doc = bisect(tmp_path, "post_grad_pass_bug.py", "--accuracy")
    assert (doc["stage"], doc["subsystem"]) == ("inductor", "post_grad_passes")
    assert doc["detail"] == "post_grad_custom_post_pass"


def test_backward_only_bug(tmp_path):
    doc = bisect(tmp_path, "backward_only.py", "--accuracy")
    assert doc["stage"] == "inductor" and doc["graph_kind"] == "backward"
    assert doc["subsystem"] == "post_grad_passes"
    # a gradient found wrong in the backward: the checked call's own inputs were saved
    # (the graph is called once) and the bisect ran on them (capture_bisect.py)
    assert doc["from_capture"] and doc["runs"] == 2, doc["fallback"]
    assert doc["worker_from_standby"]  # started beside its own baseline


def test_multi_graph_names_the_graph_both_ways(tmp_path):
    """The program bisect (--whole-program, its probes forked) and the bisect on the
    saved graph (the default) name the same culprit; the second in two program runs.
    In the 30-minute suite the second alone (the program bisect: test_trust's SIGTERM
    test, and every fallback), with TCOMPILE_TEST_EXTENDED=1 both."""
    import os

    before = {"exit_code": 1, "stage": "inductor", "graph": 1, "subsystem": "lowerings"}
    if os.environ.get("TCOMPILE_TEST_EXTENDED") == "1":
        before = bisect(tmp_path / "w", "multi_graph.py", "--accuracy", "--whole-program")
        assert before["graph"] == 1 and not before["from_capture"]
        assert (before["subsystem"], before["detail"]) == ("lowerings", "relu")
        # probes forked from a server that imported torch, after one forked run checked it
        assert before["forked"]["check_runs"] == 1 and before["forked"]["probes"] >= 1
    after = bisect(tmp_path / "c", "multi_graph.py", "--accuracy")
    culprit = ("exit_code", "stage", "graph", "subsystem")
    assert [after[k] for k in culprit] == [before[k] for k in culprit]
    assert after["detail"].startswith("relu") and after["culprit"]["op"] == "relu"
    assert after["from_capture"] and after["runs"] == 2 and after["confirmed"] == "pass"
    # the confirmation forked from the servers warmed beside the baseline, their forked
    # check made while the captured graph was judged (issue 61: no slower than before)
    assert after["forked"] == {"probes": 1, "check_runs": 1}
    # numbered in graph 1's compile alone: that relu, in that graph, off
    skip = {"lowerings": [after["application"]]}
    assert after["switch"] == {"limits": {}, "toggles": {}, "skip": skip, "graph": 1}
    assert after["bad"]["TORCH_BISECT_SUBSYSTEM"] == "lowerings"
    judged = [s for s in after["steps"] if s["run"] is None]
    assert len(judged) == after["graph_judgements"] >= 3


def test_two_culprits_each_enough_are_found_and_turned_off_together(tmp_path):
    """A joint-graph pass and a post-grad pass each make the same wrong value (#176565's
    shape on the GPU): the first alone off, or every joint-graph pass from it on, still
    fails.  The capture finds the second with the first off, and the program passes
    with both off: 2 runs (before: the program bisect, 9 runs)."""
    doc = bisect(tmp_path, "two_culprits.py", "--accuracy")
    assert doc["from_capture"] and doc["runs"] == 2, doc["fallback"]
    assert (doc["subsystem"], doc["detail"]) == ("joint_graph_passes", "joint_custom_post_pass")
    assert [a["detail"] for a in doc["also"]] == ["post_grad_custom_post_pass"]
    assert doc["switch"]["skip"] == {
        "joint_graph_passes": [doc["application"]],
        "post_grad_passes": [doc["also"][0]["application"]],
    }
    assert doc["confirmed"] == "pass" and "culprits off" in doc["message"]
    assert doc["culprit"]["also"] == [f"post_grad_passes #{doc['also'][0]['application']} "
                                      "post_grad_custom_post_pass"]  # fmt: skip


def test_a_gradient_of_the_wrong_shape_is_its_backward_graphs_and_bisected_on_it(tmp_path):
    """A compiled backward returns a gradient of another shape than its input's (#178080
    on the GPU, planted here by a custom post-grad pass): autograd refuses it after the
    graph returned, outside every graph.  The baseline runs the graph's last call again,
    forward and backward (postmortem.py): refused compiled only, the failure is graph
    0's backward, saved; the bisect is on it, 2 runs (before: outside any graph, the
    program bisect; on the GPU 11 runs)."""
    doc = bisect(tmp_path, "wrong_grad_shape.py", "--accuracy")
    assert (doc["graph"], doc["graph_kind"]) == (0, "backward")
    assert doc["from_capture"] and doc["runs"] == 2, doc["fallback"]
    assert (doc["subsystem"], doc["detail"]) == ("post_grad_passes", "post_grad_custom_post_pass")
    assert doc["confirmed"] == "pass"


def test_custom_backend_and_capture_and_clean(tmp_path):
    doc = bisect(tmp_path / "a", "custom_backend.py")
    assert doc["stage"] == "my_compiler" and doc["exit_code"] == 1
    # from the saved graph; the stage below the program's backend confirms it
    assert doc["from_capture"] and doc["runs"] == 2, doc["fallback"]
    # (a capture failure's bisect: test_capture_minify.py, bisect and replay go on to minify)
    doc = bisect(tmp_path / "c", "clean.py")
    assert doc["exit_code"] == 0 and "never fails" in doc["message"]
    # exit 3 from bisect: tests/e2e/test_one_verdict.py (the same verdict in every command)


def test_a_random_op_the_program_compares_is_its_decomposition(tmp_path):
    """fixtures/numerics/random_dropout.py: no graph fails tcompile's check; the
    program's own comparison does, and the culprit is dropout's decomposition."""
    doc = bisect(tmp_path, "numerics/random_dropout.py")
    assert doc["exit_code"] == 1 and doc["graph"] is None, doc["message"]
    assert (doc["stage"], doc["subsystem"]) == ("aot_eager_decomp_partition", "decomposition")
    # baseline 4 (compiled, plain, located -- its check draws eager's numbers -- and a
    # rerun only watching), then the ladder and the guided search
    assert "native_dropout" in doc["detail"] and doc["runs"] <= 9, doc


def test_a_wrong_value_the_program_asserts_bisects_without_the_flag(tmp_path):
    """No --accuracy: the program's own assertion fails; run's locating run (the check
    on) ties it to graph 0 as a wrong value, and the probes must check too -- they ran
    without the check, never saw the wrong value, and every probe "passed" while the
    program raised its assertion (fixtures/projects/textcls: a false culprit)."""
    script = tmp_path / "asserts.py"
    script.write_text(
        (FIXTURES / "cpp_relu_accuracy.py")
        .read_text()
        .replace("print(f(x, w))", "torch.testing.assert_close(f(x, w), f.__wrapped__(x, w))")
    )
    r = run_tcompile("bisect", "--json", "--jobs", "1", "--out", str(tmp_path / "o"), str(script))
    doc = json.loads(r.stdout)
    assert (doc["stage"], doc["subsystem"], doc["detail"]) == ("inductor", "lowerings", "relu"), doc

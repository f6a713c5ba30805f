"""Duplicates checked by running (repro/jobs/triage_switch.py, issue 52): proposals and
merging, with a fake run; the switch itself (``--without``) as the counter applies it.
Pure: no compiles."""

from __future__ import annotations

import pytest
from test_triage_cluster import bug, result

from tcompile.compiler.child.subsystems import Counter
from tcompile.compiler.stack import without, without_of
from tcompile.repro.jobs.bisect_report import BisectReport
from tcompile.repro.jobs.triage_switch import merge, proposals
from tcompile.repro.triage_cluster import cluster
from tcompile.repro.triage_records import ScriptResult


def _with_without(r: ScriptResult, off: str | None) -> ScriptResult:
    r.raw_bug = {"bisect": {"without": off}}  # what the report's bisect said
    return r


def _results() -> list[ScriptResult]:
    # one SDPA bug seen twice: a wrong value (bisect: the pattern pass) and a crash whose
    # bisect named another application; a third, unrelated bug on the same ops
    wrong = _with_without(
        result("sdpa_wrong.py", bug("bmm", ["bmm", "softmax"], subsystem="joint_graph_passes",
                                    detail="fuse_attention_pattern")),
        "joint_graph_passes:fuse_attention_pattern",
    )  # fmt: skip
    crash = _with_without(
        result("sdpa_crash.py", bug("bmm", ["bmm", "softmax", "mul"], kind="runtime",
                                    subsystem="lowerings", detail="bmm_2")),
        "lowerings:bmm",
    )  # fmt: skip
    other = _with_without(
        result("argmax.py", bug("argmax", ["argmax"], detail="argmax_1")), "lowerings:argmax"
    )
    return [wrong, crash, other]


def test_a_cluster_joins_the_one_whose_culprit_off_makes_it_pass(tmp_path):
    rs = _results()
    cs = cluster(rs)
    assert len(cs) == 3  # kinds differ: the reports alone keep them apart
    asked = []

    def run(r, off):
        asked.append((r.path, off))
        # the crash goes away with the SDPA pattern pass off, and the wrong value with the
        # crash's culprit off (asked back: both ways); nothing else helps anyone
        crash = r.path == "sdpa_crash.py" and off.startswith("joint_graph")
        return {"passes": crash or (r.path == "sdpa_wrong.py" and off == "lowerings:bmm")}

    merged = merge(tmp_path, rs, cs, run=run)
    by = {r.path: r for r in rs}
    assert by["sdpa_crash.py"].cluster == by["sdpa_wrong.py"].cluster
    assert by["argmax.py"].cluster != by["sdpa_wrong.py"].cluster
    assert by["sdpa_crash.py"].cluster_by_report != by["sdpa_wrong.py"].cluster_by_report
    (big,) = [c for c in merged if len(c.members) == 2]
    assert big.checks[0]["without"] in (
        "joint_graph_passes:fuse_attention_pattern",
        "lowerings:bmm",
    )
    # argmax shares no op and no subsystem with the SDPA pair's pass: never proposed there
    assert ("argmax.py", "joint_graph_passes:fuse_attention_pattern") not in asked
    assert ("sdpa_crash.py", "joint_graph_passes:fuse_attention_pattern") in asked
    assert ("sdpa_wrong.py", "lowerings:bmm") in asked  # the way back


def test_a_whole_pattern_pass_is_never_proposed():
    """pass_pattern_0 holds every SDPA pattern (and more): two bugs in two patterns both
    pass with it off; that says nothing of one bug."""
    rs = _results()
    _with_without(rs[0], "joint_graph_passes:pass_pattern_0")
    cs = cluster(rs)
    asks = proposals(cs, {r.path: r for r in rs})
    assert all(not off.endswith("pass_pattern_0") for _, _, off in asks)


def test_one_way_is_not_enough(tmp_path):
    """A switch broad enough to make an unrelated program pass (every lowering of a
    common op off) does not join two clusters unless the other's culprit, off, makes
    the first pass too."""
    rs = _results()
    cs = cluster(rs)
    merged = merge(tmp_path, rs, cs, run=lambda r, off: {"passes": r.path == "sdpa_crash.py"})
    assert len(merged) == 3 and all(not c.checks for c in merged)


def test_chains_of_joins_keep_every_cluster_and_say_each_check(tmp_path):
    """A joins B, then B joins C (A's set, through its root, joins C): every member ends
    in C's cluster and each join is said once."""
    rs = _results()
    rs.append(
        _with_without(
            result("sdpa_more.py", bug("bmm", ["bmm", "softmax", "div"], kind="compile",
                                       subsystem="lowerings", detail="softmax_1")),
            "lowerings:softmax",
        )
    )  # fmt: skip
    cs = cluster(rs)

    def run(r, off):  # every SDPA script passes with any SDPA culprit off
        return {"passes": "argmax" not in r.path and "argmax" not in off}

    merged = merge(tmp_path, rs, cs, run=run)
    by = {r.path: r.cluster for r in rs}
    assert by["sdpa_wrong.py"] == by["sdpa_crash.py"] == by["sdpa_more.py"] != by["argmax.py"]
    (big,) = [c for c in merged if len(c.members) == 3]
    assert len(big.checks) == 2


def test_proposals_skip_the_same_culprit_and_other_devices():
    rs = _results()
    rs[1].minimal = {**rs[1].minimal, "device": "cuda"}
    cs = cluster(rs)
    by_path = {r.path: r for r in rs}
    asks = proposals(cs, by_path)
    pairs = {(by_path[c.representative].path, off) for c in cs for a, _, off in asks
             if a == c.id}  # fmt: skip
    assert not any(p == "sdpa_crash.py" for p, _ in pairs)  # another device: never asked


def test_without_names_a_culprit_for_any_program():
    assert without(["lowerings:sum", "config:fallback_random"]) == {
        "limits": {},
        "toggles": {"fallback_random": True},
        "off": {"lowerings": ["sum"]},
    }
    for bad in ("sum", "lowerings:", "nope:x", "config:nope"):
        with pytest.raises(ValueError):
            without([bad])
    assert without_of("lowerings", "sum_3") == "lowerings:sum"
    assert without_of("config", "fallback_random=True makes it pass") == "config:fallback_random"
    assert without_of(None, "x") is None
    report = BisectReport(1, "m", stage="aot_eager_decomp_partition", subsystem="decomposition",
                          detail="aten.silu.default")  # fmt: skip
    assert report.without == "decomposition:aten.silu.default"


def test_the_counter_turns_a_named_application_off_wherever_it_happens():
    c = Counter({}, None, off={"lowerings": ["sum"], "post_grad_passes": ["split_pass"]})
    assert [
        c.disable("inductor", "lowerings", lambda d=d: d) for d in ("relu", "sum_1", "sum")
    ] == [
        False,
        True,
        True,
    ]
    assert c.disable("inductor", "post_grad_passes", lambda: "split_pass") is True
    assert c.disable("inductor", "post_grad_passes", lambda: "other_pass") is False


@pytest.mark.slow
def test_run_without_the_culprit_passes_and_without_another_fails(tmp_path):
    import json

    from helpers import FIXTURES, run_tcompile

    script = str(FIXTURES / "cpp_relu_compile_error.py")
    off = run_tcompile(
        "run", "--json", "--without", "lowerings:relu", "--out", str(tmp_path), script
    )
    assert off.returncode == 0, off.stdout[-2000:]
    other = run_tcompile(
        "run", "--json", "--without", "lowerings:sum", "--out", str(tmp_path), script
    )
    assert other.returncode == 1 and json.loads(other.stdout)["failures"]
    bad = run_tcompile("run", "--json", "--without", "lowering:relu", script)
    assert bad.returncode == 2 and "the subsystem is one of" in json.loads(bad.stdout)["error"]

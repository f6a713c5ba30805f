"""Culprits in words people know (issue 52, item 4) and the pages' version column
(item 5).  Pure: no compiles."""

from __future__ import annotations

from pathlib import Path

from tcompile.compiler.child.session import raised_in_pass
from tcompile.compiler.child.subsystems import _inductor_counters, op_name
from tcompile.compiler.collect import meaningful
from tcompile.repro.jobs.bisect_report import effect_words, pattern_named
from tcompile.repro.triage_cluster import culprit_of
from tcompile.repro.triage_page import issue_text, markdown, page, versions


def _raise_in(filename: str, function: str) -> BaseException:
    ns: dict = {}
    code = f"def {function}():\n    raise RuntimeError('Attempting to broadcast a dimension')\n"
    exec(compile(code, filename, "exec"), ns)  # a frame of that file, as inductor's would be
    try:
        try:
            ns[function]()
        except RuntimeError as inner:
            raise ValueError("BackendCompilerFailed") from inner
    except ValueError as exc:
        return exc


def test_an_error_raised_in_an_inductor_pass_names_the_function():
    import os

    from tcompile.compiler.owners import torch_folder

    inductor = os.path.join(torch_folder(), "_inductor")
    exc = _raise_in(os.path.join(inductor, "fx_passes", "fuse_attention.py"), "_sfdp_replacement_2")
    where = raised_in_pass(exc)
    assert where == "raised in inductor's _sfdp_replacement_2, fx_passes/fuse_attention.py"
    assert pattern_named(f"RuntimeError: ...\n({where})") == "_sfdp_replacement_2"
    elsewhere = _raise_in(os.path.join(inductor, "lowering.py"), "make_reduction")
    assert raised_in_pass(elsewhere) is None
    # where torch is, not a word in the path (issue 60): a project's own folder named so
    mine = _raise_in("/p/torch/_inductor/fx_passes/fuse_attention.py", "_sfdp_replacement_2")
    assert raised_in_pass(mine) is None


def test_per_pattern_counts_name_the_pattern():
    from torch._dynamo.utils import counters

    counters["inductor_pattern_matcher_per_pattern"]["_sfdp_pattern_28_inference"] += 1
    try:
        assert _inductor_counters()["pattern _sfdp_pattern_28_inference"] >= 1
    finally:
        counters.pop("inductor_pattern_matcher_per_pattern", None)
    did = {"fuse_attention": 1, "pattern _sfdp_pattern_28_inference": 1,
           "pattern_matcher_count": 1, "async_compile_cache_miss": 3}  # fmt: skip
    assert meaningful(did) == {"fuse_attention": 1, "pattern _sfdp_pattern_28_inference": 1}
    assert effect_words({"pattern_matcher_count": 2}) == "pattern_matcher_count x2"
    bug = {"kind": "accuracy", "bisect": {"stage": "inductor", "subsystem": "joint_graph_passes",
           "detail": "pass_pattern_0", "effects": did}}  # fmt: skip
    text = culprit_of(bug)["text"]
    assert text == (
        "inductor / joint_graph_passes / pass_pattern_0 "
        "(fuse_attention, pattern _sfdp_pattern_28_inference)"
    )
    # a lowering is named by its op: the kernel-compiling counters of its application are not
    lowering = {"kind": "accuracy", "bisect": {"stage": "inductor", "subsystem": "lowerings",
                "detail": "sort_1", "effects": {"async_compile_cache_miss": 1}}}  # fmt: skip
    assert culprit_of(lowering)["text"] == "inductor / lowerings / sort"
    cudagraphs = {"kind": "runtime", "bisect": {"stage": "inductor", "subsystem": "cudagraphs"}}
    assert culprit_of(cudagraphs)["text"] == "inductor / cudagraphs"
    # issue 60: the tree's operation, from torch's own words (#122192, #169545)
    overwritten = (
        "inductor/runtime: RuntimeError: Error: accessing tensor output of CUDAGraphs that "
        "has been overwritten by a subsequent run."
    )
    replay = {**cudagraphs, "bisect": {**cudagraphs["bisect"], "signature": overwritten}}
    said = culprit_of(replay)
    assert said["text"] == (
        "inductor / cudagraphs / replay: a later run of the tree reused the memory of an "
        "output still read"
    )
    assert said["operation"].startswith("replay:") and "replay" in said["words"]
    grad = overwritten.replace("tensor output", "gradient tensor output")
    assert (
        "grad" in culprit_of({**replay, "bisect": {**replay["bisect"], "signature": grad}})["text"]
    )
    moved = {**cudagraphs, "bisect": {**cudagraphs["bisect"],
             "signature": "RuntimeError: static input data pointer changed."}}  # fmt: skip
    assert culprit_of(moved)["operation"].startswith("replay: a static input moved")
    from tcompile.compiler.culprit import Culprit

    assert Culprit.of_bisect(replay["bisect"]).key() != Culprit.of_bisect(moved["bisect"]).key()
    lowering_text = {"stage": "inductor", "subsystem": "lowerings", "detail": "sum_1",
                     "signature": overwritten}  # fmt: skip
    assert Culprit.of_bisect(lowering_text).operation is None  # only a cudagraphs culprit
    assert (
        op_name("<OpOverload(op='aten.unfold_backward', overload='default')>")
        == "aten.unfold_backward.default"
    )


def test_the_pages_say_each_torch_and_how_each_script_joined(tmp_path):
    rep, member = str(tmp_path / "a.py"), str(tmp_path / "b.py")
    repro = tmp_path / "repros" / "a.py"
    repro.parent.mkdir()
    repro.write_text("print('REPRODUCED')\n")
    cluster = {
        "id": "C123456", "culprit": "inductor / lowerings / argmax", "kind": "accuracy",
        "ops": ["argmax"], "members": [rep, member], "representative": rep,
        "repro": str(repro), "repro_lines": 1, "verified": True,
        "versions": [{"torch": "2.13.0+cpu", "result": "fails (this run)"},
                     {"torch": "2.14.1", "result": "fixed in 2.14.1"}],
    }  # fmt: skip
    doc = {
        "scripts": [
            {"path": rep, "verdict": "bug", "cluster": "C123456", "reported": True,
             "repro": str(repro), "repro_lines": 1, "seconds": 50.0,
             "also_all": {"/py": {"result": "fixed in 2.14.1"}}},
            {"path": member, "verdict": "bug", "cluster": "C123456", "member_of": rep,
             "joined": {"without": "lowerings:argmax lowerings:argmin"}, "seconds": 20.0},
        ],
        "clusters": [cluster], "counts": {"bug": 2}, "torch": "2.13.0+cpu", "seconds": 70.0,
        "done_now": 2, "from_cache": 0, "engine": "local", "interrupted": False,
    }  # fmt: skip
    assert versions(cluster) == "2.13.0+cpu: fails (this run); 2.14.1: fixed in 2.14.1"
    md = markdown(tmp_path, doc)
    assert "| versions |" in md and "2.14.1: fixed in 2.14.1" in md
    assert "joined: passes with `lowerings:argmax lowerings:argmin` off" in md
    assert "its own report" in md
    html = page(tmp_path, doc)
    assert "<a href='a.py'>" in html and "<th>verified</th>" in html and "issues/C123456.md" in html
    assert Path(repro).name in html


def test_a_pattern_the_error_names_is_said_beside_the_pass():
    bug = {"kind": "compile", "bisect": {"stage": "inductor", "subsystem": "joint_graph_passes",
           "detail": "pass_pattern_0", "effects": {"fuse_attention": 1},
           "pattern": "_sfdp_replacement_2"}}  # fmt: skip
    assert culprit_of(bug)["text"] == (
        "inductor / joint_graph_passes / pass_pattern_0 (fuse_attention) / "
        "pattern _sfdp_replacement_2"
    )
    stage_only = {"kind": "compile", "bisect": {"stage": "inductor",
                  "pattern": "randperm_index_pattern"}}  # fmt: skip
    assert culprit_of(stage_only)["text"] == (
        "inductor / pattern randperm_index_pattern (named in the error)"
    )


def test_an_op_has_one_name_however_it_was_written():
    """Issue 60: one function for an op's base name; bisect's lowering, triage's culprit,
    the switch and the guided bisect read the same failure as the same op."""
    from tcompile.compiler.opname import op_base
    from tcompile.compiler.stack import application_name, without, without_of

    for spelled in (
        "aten.slice_scatter.default",
        "torch.ops.aten.slice_scatter.default",
        "<OpOverload(op='aten.slice_scatter', overload='default')>",
        "slice_scatter_default",
        "slice_scatter_3",
        "torch.slice_scatter",
    ):
        assert op_base(spelled) == "slice_scatter", spelled
    assert op_base("copy__default") == "copy_" and op_base("index_put_") == "index_put_"
    assert op_base("sum_3") == "sum" and op_base("torch.nn.functional.gelu") == "gelu"
    assert application_name("lowerings", "slice_scatter_default") == "slice_scatter"
    assert application_name("decomposition", "aten.silu.default") == "aten.silu.default"
    # bisect's culprit, the switch it writes and a user's own spelling turn off one lowering
    assert without_of("lowerings", "slice_scatter_default") == "lowerings:slice_scatter"
    assert without(["lowerings:slice_scatter_default"])["off"] == {"lowerings": ["slice_scatter"]}
    bug = {
        "bisect": {"stage": "inductor", "subsystem": "lowerings", "detail": "slice_scatter_default"}
    }
    assert culprit_of(bug)["op"] == "slice_scatter"


def test_dynamos_own_bug_reads_dynamo_not_eager():
    """Issue 60: the first stage a failure shows at is the part to blame; with
    backend=eager that is Dynamo.  The JSON keeps the stage's name."""
    from tcompile.compiler.stack import stage_words

    assert stage_words("eager").startswith("dynamo")
    assert stage_words("inductor") == "inductor" and stage_words(None) is None
    bug = {"bisect": {"stage": "eager"}, "kind": "accuracy"}
    assert culprit_of(bug)["text"] == "dynamo" and culprit_of(bug)["stage"] == "eager"


def test_one_table_of_culprit_kinds_covers_what_bisect_searches():
    """Issue 60: every subsystem bisect searches (compiler/stack.py) and the config
    toggles have one kind in compiler/culprit.KINDS; a record built from bisect's answer
    names its kind, op, switch and words, and survives its JSON."""
    from tcompile.compiler.culprit import KINDS, Culprit, kind_of
    from tcompile.compiler.stack import SUBSYSTEMS

    for stage, subsystems in SUBSYSTEMS.items():
        for sub in subsystems:
            assert kind_of(sub).subsystem == sub and kind_of(sub).stage == stage
    assert kind_of("config").name == "config" and kind_of(None).name == "stage"
    assert {k.name for k in KINDS.values() if k.names_op} == {"lowering", "decomposition"}
    found = {"stage": "inductor", "graph": 1, "graph_kind": "backward", "subsystem": "lowerings",
             "application": 4, "detail": "slice_scatter_default",
             "divergence": {"op": "aten.sum.dim_IntList"}}  # fmt: skip
    c = Culprit.of_bisect(found)
    assert c is not None and c.category == "lowering" and c.op == "slice_scatter"
    assert c.first_wrong == "sum" and c.switch == "lowerings:slice_scatter"
    assert c.words() == "inductor: inductor's lowering of an op, slice_scatter"
    assert Culprit.from_json(c.to_json()) == c and c.to_json()["text"] == (
        "inductor / lowerings / slice_scatter"
    )
    # the same culprit whatever the node's number in the program; another graph is not
    # the same failure of one script, but the same culprit across scripts
    other = Culprit.of_bisect({**found, "detail": "slice_scatter_3", "graph": 0})
    assert (
        other is not None and other.key() == c.key() and other.key(graph=True) != c.key(graph=True)
    )
    decomp = Culprit.of_bisect({"stage": "aot_eager_decomp_partition", "subsystem": "decomposition",
                                "detail": "<OpOverload(op='aten.silu', overload='default')>"})  # fmt: skip
    assert decomp is not None and decomp.op == "silu" and decomp.category == "decomposition"
    dynamo = Culprit.of_bisect({"stage": "eager", "graph": 0})
    assert dynamo is not None and dynamo.text() == "dynamo" and dynamo.words().startswith("dynamo")
    capture = Culprit.of_bisect({"stage": "eager", "record": "/r/frame.pkl"})
    assert capture is not None and capture.category == "capture"
    assert Culprit.of_bisect({"stage": None}) is None


def test_a_cluster_without_a_repro_says_why(tmp_path):
    # issue 62: a cluster's page said "No verified repro" and nothing else
    why = "repro.py NOT verified: its last line: 'BUG | x'"
    cluster = {"id": "C1", "culprit": "inductor / lowerings / normal", "kind": "runtime",
               "ops": [], "members": [str(tmp_path / "a.py")], "representative":
               str(tmp_path / "a.py"), "repro": None, "verified": False, "no_repro": why}  # fmt: skip
    doc = {"scripts": [{"path": str(tmp_path / "a.py"), "verdict": "bug", "cluster": "C1",
                        "reported": True, "no_repro": why, "seconds": 1.0}],
           "clusters": [cluster], "counts": {"bug": 1}, "torch": "2.13.0+cpu", "seconds": 1.0,
           "done_now": 1, "from_cache": 0, "engine": "local", "interrupted": False}  # fmt: skip
    md = markdown(tmp_path, doc)
    assert "| no: repro.py NOT verified: its last line: 'BUG / x' |" in md, md
    assert f"No verified repro ({why}): see the members." in issue_text(tmp_path, doc, cluster)
    assert "no: repro.py NOT verified" in page(tmp_path, doc)

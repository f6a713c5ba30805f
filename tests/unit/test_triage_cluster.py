"""triage's clustering, culprits and discovery: pure, no compiles."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tcompile.repro.jobs.triage import discover, script_key
from tcompile.repro.triage_cluster import cluster, culprit_of, minimal_of, scores
from tcompile.repro.triage_page import markdown, page, write_pages
from tcompile.repro.triage_records import ScriptResult

R = ScriptResult.from_json  # a result as the cache holds it


def bug(
    op: str | None,
    ops: list[str],
    *,
    kind: str = "accuracy",
    subsystem: str = "lowerings",
    detail: str | None = None,
    message: str = "AccuracyError: inference output differs from eager",
    lines: int = 60,
) -> dict:
    return {
        "kind": kind,
        "stage": "inductor",
        "signature": f"inductor/{kind}: {message}",
        "bisect": {"stage": "inductor", "subsystem": subsystem, "detail": detail or f"{op}_1"},
        "minify": {
            "ops": ops,
            "nodes_before": 9,
            "nodes_after": len(ops),
            "device": "cpu",
            "level": "graph",
            "verified": True,
            "divergence": {"minimal": {"op": op}} if op else None,
        },
        "_lines": lines,
    }


def result(path: str, b: dict) -> ScriptResult:
    return R(
        {
            "path": path,
            "verdict": "bug",
            "kind": b["kind"],
            "stage": "inductor",
            "signature": b["signature"],
            "culprit": culprit_of(b),
            "minimal": minimal_of(b),
            "repro": f"/r/{path}.py",
            "repro_lines": b["_lines"],
        }
    )


def test_culprit_names_stage_subsystem_and_op():
    c = culprit_of(bug(None, ["abs", "neg", "sum"], detail="sum_3"))
    assert (c["stage"], c["subsystem"], c["op"]) == ("inductor", "lowerings", "sum")
    assert c["text"] == "inductor / lowerings / sum"
    # bisect's lowering is the culprit; where the values first went wrong is evidence
    # beside it (issue 60: one failure had two culprits, bisect's and triage's)
    both = culprit_of(bug("neg", ["abs", "neg", "sum"], detail="sum_3"))
    assert (both["op"], both["first_wrong"]) == ("sum", "neg")
    assert both["text"] == "inductor / lowerings / sum"
    # no op named by bisect (a stage alone): the first wrong node anchors the cluster
    stage = culprit_of({**bug("neg", ["abs", "neg"]), "bisect": {"stage": "inductor"}})
    assert stage["op"] is None and stage["first_wrong"] == "neg" and stage["category"] == "stage"
    assert stage["text"] == "inductor / neg"
    # a pass: its name
    p = culprit_of(
        bug(None, ["cumsum"], subsystem="post_grad_passes", detail="pointless_cumsum_replacement")
    )
    assert p["text"] == "inductor / post_grad_passes / pointless_cumsum_replacement"


def test_one_bug_written_three_ways_is_one_cluster_and_same_text_different_bugs_are_not():
    rs = [
        result("model.py", bug("sum", ["abs", "neg", "sum"], lines=70)),
        result("loop.py", bug("sum", ["abs", "neg", "cat", "sum"], lines=64)),
        result("oneliner.py", bug("sum", ["abs", "neg", "sum"], lines=66)),
        # the same exception text, another op: another bug
        result("any.py", bug("any", ["any"])),
        # the same culprit op, a minimal graph with nothing in common: another bug
        result("inf.py", bug("sum", ["full", "convert_element_type", "sum", "mul"])),
        R({"path": "clean.py", "verdict": "clean"}),
    ]
    cs = cluster(rs)
    by = {r.path: r.cluster for r in rs}
    assert by["model.py"] == by["loop.py"] == by["oneliner.py"]
    assert len({by["model.py"], by["any.py"], by["inf.py"]}) == 3
    assert by["clean.py"] is None
    big = next(c for c in cs if len(c.members) == 3)
    assert big.repro == "/r/loop.py.py" and big.verified  # the shortest repro
    # ids stable: from the culprit and the representative, not from the list's order
    again = cluster(
        [R({**r.to_json(), "cluster": None}) for r in reversed(rs)]
        + [result("z.py", bug("x", ["x"]))]
    )
    assert big.id in {c.id for c in again} and big.id.startswith("C")
    truth = {"model.py": "a", "loop.py": "a", "oneliner.py": "a", "any.py": "b", "inf.py": "c"}
    docs = [r.to_json(public=True) for r in rs]  # scores read triage's --json
    assert scores(docs, truth) == {"precision": 1.0, "recall": 1.0, "pairs": 3}
    # grouping by message text puts all five together: precision falls
    by_text = scores([{**r, "text": r.get("signature")} for r in docs], truth, by="text")
    assert by_text["precision"] < 0.5


def test_kinds_and_devices_never_merge():
    a = result("a.py", bug("relu", ["relu"]))
    b = result("b.py", bug("relu", ["relu"], kind="compile_error", message="CppCompileError"))
    c = result("c.py", bug("relu", ["relu"]))
    c.minimal = {**minimal_of(bug("relu", ["relu"])), "device": "cuda"}
    cluster([a, b, c])
    assert len({a.cluster, b.cluster, c.cluster}) == 3


def test_discover_skips_modules_a_script_imports(tmp_path):
    (tmp_path / "train.py").write_text("from model import Net\nimport os\n")
    (tmp_path / "model.py").write_text("class Net: pass\n")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "other.py").write_text("print(1)\n")
    found = [p.name for p in discover([str(tmp_path)])]
    assert found == ["other.py", "train.py"]
    with pytest.raises(Exception, match="no such file"):
        discover([str(tmp_path / "missing")])


def test_key_follows_content_local_modules_and_options(tmp_path):
    s = tmp_path / "train.py"
    s.write_text("import model\n")
    (tmp_path / "model.py").write_text("X = 1\n")
    k = script_key(s, {"accuracy": "loose"})
    assert k == script_key(s, {"accuracy": "loose"})
    assert k != script_key(s, {"accuracy": "strict"})
    (tmp_path / "model.py").write_text("X = 2\n")
    assert k != script_key(s, {"accuracy": "loose"})


def test_budgets_never_key_a_result_and_a_cut_one_is_tried_again_under_more():
    """Issue 62: a rerun with other budgets keeps what finished (the key holds no
    --timeout, --max-time, --jobs, --per-gpu); a timeout, or a bug whose steps a budget
    cut, is done again under a larger budget -- never under the same or a smaller one."""
    import tempfile
    from pathlib import Path

    from tcompile.repro.jobs.triage_loop import stale

    with tempfile.TemporaryDirectory() as d:
        s = Path(d) / "a.py"
        s.write_text("print(1)\n")
        base = {"accuracy": "loose", "repeat": 1, "each": False}
        one = script_key(s, {**base, "timeout": 540, "max_time": 150, "jobs": 8})
        assert one == script_key(s, {**base, "timeout": 400, "max_time": 30, "jobs": 1})
        assert one != script_key(s, {**base, "each": True, "timeout": 540})
    ran = {"budgets": {"timeout": 400, "max_time": 150}}
    bigger, same = {"timeout": 900, "max_time": 150}, {"timeout": 400, "max_time": 150}
    timed_out = R({**ran, "verdict": "timeout"})
    assert stale(timed_out, bigger) and not stale(timed_out, same)
    cut = R({**ran, "verdict": "bug", "steps": [{"what": "report", "exit_code": None}]})
    assert stale(cut, bigger) and not stale(cut, {"timeout": 100, "max_time": 30})
    done = R({**ran, "verdict": "bug", "steps": [{"what": "report", "exit_code": 1}]})
    assert not stale(done, bigger) and not stale(R({**ran, "verdict": "clean"}), bigger)


def test_pages_escape_and_list_every_script(tmp_path):
    rs = [
        result("<b>x</b>.py", bug("sum", ["sum"])),
        R({"path": "c.py", "verdict": "clean", "message": "ok"}),
    ]
    cs = cluster(rs)
    doc = {
        "scripts": [r.to_json(public=True) for r in rs],
        "clusters": [c.to_json() for c in cs],
        "counts": {"bug": 1, "clean": 1},
        "torch": "2.13.0",
        "seconds": 3.0,
        "done_now": 2,
        "from_cache": 0,
        "engine": "local",
        "interrupted": False,
    }
    md = markdown(tmp_path, doc)
    cid = cs[0].id
    assert f"| {cid} |" in md and "c.py" in md
    assert f"[issues/{cid}.md](issues/{cid}.md)" in md  # the cluster's issue text, linked
    html = page(tmp_path, doc)
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    repro = tmp_path / "repros" / "r.py"
    repro.parent.mkdir()
    repro.write_text("print('REPRODUCED: x')\n")
    doc["clusters"][0].update(repro=str(repro), title="[inductor] sum gives wrong results")
    write_pages(tmp_path, doc)
    issue = (tmp_path / "issues" / f"{cid}.md").read_text()
    assert issue.startswith("# [inductor] sum gives wrong results")
    assert "print('REPRODUCED: x')" in issue and "- `<b>x</b>.py`" in issue


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tcompile",
            "triage",
            "--json",
            "--out",
            str(tmp_path / "o"),
            str(tmp_path / "nothing-here"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["exit_code"] == 2
    assert "Traceback" not in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "tcompile", "triage", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "no Python scripts" in proc.stderr


def test_without_a_named_op_the_minimal_graphs_decide_and_without_a_graph_the_signature():
    def no_op(
        path: str, ops: list[str], signature: str = "aot_eager/accuracy: AccuracyError"
    ) -> ScriptResult:
        b = bug(None, ops, subsystem=None)
        b["bisect"] = {"stage": "aot_eager", "subsystem": None, "detail": None}
        r = result(path, b)
        r.signature = signature
        return r

    # one autocast bug through a Linear and through a matmul: one family, casts aside
    a = no_op("a.py", ["enter_autocast", "float", "linear", "exit_autocast"])
    b = no_op("b.py", ["enter_autocast", "matmul", "exit_autocast"])
    c = no_op("c.py", ["while_loop"])
    # program-level (no graph): the same signature only
    p1 = no_op("p1.py", [], "eager/runtime: AssertionError: mismatch")
    p2 = no_op("p2.py", [], "eager/runtime: AssertionError: mutations dropped")
    p3 = no_op("p3.py", [], "eager/runtime: AssertionError: mismatch")
    cluster([a, b, c, p1, p2, p3])
    assert a.cluster == b.cluster != c.cluster
    assert p1.cluster == p3.cluster != p2.cluster
    assert len({a.cluster, p1.cluster, p2.cluster}) == 3


def test_a_culprit_says_what_its_pass_did_or_the_pattern_its_error_names():
    """Issue 52: ``joint_graph_passes / pass_pattern_0 (fuse_attention)``, and where
    bisect names only the stage, the pattern the error text names."""
    from tcompile.repro.triage_cluster import culprit_of

    sdpa = culprit_of({"bisect": {
        "stage": "inductor", "subsystem": "joint_graph_passes", "detail": "pass_pattern_0",
        "effects": {"fuse_attention": 2, "pattern_matcher_count": 2},
    }})  # fmt: skip
    assert sdpa["text"] == "inductor / joint_graph_passes / pass_pattern_0 (fuse_attention)"
    stage = culprit_of({"bisect": {"stage": "inductor", "pattern": "randperm_index_pattern"}})
    assert stage["text"] == "inductor / pattern randperm_index_pattern (named in the error)"

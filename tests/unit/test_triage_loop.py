"""Bisect and minify once per cluster (repro/jobs/triage_loop.py, issue 52): the
scheduler with fake work -- which scripts get a report, which are checked against whose
culprit switch, who waits for whom -- and the clusters made of it.  Pure: no compiles."""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tcompile.repro.jobs.triage_loop import (
    Scheduler,
    attach_members,
    merge_reps,
    proposals,
    reset_orphans,
)
from tcompile.repro.triage_cluster import cluster, culprit_of, minimal_of
from tcompile.repro.triage_records import Check, ScriptResult

R = ScriptResult.from_json  # a result as the cache holds it

# a script's truth: (its bug, the switch its report's bisect finds, what its run says)
ARGMAX = ("argmax", "lowerings:argmax", {"wrong_op": "argmax"})
CAST = ("cast", "lowerings:convert_element_type", {"wrong_op": "float"})
NORM = ("norm", "decomposition:aten.native_group_norm.default", {"kind": "runtime"})


class Fake:
    """classify_one / report_one / check_one, from each script's truth; a script passes
    with a switch off when it is its bug's switch (or one it is told also helps)."""

    def __init__(self, truth: dict[str, tuple[str, str, dict[str, Any]]], helps=None) -> None:
        self.truth, self.helps = truth, helps or {}
        self.calls: list[tuple[str, str, str | None]] = []
        self.held: list[tuple[Future[Any], Any]] = []  # reports not finished yet
        self.hold_reports = False
        self.batches: list[list[str]] = []  # the switches each capture check asked
        self.not_alone: set[str] = set()  # scripts whose captured graph passes alone

    def submit(self, fn: Any, task: dict[str, Any], *args: Any) -> Future[Any]:
        path = task["path"]
        bug, switch, said = self.truth[path]
        f: Future[Any] = Future()
        name = fn.__name__
        self.calls.append((name, Path(path).name, args[0] if name == "check_one" else None))
        if name == "classify_one":
            res = {"verdict": "bug", "steps": [], "seconds": 5.0, "runs": 1, "device": "cpu",
                   "stage": "inductor", "kind": "accuracy", "exc_type": "AccuracyError",
                   "signature": f"{bug} fails", **said}  # fmt: skip
            f.set_result(R(res))
        elif name == "report_one":
            res = dataclasses.replace(args[0], verdict="bug")
            res.raw_bug = {"kind": res.kind, "bisect": {"stage": "inductor",
                           "subsystem": switch.split(":")[0], "detail": switch.split(":")[1],
                           "without": switch}, "minify": {"ops": [bug], "device": "cpu",
                           "verified": True}}  # fmt: skip
            res.repro, res.repro_lines = f"/repros/{Path(path).stem}.py", 20
            if self.hold_reports:
                self.held.append((f, res))
                return f
            f.set_result(res)
        elif name == "capture_checks_many":  # (rep, switch, stage) asked in order
            got = []
            for rep, off, backend in args[1]:
                passes = switch in off.split() or off in self.helps.get(path, ())
                if path in self.not_alone:  # the capture does not answer: by running
                    chk = Check(off, backend, off=0 if passes else 1, on=1 if passes else None,
                                passes=passes, seconds=9.0,
                                capture_why="the captured graph does not fail alone")  # fmt: skip
                    got.append((rep, chk))
                    break
                got.append((rep, Check(off, backend, off=0 if passes else 1,
                                       on=1 if passes else None, passes=passes,
                                       seconds=1.0, on_capture=True)))  # fmt: skip
                if passes:
                    break
            self.batches.append([off for _, off, _ in args[1]])
            f.set_result(got)
        else:
            off = args[0]
            passes = switch in off.split() or off in self.helps.get(path, ())
            f.set_result(Check(without=off, off=0 if passes else 1, on=1 if passes else None,
                               passes=passes, flaky=False, seconds=4.0))  # fmt: skip
        return f


def _run(tmp_path, truth, *, slots=1, each=False, helps=None, fake=None, early=True):
    fake = fake or Fake(truth, helps)
    tasks = {p: {"path": p, "key": f"k{i:015d}", "timeout": 300} for i, p in enumerate(truth)}
    results: dict[str, ScriptResult] = {}

    def done(path: str, res: ScriptResult, quiet: bool = False) -> None:
        res.path = path
        results[path] = res

    (tmp_path / "cache").mkdir(exist_ok=True)
    sched = Scheduler(tasks, results, submit=fake.submit, done=done, slots=slots,
                      base=tmp_path, each=each, early=early, observer=None)  # fmt: skip
    sched.run()
    return results, fake


def _at(r: ScriptResult, path: str) -> ScriptResult:
    r.path = path  # as triage's done() says where a result belongs
    return r


def _clusters(results):
    rs = list(results.values())
    for r in rs:
        if r.raw_bug:
            r.culprit, r.minimal = culprit_of(r.raw_bug), minimal_of(r.raw_bug)
    reps = [r for r in rs if not r.member_of]
    clusters = merge_reps(cluster(reps), reps)
    attach_members(rs, clusters)
    return clusters


def _write(tmp_path, name, text="import torch\n"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_one_report_per_bug_the_others_join_by_its_switch(tmp_path):
    a1 = _write(tmp_path, "a1.py", "x.argmax()\n")
    a2 = _write(tmp_path, "a2.py", "torch.argmax(y)\n")
    a3 = _write(tmp_path, "a3.py", "z.argmax(1)\n")
    results, fake = _run(tmp_path, {a1: ARGMAX, a2: ARGMAX, a3: ARGMAX})
    reports = [c for c in fake.calls if c[0] == "report_one"]
    assert len(reports) == 1  # bisect and minify once
    members = [r for r in results.values() if r.member_of]
    assert len(members) == 2
    for m in members:
        assert m.joined["without"] == "lowerings:argmax"  # the switch bisect found
        assert m.joined["checked_by_running"] and m.joined["on_exit"] == 1
    (c,) = _clusters(results)
    assert sorted(c.members) == sorted([a1, a2, a3])
    assert len(c.checks) == 2


def test_each_reports_every_script_and_checks_none(tmp_path):
    a1 = _write(tmp_path, "a1.py", "x.argmax()\n")
    a2 = _write(tmp_path, "a2.py", "x.argmax()\n")
    _, fake = _run(tmp_path, {a1: ARGMAX, a2: ARGMAX}, each=True)
    assert [c[0] for c in fake.calls].count("report_one") == 2
    assert not [c for c in fake.calls if c[0] == "check_one"]


def test_a_script_the_switch_does_not_explain_gets_its_own_report(tmp_path):
    a = _write(tmp_path, "a.py", "x.argmax()\n")
    n = _write(tmp_path, "n.py", "nn.GroupNorm(2, 4)\n")
    results, fake = _run(tmp_path, {a: ARGMAX, n: NORM})
    assert [c[0] for c in fake.calls].count("report_one") == 2
    assert not any(r.member_of for r in results.values())
    assert len(_clusters(results)) == 2


def test_a_lowering_switch_is_proposed_only_where_the_script_names_the_op(tmp_path):
    rep = {"path": "rep.py", "device": "cpu", "stage": "inductor", "kind": "accuracy",
           "raw_bug": {"bisect": {"without": "lowerings:add"}}}  # fmt: skip
    r = R({"path": "r.py", "device": "cpu", "stage": "inductor", "kind": "accuracy",
           "wrong_op": "argmax"})  # fmt: skip
    assert proposals(r, [R(rep)], "y = x.argmax() + 1") == []  # '+' is not the word add
    assert proposals(r, [R(rep)], "y = torch.add(x, 1)") == ["rep.py"]
    cast = {**rep, "path": "cast.py", "raw_bug": {"bisect": {"without": "lowerings:convert_element_type"}}}  # fmt: skip
    assert proposals(r, [R(cast)], "x.to(torch.bfloat16)") == ["cast.py"]  # a cast spelled .to
    whole = {**rep, "raw_bug": {"bisect": {"without": "joint_graph_passes:pass_pattern_0"}}}
    assert proposals(r, [R(whole)], "anything") == []  # a whole pattern pass: never
    gpu = {**rep, "device": "cuda", "raw_bug": {"bisect": {"without": "decomposition:aten.x"}}}
    assert proposals(r, [R(gpu)], "") == []  # another device
    decomp = {**gpu, "device": "cpu"}
    assert proposals(r, [R(decomp)], "") == ["rep.py"]  # a decomposition: specific enough


def test_representatives_of_one_pattern_are_checked_against_each_other_whatever_failed():
    # issue 60: fixtures/families/cumsum_* -- one pattern, a crash and a wrong dtype
    off = {"raw_bug": {"bisect": {"without": "pattern:post_grad.pointless_cumsum_replacement"}}}
    rep = {"path": "rep.py", "device": "cpu", "stage": "inductor", "kind": "compile",
           "exc_type": "IndexError", **off}  # fmt: skip
    r = {"path": "r.py", "device": "cpu", "stage": "inductor", "kind": "accuracy",
         "exc_type": "DtypeMismatch", **off}  # fmt: skip
    assert proposals(R(r), [R(rep)]) == ["rep.py"]
    waiting = {k: v for k, v in r.items() if k != "raw_bug"}  # not bisected yet: unlike
    assert proposals(R(waiting), [R(rep)]) == []
    # ... unless its run's compile failed inside that pattern (the failure's `pattern`)
    crashed = {**waiting, "kind": "compile", "exc_type": "TypeError",
               "pattern": "post_grad.pointless_cumsum_replacement"}  # fmt: skip
    assert proposals(R(crashed), [R(rep)]) == ["rep.py"]
    assert proposals(R({**crashed, "pattern": "post_grad.other"}), [R(rep)]) == []
    other = {**r, "raw_bug": {"bisect": {"without": "pattern:post_grad.other"}}}
    assert proposals(R(other), [R(rep)]) == []
    lowering = {"raw_bug": {"bisect": {"without": "lowerings:cumsum"}}}  # two bugs of one op
    assert proposals(R({**r, **lowering}), [R({**rep, **lowering})], "x.cumsum(0)") == []


def test_a_like_failure_waits_for_the_report_under_way(tmp_path):
    a1 = _write(tmp_path, "a1.py", "x.argmax()\n")
    a2 = _write(tmp_path, "a2.py", "x.argmax()\n")
    fake = Fake({a1: ARGMAX, a2: ARGMAX})
    fake.hold_reports = True
    tasks = {p: {"path": p, "key": f"k{i:015d}", "timeout": 300} for i, p in enumerate([a1, a2])}
    results: dict[str, ScriptResult] = {}
    (tmp_path / "cache").mkdir()
    sched = Scheduler(tasks, results, submit=fake.submit, slots=2, base=tmp_path,
                      done=lambda p, r, quiet=False: results.__setitem__(p, _at(r, p)),
                      observer=None)  # fmt: skip
    for item in sched.plan(2):
        sched.start(*item)
    for f in list(sched.inflight):
        sched.finished(f)
    planned = sched.plan(2)  # both run; one report, the other (same wrong op) waits
    assert [k for k, _, _ in planned] == ["report"]
    for item in planned:
        sched.start(*item)
    assert sched.plan(1) == []  # the second slot stays free rather than a second report
    ((f, res),) = fake.held
    f.set_result(res)
    sched.finished(f)
    assert [k for k, _, _ in sched.plan(2)] == ["check"]


def test_passing_as_it_is_too_is_flaky_not_a_member(tmp_path):
    a1 = _write(tmp_path, "a1.py", "x.argmax()\n")
    a2 = _write(tmp_path, "a2.py", "x.argmax()\n")

    class Flaky(Fake):
        def submit(self, fn, task, *args):
            f = super().submit(fn, task, *args)
            if fn.__name__ == "check_one":
                f = Future()
                f.set_result(Check(without=args[0], off=0, on=0, passes=False, flaky=True,
                                   seconds=3.0))  # fmt: skip
            return f

    results, _ = _run(tmp_path, {a1: ARGMAX, a2: ARGMAX}, fake=Flaky({a1: ARGMAX, a2: ARGMAX}))
    verdicts = sorted(r.verdict for r in results.values())
    assert verdicts == ["bug", "flaky"]


def test_representatives_reported_side_by_side_are_checked_against_each_other(tmp_path):
    # two casts whose wrong ops differ are reported at once (two slots, and the reports'
    # bisects are not read early: Ray's other nodes); afterwards one passes with the
    # other's switch off: one cluster
    c1 = _write(tmp_path, "c1.py", "x.to(torch.bfloat16)\n")
    c2 = _write(tmp_path, "c2.py", "x.to(torch.bfloat16) + b\n")
    truth = {c1: CAST, c2: ("cast", "lowerings:add", {"wrong_op": "add"})}
    results, fake = _run(tmp_path, truth, slots=2, early=False,
                         helps={c2: ("lowerings:convert_element_type",)})  # fmt: skip
    assert [c[0] for c in fake.calls].count("report_one") == 2
    assert results[c2].same_as == c1
    (c,) = _clusters(results)
    assert sorted(c.members) == sorted([c1, c2])
    assert c.checks[0]["checked_by_running"]


def test_a_member_whose_representative_is_gone_is_checked_again():
    results = {"m.py": R({"path": "m.py", "verdict": "bug", "member_of": "gone.py",
                          "joined": {"representative": "gone.py"}})}  # fmt: skip
    reset_orphans(results)
    assert results["m.py"].member_of is None and results["m.py"].joined is None
    assert "member_of" not in results["m.py"].to_json()
    # its representative's report, joined while it ran, then ended flaky
    results = {"m.py": R({"path": "m.py", "verdict": "bug", "member_of": "r.py"}),
               "r.py": R({"path": "r.py", "verdict": "flaky", "reported": True})}  # fmt: skip
    reset_orphans(results)
    assert results["m.py"].member_of is None


def test_argmin_is_not_joined_by_the_argmax_switch(tmp_path):
    """A lowering switch is the op bisect found, not a family: argmin and argmax share
    inductor's arg-reduction, but the int8 argmin bug (#191499) is not the transposed
    argmax one (#193492) -- checked as one, they joined on the main corpus."""
    from tcompile.repro.jobs.triage_propose import family

    assert family("lowerings:argmax") == "lowerings:argmax"
    a = _write(tmp_path, "a.py", "x.argmax()\n")
    b = _write(tmp_path, "b.py", "torch.argmin(y)\n")
    truth = {a: ARGMAX, b: ("argmin", "lowerings:argmin", {"wrong_op": "argmin"})}
    results, fake = _run(tmp_path, truth, helps={b: ("lowerings:argmax lowerings:argmin",)})
    assert [c[0] for c in fake.calls].count("report_one") == 2
    assert not any(r.member_of for r in results.values())


def test_a_member_of_another_op_says_its_own(tmp_path):
    """A member whose wrong op differs from its representative's (a cast spelled as
    another op) says its op beside the representative's culprit."""
    a = _write(tmp_path, "a.py", "x.float()\n")
    b = _write(tmp_path, "b.py", "y.to(torch.half)\n")
    truth = {a: CAST, b: ("cast", "lowerings:convert_element_type", {"wrong_op": "half"})}
    results, fake = _run(tmp_path, truth)
    (member,) = [r for r in results.values() if r.member_of]
    _clusters(results)
    assert member.culprit["own_op"] == "half"
    assert member.culprit["text"].endswith("(this script: half)")


def test_a_culprit_below_inductor_is_checked_at_its_stage(tmp_path):
    from tcompile.repro.jobs.triage_propose import switch_stage

    at = {"raw_bug": {"bisect": {"stage": "aot_eager_decomp_partition"}}}
    assert switch_stage(R(at)) == "aot_eager_decomp_partition"
    assert switch_stage(R({"raw_bug": {"bisect": {"stage": "inductor"}}})) is None
    g1 = _write(tmp_path, "g1.py", "gn = nn.GroupNorm(10, 10)\n")
    g2 = _write(tmp_path, "g2.py", "nn.GroupNorm(1, 10)\n")
    truth = {g1: NORM, g2: NORM}

    class AtStage(Fake):
        def submit(self, fn, task, *args):
            if fn.__name__ == "report_one":
                f = super().submit(fn, task, *args)
                f.result().raw_bug["bisect"]["stage"] = "aot_eager_decomp_partition"
                return f
            if fn.__name__ == "check_one":
                assert args[2] == "aot_eager_decomp_partition"  # the backend it runs at
            return super().submit(fn, task, *args)

    results, _ = _run(tmp_path, truth, fake=AtStage(truth))
    (member,) = [r for r in results.values() if r.member_of]
    assert member.joined["without"] == "decomposition:aten.native_group_norm.default"


def test_a_report_ends_its_minify_within_the_scripts_budget(tmp_path, monkeypatch):
    """report --max-time: triage's cap, and never past what --timeout leaves after the
    runs less a margin for verifying (a report killed at the budget leaves no repro)."""
    from tcompile.repro.jobs import triage_one

    seen: list[list[str]] = []

    def fake(python, argv, budget, log, cwd, env):
        seen.append(argv)
        return 1, {"bugs": []}, 1.0

    monkeypatch.setattr(triage_one, "_tcompile", fake)
    task = {"path": str(tmp_path / "s.py"), "args": [], "work_dir": str(tmp_path / "w"),
            "timeout": 300, "max_time": 150}  # fmt: skip
    (tmp_path / "w").mkdir()
    triage_one.report_one(task, R({"verdict": "bug", "seconds": 20.0, "runs": 1}))
    assert seen[-1][seen[-1].index("--max-time") + 1] == "150"
    triage_one.report_one(task, R({"verdict": "bug", "seconds": 200.0, "runs": 1}))
    assert seen[-1][seen[-1].index("--max-time") + 1] == str(int(100 - triage_one._MARGIN))


def test_a_lowering_of_one_overload_is_named_by_its_op():
    """A lowering switch of one overload (GPU slice_scatter gradients, fixtures/dupes_gpu:
    ``lowerings:slice_scatter_default``) is the op the script spells ``slice_scatter``."""
    from tcompile.repro.jobs.triage_propose import _named, _switch_op

    assert _switch_op("lowerings:slice_scatter_default") == "slice_scatter"
    assert _switch_op("lowerings:copy__default") == "copy_"
    assert _switch_op("decomposition:aten.native_group_norm.default") == "native_group_norm"
    text = "torch.slice_scatter(x, y, dim=0, start=0, end=2).sum()"
    assert _named(_switch_op("lowerings:slice_scatter_default"), R({"wrong_op": "sum"}), text)
    assert not _named(_switch_op("lowerings:copy__default"), R({"wrong_op": "sum"}), text)


def test_a_check_at_a_stage_below_inductor_asks_first_whether_it_fails_there(tmp_path, monkeypatch):
    """An inductor bug passes at aot_eager_decomp_partition with or without a
    decomposition: one run, not a member, and not flaky (five inductor bugs of the main
    corpus were called flaky when the switch was asked first)."""
    from tcompile.repro.jobs import triage_one

    answers: dict[bool, int] = {}  # switch off? -> exit

    def fake(python, argv, budget, log, cwd, env):
        return answers["--without" in argv], {}, 1.0

    monkeypatch.setattr(triage_one, "_tcompile", fake)
    task = {"path": str(tmp_path / "s.py"), "args": [], "work_dir": str(tmp_path / "w"),
            "timeout": 300}  # fmt: skip
    (tmp_path / "w").mkdir()
    off = "decomposition:aten.native_group_norm.default"
    answers.update({True: 0, False: 0})  # passes at that stage either way
    got = triage_one.check_one(task, off, 100, backend="aot_eager_decomp_partition")
    assert not got.passes and not got.flaky and len(got.steps) == 1
    answers.update({True: 0, False: 1})  # fails there, passes with the switch off
    got = triage_one.check_one(task, off, 100, backend="aot_eager_decomp_partition")
    assert got.passes and [s.what[:6] for s in got.steps] == ["run at", "withou"]
    answers.update({True: 0, False: 0})  # at inductor: passes off, then as it is: flaky
    got = triage_one.check_one(task, "lowerings:argmax", 100)
    assert got.flaky and not got.passes


def test_a_result_round_trips_through_its_json_and_keeps_what_it_does_not_know():
    """Issue 60: the cache, --json and the pages are written from the records; a cache
    file read back is the same record, and a key this tcompile does not know (a newer
    one's field) is written back, never lost."""
    doc = {"path": "a.py", "verdict": "flaky", "seconds": 3.5, "runs": 2,
           "steps": [{"what": "run 1", "exit_code": 1, "seconds": 3.0},
                     {"what": "report", "exit_code": None, "seconds": 0.0}],
           "flaky": {"failed": 1, "of": 2}, "member_of": None, "newer_field": {"x": 1},
           "checks": [{"rep": "b.py", "without": "lowerings:sum", "off": 0, "on": 1,
                       "passes": True, "flaky": False, "seconds": 2.0, "steps": []}]}  # fmt: skip
    r = R(doc)
    assert r.verdict == "flaky" and r.flaky.of == 2 and r.checks[0].passes
    assert [s.finished for s in r.steps] == [True, False]
    again = r.to_json()
    assert again["newer_field"] == {"x": 1} and "member_of" not in again  # unset: left out
    assert again["flaky"] == {"failed": 1, "of": 2} and again["checks"][0]["rep"] == "b.py"
    assert R(again) == r
    public = r.to_json(public=True)
    assert public["unfinished"] == ["report"] and "raw_bug" not in public


def _reported(path: str, switch: str, op: str) -> ScriptResult:
    return R({"path": path, "verdict": "bug", "reported": True, "device": "cpu",
              "stage": "inductor", "kind": "accuracy", "exc_type": "AccuracyError",
              "wrong_op": op, "raw_bug": {"bisect": {"without": switch}}})  # fmt: skip


def _checked_against(tmp_path, d, bug, op, reps, *, early=True, not_alone=False):
    """Script ``d`` (its run saved its graph; its wrong node ``op``) checked against
    representatives already reported, ``reps``: {path: (switch, op)}."""
    truth = {d: bug, **{p: ("x", sw, {}) for p, (sw, _) in reps.items()}}
    fake = Fake(truth)
    if not_alone:
        fake.not_alone.add(d)
    results = {p: _reported(p, sw, o) for p, (sw, o) in reps.items()}
    results[d] = R({"path": d, "verdict": "bug", "device": "cpu", "stage": "inductor",
                    "kind": "accuracy", "exc_type": "AccuracyError", "wrong_op": op,
                    "capture": "/captured/graph-0", "seconds": 5.0})  # fmt: skip
    tasks = {p: {"path": p, "key": f"k{i:015d}", "timeout": 300} for i, p in enumerate(truth)}
    (tmp_path / "cache").mkdir(exist_ok=True)
    sched = Scheduler(tasks, results, submit=fake.submit, slots=1, base=tmp_path, early=early,
                      done=lambda p, r, quiet=False: results.__setitem__(p, r), observer=None)  # fmt: skip
    sched.run()
    return results, fake, sched


def _held(tmp_path, fake, paths, results=None):
    """A scheduler of two slots whose reports ``fake`` holds (each script its own
    work_dir: w1, w2, ...), driven by hand."""
    tasks = {p: {"path": p, "key": f"k{i:015d}", "timeout": 300,
                 "work_dir": str(tmp_path / f"w{i + 1}")} for i, p in enumerate(paths)}  # fmt: skip
    results = {} if results is None else results
    (tmp_path / "cache").mkdir()
    sched = Scheduler(tasks, results, submit=fake.submit, slots=2, base=tmp_path,
                      done=lambda p, r, quiet=False: results.__setitem__(p, _at(r, p)),
                      observer=None)  # fmt: skip
    return sched, results


def test_the_switches_of_several_representatives_are_asked_on_one_capture(tmp_path):
    """A script proposed three representatives is asked all three on its captured
    graph in one check (one worker: its start and first compile paid once), in the
    proposals' order, up to the one that makes it pass; none by running."""
    d = _write(tmp_path, "d.py", "x.float().argmin(0); x.argmax(1)\n")
    reps = {"a.py": ("lowerings:convert_element_type", "float"),
            "b.py": ("lowerings:argmin", "argmin"), "c.py": ("lowerings:argmax", "argmax")}  # fmt: skip
    results, fake, _ = _checked_against(tmp_path, d, ARGMAX, "argmax", reps)
    (asked,) = fake.batches
    assert asked[-1] == "lowerings:argmax" and len(asked) == 3, asked
    assert not [c for c in fake.calls if c[0] == "check_one"]
    assert results[d].member_of == "c.py" and results[d].joined["on_capture"]
    assert [c.without for c in results[d].checks] == asked


def test_a_capture_that_does_not_answer_is_not_asked_again(tmp_path):
    """Where the captured graph does not fail alone, that check ran the program (said,
    ``capture_why``) and the script's next checks run it at once."""
    d = _write(tmp_path, "d.py", "x.float().argmin(0)\n")
    reps = {"a.py": ("lowerings:convert_element_type", "float"),
            "b.py": ("lowerings:argmin", "argmin")}  # fmt: skip
    bug = ("argmin", "lowerings:argmin", {})
    results, fake, sched = _checked_against(tmp_path, d, bug, "argmin", reps, not_alone=True)
    assert fake.batches == [["lowerings:convert_element_type", "lowerings:argmin"]]
    assert d in sched.uncaptured and results[d].checks[0].capture_why
    checks = [c for c in fake.calls if c[0] == "check_one"]
    assert checks == [("check_one", "d.py", "lowerings:argmin")]  # by running, at once
    assert results[d].member_of == "b.py"


def test_scripts_one_pattern_ties_wait_for_its_report_whatever_they_failed(tmp_path):
    """fixtures/families' pointless_cumsum_replacement reports: two crash inside the
    pattern (an IndexError, a TypeError), one computes a wrong dtype of ``cumsum``.
    One report; the other two wait for it (a slot stays free rather than report them
    beside it) and join by its switch."""
    pat = "post_grad.pointless_cumsum_replacement"
    switch = f"pattern:{pat}"
    crash = {"kind": "compile", "exc_type": "IndexError", "pattern": pat, "wrong_op": None}
    truth = {
        _write(tmp_path, "a.py"): ("cumsum", switch, crash),
        _write(tmp_path, "b.py"): ("cumsum", switch, {**crash, "exc_type": "TypeError"}),
        _write(tmp_path, "c.py"): ("cumsum", switch, {"kind": "accuracy",
                                                      "exc_type": "DtypeMismatch",
                                                      "wrong_op": "cumsum"}),
    }  # fmt: skip
    results, fake = _run(tmp_path, truth, slots=2)
    assert [c[1] for c in fake.calls if c[0] == "report_one"] == ["a.py"]
    assert sorted(Path(r.member_of or "").name for r in results.values()) == ["", "a.py", "a.py"]


def test_a_waiting_script_is_checked_against_a_report_whose_bisect_is_known(tmp_path):
    """A report writes its bisect before its minify (bisected.json); a script like it
    that waits is checked against that switch at once, the report still under way --
    and checked again if the report then ends otherwise."""
    c1 = _write(tmp_path, "c1.py", "x.to(torch.bfloat16)\n")
    c2 = _write(tmp_path, "c2.py", "x.to(torch.bfloat16) + b\n")
    c3 = _write(tmp_path, "c3.py", "x.to(torch.half) * b\n")
    truth = {c1: CAST, c2: ("cast", "lowerings:add", {"wrong_op": "add"}),
             c3: ("cast", "lowerings:mul", {"wrong_op": "mul"})}  # fmt: skip
    fake = Fake(truth, {c: ("lowerings:convert_element_type",) for c in (c2, c3)})
    fake.hold_reports = True
    sched, results = _held(tmp_path, fake, [c1, c2, c3])
    for item in sched.plan(3):  # the three scripts' runs
        sched.start(*item)
    for f in list(sched.inflight):
        sched.finished(f)
    # two scripts wait for one free slot: they wait for the report's bisect
    (planned,) = sched.plan(2)
    assert planned[:2] == ("report", c1)  # the cheapest, by path: c1
    sched.start(*planned)
    assert sched.plan(1) == []  # c2, c3 wait: the report's bisect is not known yet
    bisected = tmp_path / "w1" / "report" / "report-001" / "bisected.json"
    bisected.parent.mkdir(parents=True)
    bisected.write_text(json.dumps({"without": "lowerings:convert_element_type"}))
    sched._read_early()
    (check,) = sched.plan(1)
    assert check == ("check", c2, c1)  # against the report under way
    sched.start(*check)
    sched.finished(next(f for f in sched.inflight if sched.inflight[f][0] == "check"))
    assert results[c2].member_of == c1
    ((f, res),) = fake.held
    res.verdict = "flaky"  # its report ended otherwise: the member is checked again
    f.set_result(res)
    sched.finished(f)
    assert results[c2].member_of is None and c1 not in sched.tried[c2]


def test_two_representatives_of_one_switch_are_asked_once(tmp_path):
    """Two casts reported side by side have one switch: a script is asked it once (the
    families3 corpus asked ``convert_element_type`` twice in one check)."""
    d = _write(tmp_path, "d.py", "x.float().argmax(1)\n")
    reps = {"a.py": ("lowerings:convert_element_type", "float"),
            "b.py": ("lowerings:convert_element_type", "to")}  # fmt: skip
    results, fake, _ = _checked_against(tmp_path, d, ARGMAX, "argmax", reps, early=False)
    assert fake.batches[0] == ["lowerings:convert_element_type"]
    assert [c.without for c in results[d].checks] == ["lowerings:convert_element_type"]


def test_a_twin_of_a_report_still_bisecting_waits_for_its_switch(tmp_path):
    """The same failure at the same wrong op as a report under way: its switch is the
    best proposal, so another representative's (a cast) is not asked first."""
    a1 = _write(tmp_path, "a1.py", "x.float().argmax()\n")
    a2 = _write(tmp_path, "a2.py", "x.float().argmax(1)\n")
    fake = Fake({a1: ARGMAX, a2: ARGMAX, "c.py": CAST})
    fake.hold_reports = True
    cast = {"c.py": _reported("c.py", "lowerings:convert_element_type", "float")}
    sched, results = _held(tmp_path, fake, [a1, a2], cast)
    for item in sched.plan(2):
        sched.start(*item)
    for f in list(sched.inflight):
        sched.finished(f)
    # a1 is checked against the cast, a2 too: neither has a report under way yet
    assert sorted(k for k, _, _ in sched.plan(2)) == ["check", "check"]
    sched.tried[a1].add("c.py")  # as if a1 had been asked the cast's switch: no
    (report,) = sched.plan(1)
    assert report == ("report", a1, None)
    sched.start(*report)
    assert sched.plan(1) == []  # a2 waits for a1's switch, not the cast's
    bisected = tmp_path / "w1" / "report" / "r" / "bisected.json"
    bisected.parent.mkdir(parents=True)
    bisected.write_text(json.dumps({"without": "lowerings:argmax"}))
    sched._read_early()
    assert sched.plan(1) == [("check", a2, a1)]


def test_with_a_slot_for_each_no_script_waits_for_a_bisect(tmp_path):
    """Fourteen GPU slots and scripts of one failure kind: a script unlike the report
    under way (another wrong op) is reported beside it at once, not after its bisect
    (waiting ran the bisects one by one)."""
    c1 = _write(tmp_path, "c1.py", "x.to(torch.bfloat16)\n")
    c2 = _write(tmp_path, "c2.py", "x.sort()\n")
    fake = Fake({c1: CAST, c2: ("sort", "lowerings:sort", {"wrong_op": "sort"})})
    fake.hold_reports = True
    sched, _ = _held(tmp_path, fake, [c1, c2])
    for item in sched.plan(2):
        sched.start(*item)
    for f in list(sched.inflight):
        sched.finished(f)
    assert [(k, Path(p).name) for k, p, _ in sched.plan(2)] == [("report", "c1.py"),
                                                                ("report", "c2.py")]  # fmt: skip

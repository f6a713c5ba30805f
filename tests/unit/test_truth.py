"""Issue 49: no false answer.  The pieces a verdict rests on, each on its own, fast:

* whose code a frame is, by where the code lives (owners.py) -- never by a word in a
  path, so a program, tcompile and torch under folders named ``tcompile`` keep theirs;
* the cause of a failure (cause.py): the raised type below torch's wrappers and the
  program's own raising line, on real exceptions (Dynamo's fake-tensor wrapping, an
  FX graph's node) -- "the same failure without torch.compile" compares causes;
* the invariant (invariant.py): a clean verdict never contradicts how the processes
  ended; the teardown rule ends a hung rank only when every rank's code returned.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

from tcompile.compiler import invariant, owners
from tcompile.compiler.cause import Cause
from tcompile.compiler.collect import fails_the_same_way
from tcompile.compiler.protocol import Event
from tcompile.compiler.runner import ProcessResult, _EventTail
from tcompile.compiler.signature import innermost_frame

ROOT = Path(__file__).resolve().parents[2]


# -- whose code -------------------------------------------------------------------


def test_owners_by_location_not_by_name(tmp_path):
    import torch

    assert owners.owner(owners.__file__) is owners.Owner.TCOMPILE
    assert owners.owner(str(ROOT / "compiler" / "child" / "hooks.py")) is owners.Owner.TCOMPILE
    assert owners.owner(torch.nn.functional.__file__) is owners.Owner.TORCH
    assert owners.owner(os.__file__) is owners.Owner.INSTALLED
    # the checkout's fixtures and tests are programs, not tcompile
    assert owners.is_user(str(ROOT / "fixtures" / "clean.py"))
    assert owners.is_user(str(ROOT / "tests" / "unit" / "test_truth.py"))
    # a project in a folder named tcompile, with folders named compiler/child in it
    proj = tmp_path / "tcompile" / "compiler" / "child"
    proj.mkdir(parents=True)
    assert owners.is_user(str(proj / "train.py"))
    assert owners.owner("<eval_with_key>.3") is owners.Owner.GENERATED
    assert owners.owner("<string>") is owners.Owner.USER  # python -c


def test_innermost_frame_in_a_folder_named_tcompile(tmp_path):
    folder = tmp_path / "tcompile" / "proj"
    folder.mkdir(parents=True)
    (folder / "usermod_truth.py").write_text("def boom():\n    raise RuntimeError('x')\n")
    sys.path.insert(0, str(folder))
    try:
        import usermod_truth

        with pytest.raises(RuntimeError) as info:
            usermod_truth.boom()
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("usermod_truth", None)
    assert innermost_frame(info.value) == "usermod_truth.py:2 in boom"


def test_innermost_user_frame_skips_torch_and_tcompile():
    import torch

    frames = [
        "/p/train.py:30 in <module>",
        f"{torch.nn.functional.__file__}:2615 in embedding",
        "/p/model.py:11 in forward",
        f"{torch.nn.functional.__file__}:100 in linear",
        f"{owners.__file__}:1 in owner",
    ]
    assert owners.innermost_user(frames) == "/p/model.py:11 in forward"
    assert owners.innermost_user(frames[1:2]) == ""


# -- the cause ---------------------------------------------------------------------


def _user_error():
    raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (32x1568 and 2048x10)")


def _caught(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    raise AssertionError("did not raise")


def test_dynamos_wrapping_has_the_cause_of_eagers_error():
    from torch._dynamo.exc import TorchRuntimeError, Unsupported

    eager = _caught(_user_error)

    def wrapped():
        try:
            _user_error()
        except RuntimeError as e:
            try:
                raise Unsupported("RuntimeError when making fake tensor call") from e
            except Unsupported as u:
                u.real_stack = traceback.extract_tb(e.__traceback__)  # as Dynamo does
                raise TorchRuntimeError("RuntimeError when making fake tensor call") from u

    dynamo = _caught(wrapped)
    a, b = Cause.from_exception(dynamo), Cause.from_exception(eager)
    assert a.types[0] == "builtins.RuntimeError" and a.same(b) and b.same(a)
    assert a.frame.endswith(" in _user_error")
    # Dynamo's own error with nothing below it is not the program's RuntimeError
    alone = _caught(lambda: (_ for _ in ()).throw(Unsupported("graph break")))
    assert Cause.from_exception(alone).wrapped_only
    assert not Cause(Cause.from_exception(alone).types, a.frame).same(b)


def test_a_subclass_is_the_same_kind_a_sibling_is_not():
    frame = "/p/m.py:3 in f"
    device = Cause(("torch._subclasses.fake_tensor.X", "builtins.RuntimeError"), frame)
    assert device.same(Cause(("builtins.RuntimeError",), frame))
    assert not device.same(Cause(("builtins.RuntimeError",), "/p/m.py:4 in f"))
    index = Cause(("builtins.IndexError", "builtins.LookupError"), frame)
    assert not index.same(Cause(("builtins.KeyError", "builtins.LookupError"), frame))


def test_a_graph_node_names_the_user_line_it_came_from():
    """An error raised on a line of an FX graph's generated code (eager running the
    graph) is placed at the user line the node was traced from."""
    import torch

    from tcompile.compiler.child.runners import eager_call

    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    def f(x, w):
        return torch.mm(x, w) + 1  # the node's line

    torch._dynamo.reset()
    torch.compile(f, backend=keep)(torch.randn(2, 3), torch.randn(3, 4))
    err = _caught(lambda: eager_call(graphs[0], [torch.randn(2, 3), torch.randn(5, 4)]))
    line = f.__code__.co_firstlineno + 1
    assert Cause.from_exception(err).frame.endswith(f"test_truth.py:{line} in f")


def _exc_event(cause, rank=None):
    e = {"event": Event.EXCEPTION, "pid": 1, "signature": {"exc_type": "RuntimeError"}}
    e["cause"] = cause.to_json()
    return e | ({"rank": rank} if rank is not None else {})


def _result(returncode, events=(), timed_out=False, teardown=False):
    return ProcessResult(
        returncode, 1.0, timed_out, [], list(events), {}, "/nonexistent", teardown_hang=teardown
    )


def test_the_same_failure_is_the_same_cause_not_the_same_words():
    here = Cause(("builtins.RuntimeError",), "/p/m.py:20 in forward")
    there = Cause(("builtins.RuntimeError",), "/p/m.py:21 in forward")
    assert fails_the_same_way(_result(1, [_exc_event(here)]), _result(1, [_exc_event(here)]))
    assert not fails_the_same_way(_result(1, [_exc_event(here)]), _result(1, [_exc_event(there)]))
    assert not fails_the_same_way(_result(1, [_exc_event(here)]), _result(0))


# -- the invariant -------------------------------------------------------------------


def _rank_events(rank, *, raised=None, code=0, destroyed=True, exited=True):
    pid = 9_000_000 + rank  # no such process: never found stuck
    out = [{"event": Event.START, "pid": pid, "rank": rank}]
    if destroyed:
        out.append({"event": Event.GROUP_DESTROYED, "pid": pid, "rank": rank})
    if raised:
        out.append({"event": Event.EXCEPTION, "pid": pid, "rank": rank, "signature_text": raised})
    if exited:
        out.append({"event": Event.EXIT, "pid": pid, "rank": rank, "code": code, "raised": raised})
    return out


def test_each_ranks_ending_is_read():
    events = _rank_events(0) + _rank_events(1, raised="AssertionError: 6 steps", code=1)
    events += _rank_events(2, code=3) + _rank_events(3, exited=False)
    assert [r["ended"] for r in invariant.rank_endings(events)] == [
        "returned",
        "raised AssertionError: 6 steps",
        "exit 3",
        "no exit seen",
    ]
    assert invariant.rank_endings([{"event": Event.START, "pid": 1}]) == []


def test_a_clean_verdict_never_contradicts_the_processes():
    returned = invariant.rank_endings(_rank_events(0) + _rank_events(1))
    failed = invariant.rank_endings(_rank_events(0) + _rank_events(1, raised="X: y", code=1))
    assert invariant.contradiction(0, False, False, []) is None
    assert invariant.contradiction(None, False, False, []) is None  # not known (merge)
    assert "status 1" in invariant.contradiction(1, False, False, [])
    assert "time limit" in invariant.contradiction(0, True, False, [])
    # the named exception: a hang at teardown after every rank's code returned
    assert invariant.contradiction(0, False, True, returned) is None
    assert "rank 1 raised X: y" in invariant.contradiction(0, False, True, failed)
    with pytest.raises(Exception, match="would report the program clean"):
        invariant.check_clean(0, False, True, failed)


def _tail(tmp_path, events):
    with open(tmp_path / "events-1.jsonl", "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    tail = _EventTail(str(tmp_path), observer=type("O", (), {"event": lambda s, e: None})())
    tail.poll()
    tail.last_destroyed -= 3600  # the grace period is over
    return tail


def test_a_rank_hung_at_teardown_only_when_every_ranks_code_returned(tmp_path):
    assert _tail(tmp_path, _rank_events(0) + _rank_events(1)).finished_ranks_hung()
    # rank 1 raised after destroying its group (issue 49): never a hang at teardown
    late = _rank_events(0) + _rank_events(1, raised="AssertionError: x", code=1)
    assert not _tail(tmp_path, late).finished_ranks_hung()
    assert not _tail(tmp_path, _rank_events(0) + _rank_events(1, code=2)).finished_ranks_hung()
    # a rank that has not said how it ended
    assert not _tail(
        tmp_path, _rank_events(0) + _rank_events(1, exited=False)
    ).finished_ranks_hung()


def test_stuck_at_its_end_is_only_the_modules_frame_on_every_thread():
    """What gloo's hang looks like in a faulthandler dump: the main thread at its
    module's last line and nothing above it; other threads in no code of the program's."""
    from tcompile.compiler.procs import _at_its_end

    main = 'Current thread 0x1 (most recent call first):\n  File "/p/train.py", line 41 in <module>'
    helper = (
        "Thread 0x2 (most recent call first):\n"
        f'  File "{owners.__file__}", line 156 in wait_for_exit\n'
        f'  File "{os.__file__}", line 982 in run'
    )
    assert _at_its_end(f"{helper}\n\n{main}\n")
    busy = 'Current thread 0x1 (most recent call first):\n  File "/p/train.py", line 9 in save\n  File "/p/train.py", line 41 in <module>'
    assert not _at_its_end(busy)  # the program's own function still runs
    worker = 'Thread 0x3 (most recent call first):\n  File "/p/loader.py", line 3 in fetch'
    assert not _at_its_end(f"{worker}\n\n{main}")
    assert _at_its_end("")  # no Python frame at all: the interpreter tears down


def test_stuck_means_the_main_thread_spends_nothing_whatever_other_threads_do():
    """gloo's TCP and run-loop threads wake up and spend ticks while the main thread
    waits forever in the process group's destructor: only the main thread counts."""
    import subprocess
    import time

    from tcompile.compiler.procs import _cpu_ticks

    code = (
        "import threading, time\n"
        "def spin():\n"
        "    while True:\n"
        "        sum(range(20000)); time.sleep(0.001)\n"
        "threading.Thread(target=spin, daemon=True).start()\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(1.0)

        def total():
            return sum(
                map(
                    int, Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13]
                )
            )

        main, all_before = _cpu_ticks(proc.pid), total()
        time.sleep(1.0)
        assert total() > all_before  # the process works ...
        assert _cpu_ticks(proc.pid) == main  # ... its main thread does not
    finally:
        proc.kill()
        proc.wait()


def test_a_one_node_torchrun_gets_a_port_of_its_own_a_named_endpoint_is_kept():
    """Two jobs on torchrun's default port join each other's rendezvous (seen: 336 s
    instead of 11 for two tests side by side)."""
    from tcompile.compiler.runner import on_own_port

    cmd = on_own_port(["torchrun", "--nproc-per-node", "2", "t.py", "--lr", "1"])
    assert (
        cmd[0] == "torchrun"
        and cmd[1].startswith("--master-port=")
        and cmd[2:] == ["--nproc-per-node", "2", "t.py", "--lr", "1"]
    )
    cmd = on_own_port([sys.executable, "-m", "torch.distributed.run", "t.py"])
    assert cmd[3].startswith("--master-port=") and cmd[4] == "t.py"
    for kept in (
        ["torchrun", "--standalone", "t.py"],
        ["torchrun", "--nnodes", "2", "--rdzv-endpoint", "h:1", "t.py"],
        ["torchrun", "--master_port", "1234", "t.py"],
        [sys.executable, "t.py"],
    ):
        assert on_own_port(kept) == kept


def test_the_command_line_turns_a_contradiction_into_exit_4(capsys):
    """A report that would say clean while the program failed is tcompile's own error."""
    from tcompile.cli import app
    from tcompile.repro.jobs.classify import RunReport

    report = RunReport(
        graphs=[], failures=[], notes=[], exit_code=0, verdict="clean", explanation="",
        returncode=1, seconds=0.0, run_dir=None, command=["x"], stage=None, accuracy="off",
        program={"returncode": 1, "exception": "ValueError: x", "last_line": None},
    )  # fmt: skip
    with pytest.raises(SystemExit) as info:
        app.finish(lambda: report, as_json=True, render=lambda r, c: None)
    assert info.value.code == 4
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"] == "internal-error" and "status 1" in doc["explanation"]


def test_the_hooks_say_how_a_rank_ended(tmp_path):
    """A rank's EXIT event: returned, sys.exit(3), raised -- from a real interpreter under
    the hooks (no torch import)."""
    import subprocess

    from tcompile.compiler.protocol import HookConfig, read_events
    from tcompile.compiler.runner import child_env

    cases = {
        "returned": "print('ok')",
        "exit": "import sys; sys.exit(3)",
        "raised": "raise ValueError('bad')",
    }
    got = {}
    for name, code in cases.items():
        run = tmp_path / name
        env = child_env(HookConfig(dir=str(run)))
        env.update(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
        env.pop("TCOMPILE_RANK_PROCESS", None)
        subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True)
        got[name] = [e["ended"] for e in invariant.rank_endings(read_events(str(run)))]
    assert got == {
        "returned": ["returned"],
        "exit": ["exit 3"],
        "raised": ["raised ValueError: bad"],
    }


# -- graphs that load anywhere ---------------------------------------------------------


def test_a_graph_with_prims_memory_formats_and_an_unknown_op_round_trips():
    """prims.fma exists only once inductor's prims module is imported; memory formats
    do not pickle with torch.save; an op no module here registers loads as a stand-in
    that saves back to the same reference (issue 49: a report step died on prims.fma)."""
    import io

    import torch
    from torch import fx

    from tcompile.compiler import graph_io

    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.ops.aten.clone.default, (x,), {"memory_format": torch.channels_last})
    g.output(g.call_function(torch.ops.aten.mul.Tensor, (y, y)))
    data = graph_io.to_data(fx.GraphModule(torch.nn.Module(), g))
    buf = io.BytesIO()
    torch.save(data, buf)  # a memory format in kwargs: saved
    data = torch.load(io.BytesIO(buf.getvalue()), weights_only=False)
    data["nodes"][2]["target"] = ("overload", "prims::fma", "default", None)
    loaded = graph_io.from_data(data)
    assert [str(n.target) for n in loaded.graph.nodes][1:3] == [
        "aten.clone.default",
        "prims.fma.default",
    ]
    assert list(loaded.graph.nodes)[1].kwargs["memory_format"] is torch.channels_last
    data["nodes"][2]["target"] = ("overload", "nolib_truth::op", "default", None)
    stand_in = graph_io.from_data(data)
    assert graph_io.to_data(stand_in)["nodes"][2]["target"][:3] == (
        "overload",
        "nolib_truth::op",
        "default",
    )
    with pytest.raises(graph_io.UnresolvedOp, match="nolib_truth::op"):
        stand_in(torch.randn(1, 2, 2, 2))


# -- artifacts that do not lie -----------------------------------------------------------


def test_shared_text_names_no_folder_of_this_machine(tmp_path):
    from tcompile.repro.shareable import places, scrub

    proj, out = tmp_path / "home" / "proj", tmp_path / "home" / "proj" / "out"
    where = places([str(proj)], str(out))
    text = f'File "{proj}/model.py", line 3; files in {out}/run-001; cache {tmp_path}/x'
    said = scrub(text, where)
    assert 'File "model.py", line 3' in said and "<out>/run-001" in said
    assert str(proj) not in said and str(out) not in said


def test_a_titles_device_is_the_failing_graphs():
    from tcompile.repro.jobs.report import _device, title

    graphs = [
        {"level": "dynamo", "index": 0, "device": "cpu"},
        {"level": "dynamo", "index": 1, "device": "cuda"},
    ]
    assert _device(graphs, 0) == "cpu" and _device(graphs, 1) == "cuda"
    assert _device(graphs, None) == "cuda"  # no graph holds it: where the program ran
    bug = {"kind": "runtime", "signature": "inductor/runtime: RuntimeError: x", "device": "cuda"}
    assert title(bug).endswith("on CUDA")
    cudagraphs = {"kind": "runtime", "signature": "s: E: x", "bisect": {"subsystem": "cudagraphs"}}
    assert title(cudagraphs).endswith("on CUDA")
    assert title({**bug, "device": "cpu"}).endswith("on CPU")


def test_not_verified_says_why_in_one_line_with_what_to_do():
    from tcompile.repro.verify import why_not_verified

    cases = {
        "Traceback ...\nModuleNotFoundError: No module named 'models'\nERROR: x": "'models'",
        "ERROR: with torch.compile off too: ValueError: x": "without torch.compile too",
        "NOT REPRODUCED": "did not show in a fresh interpreter",
        "REPRODUCED: program/exception: KeyError: 'a'": "another failure (program/exception",
        "": "its last line: 'nothing'",
    }
    for said, want in cases.items():
        why = why_not_verified(said)
        assert want in why and "\n" not in why, (said, why)

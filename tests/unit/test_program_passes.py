"""The program-level minify's search (minifier/program_passes.py, the source engine on a
whole module) against pure oracles: no processes, no compiles."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

from tcompile.minifier.source import minify_source
from tcompile.minifier.source_case import program_size, unbound_names
from tcompile.minifier.verdict import Verdict

PROGRAM = textwrap.dedent(
    """
    import math
    import os

    WIDTH = 64
    STEPS = 100


    def scale(v, k):
        y = v * k
        return y


    def noise(n):
        return [i % 7 for i in range(n)]


    class Logger:
        def log(self, text):
            self.last = text


    logger = Logger()
    total = 0
    for step in range(STEPS):
        total += scale(step, 3)
        logger.log(f"step {step}")
    values = noise(WIDTH)
    if total > 10:
        boom(values)
    print(math.sqrt(total), os.sep)
    """
)


def _oracle(source: str) -> str:
    """'Fails the same way' when the program still calls boom(...) on a list."""
    calls: list[object] = []
    namespace = {"__name__": "__main__", "boom": calls.append, "print": lambda *a: None}
    try:
        exec(compile(source, "<candidate>", "exec"), namespace)  # noqa: S102
    except Exception:
        return Verdict.INVALID
    ok = any(isinstance(c, list) for c in calls)
    return Verdict.SAME_FAILURE if ok else Verdict.PASS


def test_a_program_shrinks_to_what_its_failure_needs():
    assert _oracle(PROGRAM) == "same_failure"
    result = minify_source(PROGRAM, None, _oracle, max_calls=400)
    assert _oracle(result.source) == "same_failure"
    tree = ast.parse(result.source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "Logger" not in result.source and "math" not in names and "os" not in names
    assert result.lines_after <= 4, result.source
    assert program_size(result.source) < program_size(PROGRAM)


def test_numbers_shrink_and_loops_run_once():
    src = "n = 0\nfor i in range(1000):\n    n += 1\nif n >= 1:\n    boom([n])\n"
    result = minify_source(src, None, _oracle, max_calls=200)
    assert "1000" not in result.source and _oracle(result.source) == "same_failure"


def test_parallel_judging_gives_the_same_program():
    one = minify_source(PROGRAM, None, _oracle, max_calls=400, jobs=1).source
    two = minify_source(PROGRAM, None, _oracle, max_calls=400, jobs=3).source
    assert one == two


def test_unbound_names_are_seen_without_running():
    assert unbound_names(ast.parse("x = 1\nprint(x, y)\n")) == {"y"}
    assert unbound_names(ast.parse("def f(a):\n    return a\nf(1)\n")) == set()
    assert unbound_names(ast.parse("from m import *\nprint(y)\n")) == set()  # unsure: silent


def test_local_modules_are_pasted_in(tmp_path):
    from tcompile.repro.jobs.program_job import inline_modules

    helper = tmp_path / "helpers.py"
    helper.write_text("def double(x):\n    return 2 * x\nK = 3\n")
    src = "import helpers\nfrom helpers import K as k\nprint(helpers.double(k))\n"
    out = inline_modules(src, [helper])
    assert "import helpers" not in out and "double(k)" in out.replace("helpers.", "")
    namespace: dict = {}
    exec(compile(out, "<inlined>", "exec"), namespace)  # noqa: S102
    assert namespace["k"] == 3


def test_the_program_repro_harness(tmp_path):
    from tcompile.compiler.program import ProgramFailure
    from tcompile.repro.program_harness import program_repro

    failure = ProgramFailure("exception", "AssertionError", "stale", "assert x == 2", "x")
    for body, code, said in (
        ("x = 1\nassert x == 2, 'stale'\n", 1, "REPRODUCED: AssertionError: stale"),
        ("x = 2\n", 0, "NOT REPRODUCED"),
    ):
        path = tmp_path / "repro.py"
        path.write_text(program_repro("from __future__ import annotations\n" + body, failure))
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
        assert proc.returncode == code and said in proc.stdout, proc
        # the harness compares causes (program_harness.REPRODUCED: 20 lines) around it
        assert path.read_text().count("\n") < 36


def test_a_program_that_fails_by_its_own_exit_status_reproduces(tmp_path):
    # a reporter's script prints "BUG" and calls sys.exit(1) (fixtures/families: the
    # lost validation of torch.normal): its repro says REPRODUCED as it leaves
    from tcompile.compiler.program import ProgramFailure
    from tcompile.repro.program_harness import program_repro

    failure = ProgramFailure("exception", "exit status 1", "", "", "exit status 1")
    head = '"""doc"""\nfrom __future__ import annotations\nimport sys\n'
    for body, code, said in (
        ("def f():\n    return 1\nif f():\n    print('BUG')\n    sys.exit(1)\n", 1,
         "REPRODUCED: exit status 1"),
        ("raise SystemExit(1)\n", 1, "REPRODUCED: exit status 1"),
        ("sys.exit(2)\n", 2, None),  # another exit status: not this failure
        ("x = f = 2\n", 0, "NOT REPRODUCED"),
    ):  # fmt: skip
        path = tmp_path / "repro.py"
        path.write_text(program_repro(head + body, failure))
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
        assert proc.returncode == code, proc
        assert (said in proc.stdout) if said else "REPRODUCED" not in proc.stdout, proc


def test_a_prelude_runs_first_after_docstring_and_future_imports():
    from tcompile.compiler.program import with_prelude

    src = '"""doc"""\nfrom __future__ import annotations\nx = 1\n'
    out = with_prelude("P = 0\n", src)
    assert out == '"""doc"""\nfrom __future__ import annotations\nP = 0\nx = 1\n'
    assert with_prelude("P = 0\n", "x = 1\n") == "P = 0\nx = 1\n"
    assert with_prelude("", src) == src


WRONG_BACKEND = textwrap.dedent(
    """
    import torch


    def off_by(gm, example_inputs):  # a backend that computes a wrong value
        def run(*args):
            return [o + OFFSET for o in gm(*args)]

        return run


    @torch.compile(backend=off_by)
    def f(x):  # a random draw: eager and compiled must draw the same numbers
        return torch.sin(x) * 2 + torch.rand_like(x)


    class M(torch.nn.Module):
        def forward(self, x):
            return torch.cos(x)


    m = torch.compile(M(), backend=off_by)
    print(f(torch.ones(3)).sum(), m(torch.ones(3)).sum(), m.training)
    """
)


def test_the_accuracy_check_turns_a_wrong_value_into_the_failure(tmp_path):
    """Issue 23, the user-level repro of a wrong value: the prelude checks each call of
    torch.compile'd code (functions and modules) against eager; a backend off by 1 is
    REPRODUCED, off by 1e-9 is not, and with torch.compile off nothing is checked."""
    from tcompile.compiler.program import ProgramFailure
    from tcompile.compiler.signature import FailureSignature
    from tcompile.repro.jobs.program_job import verify_program_repro
    from tcompile.repro.program_harness import ACCURACY_FAILURE, prelude_for, program_repro

    assert prelude_for(FailureSignature("inductor", "runtime", "RuntimeError", "x")) == ""
    wrong = FailureSignature("inductor", "accuracy", "AccuracyError", "output differs")
    prelude = prelude_for(wrong)
    kind, message = ACCURACY_FAILURE.split(": ", 1)
    failure = ProgramFailure("exception", kind, message)
    path = tmp_path / "repro.py"
    path.write_text(program_repro(WRONG_BACKEND.replace("OFFSET", "1.0"), failure, prelude))
    ok, said = verify_program_repro(path, failure, 120)
    assert ok and said == "REPRODUCED: " + ACCURACY_FAILURE, said
    path.write_text(program_repro(WRONG_BACKEND.replace("OFFSET", "1e-9"), failure, prelude))
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0 and "NOT REPRODUCED" in proc.stdout, proc.stdout + proc.stderr
    assert "True" in proc.stdout  # the compiled module is still a module


def test_a_report_carries_the_user_level_repro_beside_the_graph_one(tmp_path):
    """Issue 23: report.md of a --level source minify shows the aten-level repro, the
    program's lines the graph came from, and the user-level repro."""
    from tcompile.repro.jobs.report import write_report

    (tmp_path / "repro.py").write_text("# the aten-level repro\n")
    (tmp_path / "user.py").write_text("# the user-level repro\nprint(torch.relu(x))\n")
    bug = {
        "signature": "inductor/accuracy: AccuracyError: inference output differs from eager",
        "kind": "accuracy",
        "stage": "inductor",
        "count": 1,
        "graph": 0,
        "graphs": [0],
        "minify": {
            "repro": str(tmp_path / "repro.py"),
            "verified": True,
            "level": "source",
            "nodes_before": 6,
            "nodes_after": 1,
            "source_lines": [{"file": "/x/prog.py", "line": 13, "code": "h = torch.relu(h)"}],
            "source": {
                "repro": str(tmp_path / "user.py"),
                "verified": True,
                "lines_before": 19,
                "lines_after": 11,
            },
        },
    }
    text = open(write_report(tmp_path, [bug]).report).read()
    assert "# the aten-level repro" in text and "# the user-level repro" in text
    assert "prog.py:13  h = torch.relu(h)" in text
    assert "from 19 to 11 lines" in text and "verified too" in text


def test_a_bare_assert_is_the_same_failure_only_on_its_own_line():
    from tcompile.compiler.program import ProgramFailure

    target = ProgramFailure("exception", "AssertionError", "", "assert torch.equal(a, b)")
    assert target.same(
        ProgramFailure("exception", "AssertionError", "", "assert torch.equal(a, b)")
    )
    assert not target.same(ProgramFailure("exception", "AssertionError", "", "assert y > 0"))
    worded = ProgramFailure("exception", "AssertionError", "stale", "assert x == 2, 'stale'")
    assert worded.same(ProgramFailure("exception", "AssertionError", "stale", "assert x == 3, 's'"))
    assert ProgramFailure("exception", "exit status 3", "", "").same(
        ProgramFailure("exception", "exit status 3", "", "")
    )


TRAINING = textwrap.dedent(
    """
    import dataclasses


    @dataclasses.dataclass
    class Config:
        width: int = 8
        steps: int = 3
        name: str = "run"


    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, v):
            out = [x * self.k for x in v]
            return out


    def train(cfg: Config, log=True):
        '''Train.'''
        s = Scaler(2)
        values = list(range(cfg.width))
        for _ in range(cfg.steps):
            values = s.apply(values)
            if log:
                print(cfg.name, values)
        boom(values)


    def main():
        cfg = Config(steps=2)
        train(cfg, log=False)


    if __name__ == "__main__":
        main()
    """
)


def test_functions_methods_and_config_fields_are_inlined_away():
    """Issue 23: a call as a statement of a function that returns nothing, keyword
    arguments, a method of an object the program constructs, a config object's fields
    (a dataclass's defaults, the constructor's keywords): inlined, then deleted."""
    from tcompile.minifier.program_passes import program_callees

    callees = program_callees(ast.parse(TRAINING))
    assert {"train", "main", "s.apply"} <= set(callees), sorted(callees)
    assert _oracle(TRAINING) == "same_failure"
    result = minify_source(TRAINING, None, _oracle, max_calls=400)
    assert _oracle(result.source) == "same_failure"
    assert "Config" not in result.source and "def " not in result.source, result.source
    assert result.lines_after <= 3, result.source


DEAD = textwrap.dedent(
    '''
    import dataclasses
    import math
    import torch
    from torch import nn


    @dataclasses.dataclass
    class Config:
        width: int = 4


    def lr_at(step, cfg):
        return 0.1 * step
        return math.cos(step)


    def on_grad(module, grad):  # a callback: torch chooses its signature
        return grad


    class Scaler:
        """Scales."""

        def __init__(self, cfg, scale):
            self.scale = scale
            self.unused = 3

        def attach(self, m):
            m.register_full_backward_pre_hook(on_grad)

        def detach(self):
            pass


    class Net(nn.Module):
        def __init__(self):
            super().__init__()

        def extra_repr(self):  # may override what torch calls
            return "net"


    @torch.no_grad()
    def registered():
        pass


    cfg = Config()
    s = Scaler(cfg, 2.0)
    s.attach(Net())
    total: float = lr_at(3, cfg)
    mode = "fast" if not False else "slow"
    print(mode)
    '''
)


def test_dead_code_goes_in_one_reading():
    """minifier/dead_code.py: the safe removals keep what torch may call and what a
    decorator may register; the bold ones take them too, and unread values."""
    from tcompile.minifier.dead_code import BOLD, remove_dead_code

    safe = ast.parse(DEAD)
    assert remove_dead_code(safe)
    text = ast.unparse(safe)
    assert "math" not in text and "detach" not in text and '"""Scales."""' not in text
    assert "def lr_at(step):" in text and "lr_at(3)" in text  # a parameter nobody reads
    assert "def __init__(self, scale):" in text and "Scaler(2.0)" in text
    assert "Config()" in text  # its value is still assigned: only a bold step drops it
    assert "def on_grad(module, grad):" in text  # a callback keeps its signature
    assert "s.attach(Net())" in text and "self.unused" in text
    assert "extra_repr" in text and "registered" in text
    assert "mode = 'fast'" in text  # a constant condition folds
    compile(text, "<safe>", "exec")

    bold = ast.parse(DEAD)
    assert remove_dead_code(bold, set(BOLD))
    text = ast.unparse(bold)
    # an object only ever told to do something (s.attach(...)) goes with its calls
    for gone in ("Config", "dataclasses", "extra_repr", "registered", "float", "Scaler", "lr_at"):
        assert gone not in text, (gone, text)
    assert text == "mode = 'fast'\nprint(mode)", text
    assert not remove_dead_code(bold, set(BOLD))  # a fixed point


def test_what_follows_the_failing_statement_never_runs():
    from tcompile.minifier.dead_code import remove_dead_code

    src = "x = 1\nfor i in range(3):\n    assert i < 2, 'boom'\n    x += i\nprint(x)\ny = 2\n"
    tree = ast.parse(src)
    assert remove_dead_code(tree, raising="assert i < 2, 'boom'")
    assert ast.unparse(tree).splitlines()[-1] == "    x += i"  # the loop's body stays
    guarded = "try:\n    assert False, 'boom'\nexcept AssertionError:\n    pass\nprint(1)\n"
    assert not remove_dead_code(ast.parse(guarded), raising='assert False, "boom"')
    # a loop written out twice holds the check twice; only the last copy is a safe cut
    twice = "s = 0\nif s == 1:\n    assert s < 1, 'boom'\ns += 1\nif s == 1:\n    assert s < 1, 'boom'\nprint(s)\n"
    tree = ast.parse(twice)
    assert remove_dead_code(tree, raising="assert s < 1, 'boom'")
    assert ast.unparse(tree).count("assert") == 2 and "print" not in ast.unparse(tree)


def test_options_become_their_defaults():
    from tcompile.minifier.program_passes import options_to_defaults
    from tcompile.minifier.source_case import Hints

    src = textwrap.dedent(
        """
        import argparse
        p = argparse.ArgumentParser()
        p.add_argument("--steps", type=int, default=12)
        p.add_argument("--no-compile", action="store_true")
        p.add_argument("data")
        args = p.parse_args()
        n = args.steps if not args.no_compile else args.data
        """
    )
    first = next(options_to_defaults(None, src, Hints()))  # type: ignore[arg-type]
    text = ast.unparse(first.tree)
    assert "n = 12 if not False else args.data" in text, text  # a positional stays


def test_a_repro_that_does_not_reproduce_falls_back_to_an_earlier_program(tmp_path, monkeypatch):
    """A failure that shows for some random values only: the smallest program's
    repro.py does not reproduce in its fresh interpreter; the one found before it does."""
    import time

    from tcompile.compiler.observer import NullObserver
    from tcompile.compiler.program import ProgramFailure, ProgramTarget
    from tcompile.repro.jobs import program_job

    tried: list[str] = []

    def verify(repro, failure, timeout, parallel=False, launcher=None, folder=None):
        text = repro.read_text()
        tried.append(text)
        return ("x = 2" in text, "REPRODUCED" if "x = 2" in text else "NOT REPRODUCED")

    monkeypatch.setattr(program_job, "verify_program_repro", verify)
    failure = ProgramFailure("exception", "AssertionError", "boom", "assert x > 1")
    target = ProgramTarget(failure, None, "disable", 10.0, str(tmp_path), str(tmp_path))
    run = program_job.ProgramRun(
        ["s.py"], tmp_path / "s.py", [], tmp_path, None, 10.0, NullObserver()
    )
    earlier = ["x = 3\nassert x > 1\nprint(x)\n", "x = 2\nassert x > 1\n"]
    searched = program_job.Searched("x = 1\n", 5, [], {}, False, earlier + ["x = 1\n"])
    source = "x = 3\nassert x > 1\nprint(x)\n"
    report = program_job._finish(run, target, source, searched, time.monotonic(), 1.0)
    assert report.verified and report.program["fallback"] == 1, report.message
    assert "x = 2" in (tmp_path / "repro.py").read_text() and len(tried) == 2


OBSERVED = textwrap.dedent(
    """
    import torch


    class Inner(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.up = torch.nn.Linear(d, d)
            self.down = torch.nn.Linear(d, 1)


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ff = Inner(3)


    class Data:
        def __init__(self, n):
            self.x = torch.arange(n * 3).reshape(n, 3).float()

        def batches(self):
            for i in range(len(self.x)):
                yield self.x[i : i + 1], torch.zeros(1, dtype=torch.long)


    data = Data(4)
    net = Net()
    step = 0
    while step < 5:
        for x, y in data.batches():
            if step == 1:
                boom(net.ff.down(net.ff.up(x)), y)
            step += 1
    """
)


class _Boom(Exception):
    pass


def _boom(out, y):
    import torch

    if tuple(out.shape) == (1, 1) and out.grad_fn is not None and y.dtype == torch.long:
        raise _Boom()


def _exec_fails(source: str) -> bool:
    """In-process, with a limit: a candidate whose ``while`` lost its step never ends."""
    import signal

    def late(*_):
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        exec(compile(source, "<candidate>", "exec"), {"__name__": "__main__", "boom": _boom})  # noqa: S102
    except _Boom:
        return True
    except Exception:
        return False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return False


def test_what_a_run_shows_writes_loops_out_folds_branches_and_fakes_data(tmp_path):
    """observe.py's facts (one run of the instrumented program, here in-process) drive
    the observed_* passes: the while/for loops written out as the run went, each if to
    the side it took, the batch a fresh tensor of its shape -- the dataset class is then
    dead code -- and the submodule's layers hoisted into its parent."""
    import json

    import torch  # noqa: F401  (imported before the first candidate's time limit runs)

    from tcompile.minifier.observe import instrument
    from tcompile.minifier.source_case import Hints

    runs = {"observe": 0}

    def observe(source: str):
        runs["observe"] += 1
        path = tmp_path / f"facts-{runs['observe']}.json"
        if not _exec_fails(instrument(source, str(path))):
            return None
        return json.loads(path.read_text())

    def oracle(source: str) -> str:
        return Verdict.SAME_FAILURE if _exec_fails(source) else Verdict.PASS

    assert oracle(OBSERVED) == "same_failure"
    result = minify_source(OBSERVED, None, oracle, hints=Hints(observe=observe), max_calls=300)
    out = result.source
    assert oracle(out) == "same_failure"
    assert "while" not in out and "for " not in out and "if " not in out, out
    assert "class Data" not in out and "class Inner" not in out, out
    assert "torch.randn((1, " in out, out
    steps = " ".join(result.history)
    assert "loop written out" in steps and "hoisted into its parent" in steps, steps
    assert runs["observe"] >= 1
    assert sum(1 for line in out.splitlines() if line.strip()) <= 8, out


def test_one_layer_lists_and_plain_instances_are_taken_apart():
    """unwrap_module_lists and instances_to_globals: pure rewrites, judged by the
    oracle later; here only what they propose."""
    from tcompile.minifier.class_passes import instances_to_globals, unwrap_module_lists
    from tcompile.minifier.source_case import Hints

    src = textwrap.dedent(
        """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList(nn.Linear(2, 2) for _ in range(1))
            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x
        class Scaler:
            def __init__(self, scale):
                self.scale = scale
            def hook(self, module, grad):
                return tuple(g * self.scale for g in grad)
        net = Net()
        scaler = Scaler(2.0)
        scaler.handle = net.blocks[-1].register_full_backward_pre_hook(scaler.hook)
        scaler.handle.remove()
        """
    )
    (one,) = list(unwrap_module_lists(None, src, Hints()))
    out = ast.unparse(one.tree)
    assert "self.blocks = nn.Linear(2, 2)" in out and "x = self.blocks(x)" in out, out
    assert "net.blocks.register_full_backward_pre_hook" in out, out
    (inst,) = list(instances_to_globals(None, src, Hints()))
    out = ast.unparse(ast.fix_missing_locations(inst.tree))
    assert "scaler_scale = 2.0" in out and "def scaler_hook(module, grad):" in out, out
    assert "g * scaler_scale" in out and "scaler_handle.remove()" in out, out
    assert "scaler." not in out and "class Scaler" not in out, out  # the class goes too
    compile(out, "<out>", "exec")


def test_a_pass_that_raises_is_skipped_and_said(monkeypatch):
    """A pass's own bug on an unusual program costs that pass, not the search: the
    others go on, the history names it (repro/jobs/program_job.py puts it in --json)."""
    from tcompile.minifier import program_passes

    def broken(search, best, hints):
        yield from ()
        raise AttributeError("boom")

    phases = tuple((broken, *phase) for phase in program_passes.PROGRAM_PHASES)
    monkeypatch.setattr(program_passes, "PROGRAM_PHASES", phases)
    src = "n = 0\nfor i in range(1000):\n    n += 1\nif n >= 1:\n    boom([n])\n"
    result = minify_source(src, None, _oracle, max_calls=200)
    assert "1000" not in result.source and _oracle(result.source) == "same_failure"
    assert any(
        "pass broken failed (tcompile's bug): AttributeError: boom" in h for h in result.history
    )


def test_inlined_names_go_back_to_the_programs_own():
    from tcompile.minifier.class_passes import tidy_names
    from tcompile.minifier.source_case import Hints

    src = "x = 1\ndef f_1_g(a):\n    return a\nstep_1 = f_1_g(x)\nloss_1_2 = step_1 + 1\nboom([loss_1_2])\n"
    (p,) = list(tidy_names(None, src, Hints()))
    out = ast.unparse(p.tree)
    assert (
        "step = f_g(x)" in out
        and "def f_g(a)" in out
        and "loss = step + 1" in out
        and "boom([loss])" in out
    ), out
    assert not list(tidy_names(None, "x = 1\nx_1 = x\n", Hints()))  # x is taken
    # a function's own x does not take the name; one that reads x from outside does
    local = "def fwd(x):\n    y = x * 2\n    return y\nx_1 = 3\nboom([fwd(x_1)])\n"
    (p,) = list(tidy_names(None, local, Hints()))
    assert "x = 3\nboom([fwd(x)])" in ast.unparse(p.tree), ast.unparse(p.tree)
    free = "def fwd(a):\n    return a + x\nx = 1\nx_1 = 3\nboom([fwd(x_1)])\n"
    assert not list(tidy_names(None, free, Hints()))
    reads = "def fwd(a):\n    return a + x\nx_1 = 3\nboom([fwd(x_1)])\n"  # NameError today
    assert not list(tidy_names(None, reads, Hints()))
    both = "def fwd(x_1):\n    x = 1\n    return x_1 + x\nx_1 = 3\n"  # x and x_1 in one scope
    assert not list(tidy_names(None, both, Hints()))


def test_values_autograd_made_or_fresh_already_are_not_proposed():
    from tcompile.minifier.observed_passes import observed_values
    from tcompile.minifier.source_case import Hints

    src = "import torch\nw = torch.randn(3, requires_grad=True)\nx = load()\ny = w * x\nz = torch.zeros(3)\n"
    spec = {"shape": [3], "dtype": "torch.float32", "device": "cpu", "grad": False, "made": False}
    facts = {
        "values": {
            "1": {"n": 1, "same": True, "spec": {**spec, "grad": True}},
            "2": {"n": 1, "same": True, "spec": spec},
            "3": {"n": 1, "same": True, "spec": {**spec, "grad": True, "made": True}},
            "4": {"n": 1, "same": True, "spec": spec},
        }
    }
    out = [ast.unparse(p.tree) for p in observed_values(None, src, Hints(observe=lambda s: facts))]
    assert out == [src.replace("load()", "torch.randn((3,))").strip()], out  # x only


def test_a_step_that_grew_the_program_must_pay_off(monkeypatch):
    """A growing step taken, then no smaller program within the growth budget: back to
    the smallest, and that pass grows it no more -- the budget goes to the others."""
    from tcompile.minifier import program_passes
    from tcompile.minifier.source_case import Proposal

    def grow(search, best, hints):  # always a larger program that still fails
        tree = ast.parse(best)
        tree.body.insert(0, ast.parse(f"pad_{len(tree.body)} = [{len(tree.body)}]").body[0])
        yield Proposal(tree, "grown", grow=True)

    def shave(search, best, hints):  # a cut that never fails the same way (costs a run)
        tree = ast.parse(best)
        del tree.body[-1]
        yield Proposal(tree, "boom dropped")

    monkeypatch.setattr(program_passes, "PROGRAM_PHASES", ((grow, shave),))
    src = "n = 0\nfor i in range(3):\n    n += 1\nboom([n])\n"
    result = minify_source(src, None, _oracle, max_calls=300)
    steps = [
        h for h in result.history if h.startswith("back to the smallest candidate: a step of grow")
    ]
    assert steps, result.history
    assert result.calls < 300 and program_size(result.source) <= program_size(src), result.calls


def test_a_grown_program_that_stalls_goes_back_mid_pass(monkeypatch):
    """After a growing step, a pass whose candidates all fail is stopped where the stall
    window ends (not when it has judged them all), and the search goes back."""
    from tcompile.minifier import program_passes
    from tcompile.minifier.source_case import Proposal

    def grow(search, best, hints):  # once: a larger program that still fails
        if "pad = 0" not in best:
            tree = ast.parse(best)
            tree.body.insert(0, ast.parse("pad = 0").body[0])
            yield Proposal(tree, "grown", grow=True)

    def keep_n(search, best, hints):  # each statement alone dropped: boom needs them all
        for i in range(len(ast.parse(best).body)):
            tree = ast.parse(best)
            if ast.unparse(tree.body[i]) == "pad = 0":
                continue  # what grew stays: only the window can take it back
            del tree.body[i]
            yield Proposal(tree, f"drop {i}")

    def oracle(source: str) -> str:  # the failure needs every a_i
        return (
            Verdict.SAME_FAILURE
            if all(f"a{i} = {i}" in source for i in range(60))
            else Verdict.PASS
        )

    monkeypatch.setattr(program_passes, "PROGRAM_PHASES", ((grow, keep_n),))
    src = "".join(f"a{i} = {i}\n" for i in range(60))
    result = minify_source(src, None, oracle, max_calls=300)
    back = [h for h in result.history if h.startswith("back to the smallest candidate")]
    assert back == [
        "back to the smallest candidate: a step of grow (grown) had grown it and 11 runs "
        "did not win it back"
    ], result.history
    # 1 grow + 11 of the grown program's 60 (the stall window: 10) + the smallest one's 60
    assert result.calls == 1 + 11 + 60 and result.source == ast.unparse(ast.parse(src)) + "\n"


def test_a_growth_that_did_not_pay_off_is_banned_whatever_its_count():
    from tcompile.minifier.fixpoint import _kind

    a = _kind("loop written out (2 time(s), as the run went)")
    assert a == _kind("loop written out (4 time(s), as the run went)")
    assert _kind("inline make") != _kind("inline step")


def test_a_program_search_resumes_from_its_checkpoint(tmp_path):
    """The source formats checkpoint as graphs do (the gate's best-so-far hook): a
    search cut short by its budget, called again on the same program with the same
    directory, goes on from the smallest program so far, its history and its calls."""
    whole = minify_source(PROGRAM, None, _oracle, max_calls=400)
    cut = minify_source(PROGRAM, None, _oracle, max_calls=6, checkpoint=tmp_path)
    assert cut.stopped is False and cut.calls == 6  # the budget, not a stop
    assert program_size(cut.source) < program_size(PROGRAM)
    again = minify_source(PROGRAM, None, _oracle, max_calls=400, checkpoint=tmp_path)
    assert _oracle(again.source) == "same_failure"
    assert again.history[: len(cut.history)] == cut.history
    # the same program as a search never cut short; the calls count both runs (the
    # verdict cache is not kept: a small program costs a few more calls resumed)
    assert again.source == whole.source and again.calls > cut.calls
    # another program never resumes from this one's checkpoint
    other = minify_source("x = 1\nboom([x])\n", None, _oracle, max_calls=50, checkpoint=tmp_path)
    assert "boom" in other.source and other.calls < 50


def test_a_package_and_its_relative_imports_are_pasted_in(tmp_path):
    """Issue 50: ``from models.mlp import MLP`` (a package, its ``__init__`` with a side
    effect), modules importing each other relatively two levels up (``from ..utils.seed
    import seed_all``), ``import pkg.sub`` used as ``pkg.sub.f`` and ``from pkg import
    sub`` as ``sub.f``: one file that runs where nothing of the project is."""
    import subprocess
    import sys

    from tcompile.repro.program_files import inline_modules, local_modules

    files = {
        "models/__init__.py": "REGISTRY = []\nfrom .mlp import MLP\n",
        "models/mlp.py": (
            "from .blocks.dense import Dense\nfrom ..utils.seed import seed_all\n\n"
            "class MLP:\n    def __init__(self):\n        seed_all()\n"
            "        self.layer = Dense(3)\n\n    def __call__(self, x):\n"
            "        return self.layer(x)\n"
        ),
        "models/blocks/__init__.py": "",
        "models/blocks/dense.py": (
            "from ...utils import scale\n\nclass Dense:\n    def __init__(self, k):\n"
            "        self.k = k\n\n    def __call__(self, x):\n        return scale.times(x, self.k)\n"
        ),
        "utils/__init__.py": "",
        "utils/seed.py": "SEEDED = []\n\ndef seed_all():\n    SEEDED.append(1)\n",
        "utils/scale.py": "def times(x, k):\n    return x * k\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    script = tmp_path / "train.py"
    script.write_text(
        "import utils.scale\nfrom utils import seed\nfrom models.mlp import MLP\nimport models\n"
        "net = MLP()\nprint(net(2), utils.scale.times(1, 5), len(seed.SEEDED), models.REGISTRY)\n"
    )
    found = local_modules(script)
    assert {p.relative_to(tmp_path).as_posix() for p in found} == set(files), found
    out = inline_modules(script.read_text(), found, root=tmp_path)
    assert "import utils" not in out and "from models" not in out and "from ." not in out, out
    elsewhere = tmp_path / "empty"
    elsewhere.mkdir()
    ran = subprocess.run([sys.executable, "-c", out], capture_output=True, text=True, cwd=elsewhere)
    assert ran.returncode == 0 and ran.stdout.strip() == "6 5 1 []", (ran.stderr, out)

"""Issue 59: the program level on real projects -- pure parts, no compiles: a crash
compared with where eager raised, a dying process's words, random ops read from the
graph's arguments, the program-level repro's harness comparing causes."""

from __future__ import annotations

import subprocess
import sys

import torch
import torch.nn.functional as F
from torch import fx, nn

from tcompile.compiler.accuracy import has_random_ops
from tcompile.compiler.cause import died_where_raised
from tcompile.compiler.crash import crash_message
from tcompile.compiler.program import ProgramFailure
from tcompile.compiler.signature import normalize_message
from tcompile.repro.program_harness import program_repro

TRAIN, MODEL = "/p/train.py", "/p/model.py"


def test_a_crash_inside_the_call_where_eager_raised_is_that_failure():
    """nanoGPT with token ids past its vocabulary: the compiled kernel aborts inside
    ``forward`` (its frame reports its ``def`` line, 183), called from the line where
    eager raised IndexError at ``tok_emb = ...`` (190) -- one failure; elsewhere, not."""
    crash = [f"{TRAIN}:265 in <module>", f"{TRAIN}:225 in estimate_loss", f"{MODEL}:183 in forward"]
    eager = [f"{TRAIN}:265 in <module>", f"{TRAIN}:225 in estimate_loss", f"{MODEL}:190 in forward"]
    assert died_where_raised(crash, eager)
    assert died_where_raised(crash, [*eager, f"{MODEL}:60 in embed"])  # deeper in eager
    # another call site of the same function, another function, no frames at all
    assert not died_where_raised(crash, [eager[0], f"{TRAIN}:300 in estimate_loss", eager[2]])
    assert not died_where_raised(crash, [*eager[:2], f"{MODEL}:90 in backward"])
    assert not died_where_raised([], eager) and not died_where_raised(crash, eager[:2])


def test_a_dying_process_keeps_what_its_throw_said():
    tail = [
        "compiling the model... (takes a ~minute)",
        "terminate called after throwing an instance of 'std::runtime_error'",
        "  what():  kernel, /tmp/x.main.cpp:36, index out of bounds: 0 <= tmp2 < 65L",
        "terminate called recursively",
    ]
    said = crash_message(tail)
    assert said.startswith("terminate called after throwing") and "0 <= tmp2 < 65L" in said


class _Net(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.drop, self.lin = nn.Dropout(p), nn.Linear(4, 4)

    def forward(self, x):
        return self.drop(F.normalize(self.lin(x)))


def _fn(code: str) -> fx.GraphModule:
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(eval(code, {"F": F, "torch": torch}), (x,)))
    return fx.GraphModule(nn.Module(), g)


def test_random_ops_are_read_from_the_calls_arguments():
    """A dropout at p=0 or in eval mode draws nothing: the accuracy check then changes
    nothing in the program (no fallback_random, no second, watching-only run)."""
    assert has_random_ops(fx.symbolic_trace(_Net(0.1)))
    assert not has_random_ops(fx.symbolic_trace(_Net(0.0)))
    assert not has_random_ops(fx.symbolic_trace(_Net(0.1).eval()))
    g = fx.Graph()
    x = g.placeholder("x")
    for args, kwargs, draws in [
        ((x, 0.0, True), {}, False),
        ((x,), {"p": 0.2, "training": False}, False),
        ((x, 0.2, True), {}, True),
        ((x,), {}, True),  # F.dropout's defaults: p=0.5, training=True
    ]:
        g2 = fx.Graph()
        y = g2.placeholder("x")
        remap = [y if a is x else a for a in args]
        g2.output(g2.call_function(F.dropout, tuple(remap), kwargs))
        assert has_random_ops(fx.GraphModule(nn.Module(), g2)) is draws, (args, kwargs)
    assert has_random_ops(_fn("torch.randn_like")) and not has_random_ops(_fn("F.normalize"))
    assert not has_random_ops(_fn("F.alpha_dropout"))  # training=False by default


_WRAPPED = """import torch
class BackendCompilerFailed(Exception):  # as torch._dynamo.exc wraps what inductor raised
    pass
BackendCompilerFailed.__module__ = "torch._dynamo.exc"
def compile_and_run(n):
    try:
        raise RuntimeError(f"Attempting to broadcast a dimension of length {n} at -1!")
    except RuntimeError as e:
        raise BackendCompilerFailed("backend='inductor' raised:\\nRuntimeError: ...") from e
"""


def _run(tmp_path, body: str, failure: ProgramFailure) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "repro.py"
    path.write_text(program_repro(body, failure))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True)


def test_the_repro_compares_the_cause_below_torchs_wrappers(tmp_path):
    """A wrapped error (BackendCompilerFailed holding a RuntimeError, a multi-line
    message whose first line names no type) is REPRODUCED by its cause and its raising
    line -- the harness printed ``ERROR: not RuntimeError: BackendCompilerFailed`` and
    exited 2; another error, or the same type from another line with another message,
    is ERROR, exit 2."""
    failure = ProgramFailure(
        "compile", "RuntimeError", normalize_message("Attempting to broadcast a dimension of length 32 at -1!"),
        "compile_and_run(32)", "inductor/compile: RuntimeError: ...",
        {"types": ["builtins.RuntimeError"], "frame": "t.py:9 in compile_and_run"},
    )  # fmt: skip
    ran = _run(tmp_path, _WRAPPED + "compile_and_run(32)\n", failure)
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    assert "REPRODUCED: RuntimeError: Attempting to broadcast" in ran.stdout
    # the same message from another line (the numbers differ: scrubbed alike)
    ran = _run(tmp_path, _WRAPPED + "x = 1\ncompile_and_run(8)\n", failure)
    assert ran.returncode == 1 and "REPRODUCED" in ran.stdout, ran.stdout
    # another type at the same line: not this failure
    other = _WRAPPED.replace("raise RuntimeError", "raise ValueError").replace(
        "except RuntimeError", "except ValueError"
    )
    ran = _run(tmp_path, other + "compile_and_run(32)\n", failure)
    assert ran.returncode == 2 and "REPRODUCED" not in ran.stdout, ran.stdout
    assert "ERROR: not RuntimeError: ValueError" in ran.stdout


def test_the_oracle_compares_causes_not_first_lines():
    cause = {"types": ["torch._C._LinAlgError", "builtins.RuntimeError"], "frame": "a.py:3 in f"}
    target = ProgramFailure(
        "exception",
        "RuntimeError",
        "singular",
        "y = solve(a)",
        "",
        {"types": ["builtins.RuntimeError"]},
    )
    sub = ProgramFailure("exception", "_LinAlgError", "other words", "y = solve(a)", "", cause)
    assert target.same(sub)  # a subclass raised at the same line
    moved = ProgramFailure("exception", "_LinAlgError", "other words", "z = 2", "", cause)
    assert not target.same(moved)
    assert not target.same(ProgramFailure("exception", "ValueError", "singular", "y = solve(a)",
                                          "", {"types": ["builtins.ValueError"]}))  # fmt: skip


def test_a_compiled_backward_keeps_what_the_autograd_cache_saves_by():
    """tcompile's backward runner carries the compiled graph's FX-graph cache key: else
    AOTAutogradCache never saves a training graph under tcompile, no recompile is served
    from it, and a bug of that cache (#194976: a float baked into the first artifact)
    never shows -- the word_language_model fixture's bug was hidden so."""
    from tcompile.compiler.child.runners import _BackwardRunner

    class Compiled:
        _fx_graph_cache_key = "fabc"
        _fx_graph_cache_debug_lines = ["line"]
        guards_expr = None

        def __call__(self, args):
            return args

    runner = _BackwardRunner(None, 0, "inductor", Compiled(), fx.symbolic_trace(_Net(0.0)))
    assert runner._fx_graph_cache_key == "fabc"
    assert runner._fx_graph_cache_debug_lines == ["line"]


def test_the_marker_says_where_the_program_called_the_graph(tmp_path):
    """A process a kernel kills leaves no Python traceback, and faulthandler's dump can
    be cut short by a second thread's abort: each graph call notes where the program
    called it (its own frames, outermost first) in the marker, rewritten only when the
    stack changed."""
    from tcompile.compiler.child.recorder import PHASE_RUN, Recorder
    from tcompile.compiler.crash import fatal_stack
    from tcompile.compiler.protocol import read_site

    rec = Recorder(str(tmp_path))

    def forward():  # stands for the frame Dynamo compiled
        rec.note_site(depth=1)

    def train_step():
        forward()

    train_step()
    rec.mark(0, PHASE_RUN, "inference")
    site = read_site(tmp_path, rec.pid)
    assert [s.rsplit(" in ", 1)[1] for s in site[-2:]] == ["train_step", "forward"], site
    assert fatal_stack(str(tmp_path)) == site


def _exc(rank, t, types, frame, raised_in="/p/train.py", text="AssertionError: x"):
    return {"event": "exception", "rank": rank, "time": t, "raised_in": raised_in,
            "cause": {"types": types, "frame": frame}, "signature_text": text,
            "signature": {"stage": "script", "kind": "exception", "exc_type": "AssertionError",
                          "message": "x"}}  # fmt: skip


def test_the_same_failure_without_compile_is_each_ranks_own_cause():
    """One rule for every command (collect.fails_the_same_way): in a launched job the
    rank that raised first, by its own cause -- never torchrun's ChildFailedError, which
    every failing job ends with; a run without torch.compile that raised inside torch's
    compiler (TORCH_COMPILE_DISABLE=1 with fullgraph=True on 2.13) is no evidence."""
    from tcompile.compiler.collect import control_failed_itself, fails_the_same_way
    from tcompile.compiler.owners import torch_folder
    from tcompile.compiler.runner import ProcessResult

    A = ["builtins.AssertionError"]
    child = _exc(None, 9.0, ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError"],
                 "/venv/torchrun:8 in <module>")  # fmt: skip

    def result(*events):
        return ProcessResult(1, 1.0, False, [], list(events), {}, "/nonexistent")

    compiled = result(_exc(1, 1.0, A, "/p/t.py:30 in <module>"), child)
    assert fails_the_same_way(compiled, result(_exc(1, 2.0, A, "/p/t.py:30 in <module>"), child))
    # the launcher's error alike in both, the ranks' not: not the same failure
    assert not fails_the_same_way(
        compiled, result(_exc(0, 2.0, A, "/p/t.py:12 in <module>"), child)
    )
    assert not fails_the_same_way(compiled, result(child))
    own = _exc(1, 2.0, ["builtins.RuntimeError"], "/p/t.py:30 in <module>",
               raised_in=f"{torch_folder()}/_dynamo/eval_frame.py",
               text="RuntimeError: torch.compile with fullgraph=True found no compiled frames")  # fmt: skip
    assert "no compiled frames" in (control_failed_itself(result(own, child)) or "")
    assert not fails_the_same_way(compiled, result(own, child))

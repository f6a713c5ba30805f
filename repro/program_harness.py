"""The harnesses of a program-level repro (generated text, not tcompile's code).

* ``REPRODUCED``: an uncaught exception prints ``REPRODUCED: <type>: <message>`` and
  exits 1; a run to the end prints ``NOT REPRODUCED`` (program_repro below).
* ``accuracy_check``: for a *wrong value* (an accuracy failure): no exception shows it,
  so the program runs with ``torch.compile`` replaced by a checked one: each call of
  the compiled code runs eager first (on copies of the tensor arguments, from the same
  RNG state -- ``torch.random.fork_rng``: CPU and CUDA -- with ``fallback_random`` so
  that both draw the same numbers) and raises
  ``AssertionError`` when the compiled result is beyond the dtype's tolerance against
  eager (``eager_tolerance``, generated from compiler/accuracy_rule.py: assert_close's,
  unless the check was strict times 100 for 32 and 64 bits, where a reordered sum
  differs by more than it allows, and times 4 for 16 bits).
  The program starts from ``torch.manual_seed(0)``: a wrong value within tolerance
  for some random inputs (a shape cut to one element) would otherwise make candidates
  and repro.py fail by chance; seeded, each is judged on the same values.  It is the
  *prelude* of every candidate (compiler/program.py: never minified itself), and of
  repro.py.  With ``TORCHDYNAMO_DISABLE=1`` torch.compile returns the function itself
  and nothing is checked: the repro passes.

Forward results only: a wrong gradient with right forward values is not seen (the
graph-level repro.py checks gradients).
"""

from __future__ import annotations

import ast
import builtins
import datetime
from typing import TYPE_CHECKING, TypedDict

from tcompile.compiler import accuracy_rule
from tcompile.compiler.signature import FailureSignature

if TYPE_CHECKING:
    from tcompile.compiler.program import ProgramFailure

REPRODUCED = """import os, re, sys, traceback
# the failure minified, compared as tcompile compared it (compiler/cause.py): the error
# below torch's wrappers (its type, or a subclass), from the same line of this program or
# with the same first line (numbers and paths scrubbed)
EXPECTED = WANT
def _failed(kind, exc, tb):  # the failure: REPRODUCED, exit 1; any other error: ERROR, exit 2
    real, seen = exc, set()  # BackendCompilerFailed, InductorError, ... hold what was raised
    while id(real) not in seen and type(real).__module__.startswith(("torch._dynamo.exc", "torch._inductor.exc")):
        seen.add(id(real))
        inner = getattr(real, "inner_exception", None) or real.__cause__ or real.__context__
        real = inner if isinstance(inner, BaseException) else real
    names = [n for t in type(real).__mro__ for n in (f"{t.__module__}.{t.__qualname__}", t.__name__)]
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    line = ([f.line.strip() for f in traceback.extract_tb(tb) if os.path.abspath(f.filename).startswith(here)] or [""])[-1]
    first = next((ln for ln in str(real).splitlines() if ln.strip()), "")
    for pattern, repl in EXPECTED["scrubs"]:
        first = re.sub(pattern, repl, first)
    want, said = EXPECTED, f"{type(real).__name__}: {str(real).strip()[:300]}".splitlines()[0]
    same = (want["types"][0] in names or names[0] in want["types"]) and (
        line == want["line"] != "" or first.strip()[:300] == want["message"] != "" or not (want["line"] or want["message"]))
    print(f"REPRODUCED: {said}" if same else f"ERROR: not {want['types'][0].rsplit('.', 1)[-1]}: {said}", flush=True)
    if not same:  # a missing module, a changed environment: never "reproduced"
        sys.__excepthook__(kind, exc, tb), os._exit(2)
sys.excepthook = _failed
"""

# a failure that is the program's own exit status (it printed, then sys.exit(1)): said
# as the program leaves (program_repro wraps its statements: _exits_watched)
EXITED = """def _exited(exc):  # the program's own exit status is the failure
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if code and code == EXPECTED.get("exit"):
        print(f"REPRODUCED: exit status {code}", flush=True)
"""

# the program's own command-line arguments (argparse, sys.argv), as it ran
ARGV = """sys.argv[1:] = {argv!r}  # the arguments the program ran with
"""

# a launched job whose failure shows in one process: rank 0 of a world of 1, no launcher
ONE_PROCESS = """import socket  # the job's failure shows in one process: rank 0 of a world of 1
with socket.socket() as _s:
    _s.bind(("127.0.0.1", 0))
    _world = dict(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                  MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_s.getsockname()[1]))
for _k, _v in _world.items():
    os.environ.setdefault(_k, _v)
"""

_ACCURACY = """import functools, torch, torch._inductor.config  # the check of each compiled call
torch._inductor.config.fallback_random = True  # compiled code draws eager's random numbers
torch.manual_seed(0)  # the same values in every run: a wrong value can hang on them
_compile = torch.compile
_STRICT = STRICTNESS  # tcompile's rule (compiler/accuracy_rule.py), generated below
EAGER_TOLERANCE
def _differ(a, b):
    if isinstance(a, (list, tuple)):
        return len(a) != len(b) or any(map(_differ, a, b))
    if not torch.is_tensor(a) or not a.is_floating_point():
        return torch.is_tensor(a) and not torch.equal(a, b)
    tol = eager_tolerance(str(a.dtype), _STRICT)
    return a.shape != b.shape or not torch.allclose(a.detach().cpu(), b.detach().cpu(), *tol, True)
def _checked(compiled, eager):  # each call: eager first, on copies of the inputs, same RNG state
    def call(*args, **kwargs):
        copies = [a.clone() if torch.is_tensor(a) else a for a in args]
        with torch.no_grad(), torch.random.fork_rng():  # RNG (CPU, CUDA) as it was after
            expected = eager(*copies, **kwargs)
        if _differ(actual := compiled(*args, **kwargs), expected):
            raise AssertionError("torch.compile's result differs from eager")
        return actual
    return call
def _compile_checked(model=None, **options):  # torch.compile, every call checked
    if model is None:
        return functools.partial(_compile_checked, **options)
    if (compiled := _compile(model, **options)) is model:  # torch.compile is off
        return model
    if isinstance(compiled, torch.nn.Module):
        compiled.forward = _checked(compiled.forward, model)
        return compiled
    return functools.wraps(model)(_checked(compiled, model))
torch.compile = _compile_checked
"""

# the failure the accuracy check raises (program.ProgramFailure compares its type and
# its raising line, the ``raise`` above)
ACCURACY_FAILURE = "AssertionError: torch.compile's result differs from eager"


def accuracy_check(strict: bool = False) -> str:
    """The prelude that turns a wrong value into an exception (see the module notes)."""
    rule = accuracy_rule.portable_source("eager_tolerance").strip()
    return _ACCURACY.replace("STRICTNESS", repr(strict)).replace("EAGER_TOLERANCE", rule)


def prelude_for(sig: FailureSignature | None) -> str:
    """The prelude a program-level search of this failure needs: the accuracy check for
    a wrong value, nothing otherwise."""
    from tcompile.compiler.signature import FailureKind

    if sig is None or sig.kind != FailureKind.ACCURACY.value:
        return ""
    return accuracy_check(strict=sig.strict)


def program_repro(
    program: str,
    failure: ProgramFailure,
    prelude: str = "",
    argv: list[str] | None = None,
    launcher: list[str] | None = None,
    one_process: bool = False,
    needs: dict[str, str] | None = None,
    files: list[str] | None = None,
) -> str:
    """repro.py of the program level: a header, the harness (with the program's
    arguments, ``argv``; a launched job's world of one where its failure shows in one
    process), the prelude the candidates ran (the accuracy check of a wrong value), the
    program, the end line.  ``launcher``: the job's launcher, said in the header (the
    repro runs under it); ``needs``: the installed packages it imports, with versions;
    ``files``: the data files beside it, which it reads (it runs from its folder)."""
    import platform

    import torch

    from tcompile import __version__

    tree = ast.parse(program)
    future = [s for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    tree.body = [s for s in tree.body if s not in future]
    head = (
        "#!/usr/bin/env python3\n"
        f"# A torch.compile failure, minimized by tcompile {__version__} on "
        f"{datetime.date.today().isoformat()} (the program itself):\n"
        f"#   {failure.text}\n"
        f"# torch {torch.__version__}, Python {platform.python_version()}\n"
        + (
            "# needs (installed): " + ", ".join(f"{k} {v}" for k, v in sorted(needs.items())) + "\n"
            if needs
            else ""
        )
        + (f"# reads {', '.join(files)} (beside it): run it from its own folder\n" if files else "")
        + (
            f"# run it as the job ran: {' '.join(launcher)} repro.py (each rank prints its line)\n"
            if launcher
            else ""
        )
        + "# python repro.py: exit 1 + REPRODUCED; TORCHDYNAMO_DISABLE=1 python repro.py: exit 0 + NOT REPRODUCED\n"
        + (
            "# A wrong value: each call of torch.compile'd code is checked against eager below.\n"
            if prelude
            else ""
        )
    )
    parts = [head]
    if future:
        parts.append("".join(ast.unparse(s) + "\n" for s in future))
    parts.append(REPRODUCED.replace("WANT", repr(expected(failure))))
    if expected(failure).get("exit"):
        parts.append(EXITED)
    if argv:
        parts.append(ARGV.format(argv=list(argv)))
    if one_process:
        parts.append(ONE_PROCESS)
    if prelude:
        parts.append("\n\n" + prelude)
    if expected(failure).get("exit"):  # its own exit status: seen as it leaves (_exited)
        tree.body = [_exits_watched(tree.body)]
    parts.append(ast.unparse(tree) + "\n")
    parts.append('print("NOT REPRODUCED")\n')
    return "".join(parts)


def _exits_watched(body: list[ast.stmt]) -> ast.stmt:
    """The program's statements inside ``try: ... except SystemExit as exc: _exited(exc);
    raise`` -- still module-level code (a ``try`` opens no scope), its exit seen whether
    it calls sys.exit, exit() or raises SystemExit."""
    handler = ast.parse("try:\n    pass\nexcept SystemExit as _exc:\n    _exited(_exc)\n    raise")
    node = handler.body[0]
    assert isinstance(node, ast.Try)
    node.body = body or [ast.Pass()]
    return node


class _Wanted(TypedDict):
    types: list[str]  # the raised type and its bases, qualified
    line: str  # the program's raising line
    message: str  # the first line of its message, scrubbed
    scrubs: list[tuple[str, str]]  # signature.SCRUBS as (pattern, replacement)


class Expected(_Wanted, total=False):
    """What a program-level repro.py compares (:func:`expected`)."""

    exit: int  # the program left by ``sys.exit(N)`` alone


def expected(failure: ProgramFailure) -> Expected:
    """What a program-level repro.py compares (the harness above): the raised type and
    its bases (the cause's, compiler/cause.py; else the signature's type, its module
    unknown), the program's raising line, the scrubbed first line of its message."""
    from tcompile.compiler.cause import Cause

    cause = Cause.from_json(failure.cause)
    if cause is not None:
        types = list(cause.types)
    else:
        name = failure.exc_type.split(".")[-1]
        types = [f"builtins.{name}" if name in dir(builtins) else name]
    out: Expected = {
        "types": types,
        "line": failure.line,
        "message": failure.message,
        "scrubs": _scrubs(),
    }
    code = failure.exc_type.removeprefix("exit status ")  # it left by sys.exit(N) alone
    if failure.kind == "exception" and code != failure.exc_type and code.isdigit():
        out["exit"] = int(code)
    return out


def _scrubs() -> list[tuple[str, str]]:
    """signature.SCRUBS -- how tcompile normalises a message -- as plain (pattern,
    replacement) pairs, for the harness."""
    from tcompile.compiler.signature import SCRUBS

    return [(p.pattern, r) for p, r in SCRUBS]

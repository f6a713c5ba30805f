"""repro.py, the long form: the fallback when a short repro (writer.py) does not
reproduce, and the form for AOT-level graphs.

Layout of the generated file (DESIGN.md mechanism 9): a header saying where it comes
from; the configuration that differs from torch's defaults; the user's backend or
pass, when the failure needs one; the minimal module; its inputs; the compile call;
and the check.  The accuracy rule is generated from compiler/accuracy_rule.py (its
portable text); the helpers that name failures and run the graph are copied from
tcompile's own public functions (inspect.getsource), so the repro and tcompile agree
exactly (tests/unit/test_layers.py: no private name is copied).

The check runs in a child process of the repro itself, so a failure that kills the
process (a C++ throw in generated code) is still reported: exit 1 and
``REPRODUCED: <signature>``, or exit 0 and ``NOT REPRODUCED``.
"""

from __future__ import annotations

import datetime
import inspect
import re
from typing import TYPE_CHECKING

import torch.fx as fx

from tcompile.compiler import accuracy as _acc
from tcompile.compiler import accuracy_rule
from tcompile.compiler import float64 as _f64
from tcompile.compiler import signature as _sig
from tcompile.compiler import snapshot as _snap
from tcompile.compiler.collectives import has_collectives
from tcompile.compiler.configs import AOT_COMPILE_SOURCE, FAKE_PG, config_source
from tcompile.compiler.signature import FailureSignature

from .inputs import InputSpec, compact_source
from .module import module_source
from .writer import SIDECAR_SUFFIX, compile_kwargs_of

if TYPE_CHECKING:
    import torch

    from .environment import Environment
    from .writer import CaptureMeta


def _helpers() -> str:
    """Accuracy and signature helpers, copied from tcompile's own modules."""
    parts = [
        "SCRUBS = " + _scrubs_literal(),
        inspect.getsource(_sig.normalize_message),
        inspect.getsource(_sig.root_cause),
        inspect.getsource(_sig.qualified_type),
        "CUDA_FATAL = " + repr(_sig.CUDA_FATAL),
        inspect.getsource(_sig.cuda_fatal_message),
        inspect.getsource(_acc.Outcome).replace(
            "@dataclasses.dataclass\n", "@dataclasses.dataclass\n"
        ),
        inspect.getsource(_acc.Mismatch),
        inspect.getsource(_acc.RngState),
        inspect.getsource(_snap.plain_tensor),
        inspect.getsource(_snap.as_input),
        inspect.getsource(_snap.Snapshot),
        inspect.getsource(_snap.exact_copies),
        inspect.getsource(_snap.changed),
        inspect.getsource(_acc.clone_input),
        inspect.getsource(_acc.flatten),
        inspect.getsource(_acc.run_with_grads),
        # the accuracy rule, generated from the rule itself (its portable text)
        accuracy_rule.portable_source("compare_tensor"),
        inspect.getsource(_acc.compare),
        inspect.getsource(_f64.to_float64),
    ]
    # the copies live in one file: no imports between tcompile's modules
    text = "\n\n".join(p.strip("\n") for p in parts) + "\n"
    return re.sub(r"\n *from \.\w+ import [^\n]+\n", "\n", text)


def _scrubs_literal() -> str:
    items = ", ".join(f"(re.compile({p.pattern!r}), {r!r})" for p, r in _sig.SCRUBS)
    return f"[{items}]"


_TEMPLATE = '''\
#!/usr/bin/env python3
"""Minimal reproduction of a torch.compile failure, written by tcompile {tcompile}.

  failure:  {signature}
  written:  {written}
  torch {torch} (git {torch_git}), CUDA {cuda}, GPU {gpu}
  Python {python}, {os}

Needs only torch.  Run it from anywhere:
  python repro.py                    exit 1 and "REPRODUCED: <signature>" if the bug shows,
                                     exit 0 and "NOT REPRODUCED" otherwise
  python repro.py --backend eager    the same check with the eager backend
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys

from typing import Any

import torch
{imports}

EXPECTED = {expected!r}  # the failure, as tcompile names it
EXPECTED_KIND = {expected_kind!r}  # what check() compares: a missing error is eager raising
STAGE = {stage!r}
ACCURACY = {accuracy!r}  # off | loose | strict
COMPILE_KWARGS = {compile_kwargs}
DYNAMIC = {dynamic!r}  # the program's torch.compile(dynamic=...)
GRAD_ENABLED = {grad_enabled!r}  # the program's grad mode when the graph ran
FORWARD_KIND = {forward_kind!r}  # set for an AOT-level graph: which one it was
LEVEL = {level!r}  # dynamo: a Dynamo graph, compiled by torch.compile; aot: an AOT graph
{aot_import}

# inductor configuration that differs from torch's defaults
{config_lines}
{extra_source}

{module_src}

{inputs_src}

def check(backend):
    """The signature of the failure if it shows, else None."""
    mod = Repro()
    inputs = make_inputs()
    rng = RngState()
    eager_error = None  # a missing error: eager raises, the compiled graph must too
    try:
        ref = run_with_grads(mod, inputs)
    except Exception as exc:
        if EXPECTED_KIND != "missing_error":
            raise
        eager_error, ref = root_cause(exc), None
    rng.restore()
    if eager_error is None and EXPECTED_KIND == "missing_error":
        return None  # eager raises nothing: no error can be missing
    forward_kind = FORWARD_KIND or ("forward" if ref is not None and ref.grads else "inference")
    kwargs = dict(COMPILE_KWARGS)
    if backend != STAGE:
        kwargs = {{}}
    kind = "compile"

    def _sig_text(kind, real):  # as tcompile prints a signature (no ': ' before no message)
        fatal = cuda_fatal_message(real)  # a kernel faulted: the CUDA context is dead
        if fatal:
            return f"{{STAGE}}/crash: CUDAError: {{normalize_message(fatal)}}"
        message = normalize_message(str(real))
        return f"{{STAGE}}/{{kind}}: {{qualified_type(real)}}" + (f": {{message}}" if message else "")

    if LEVEL == "aot" and backend == STAGE:
        # an AOT graph: compiled the way inductor compiles the graphs it is handed
        gm = torch.fx.symbolic_trace(mod)
        with torch.no_grad():
            ref = Outcome(flatten(mod(*[clone_input(x) for x in inputs])), [])
            try:
                compiled = compile_fx_inner(gm, [clone_input(x) for x in inputs])
                kind = "runtime"
                res = Outcome(flatten(compiled([clone_input(x) for x in inputs])), [])
            except Exception as exc:
                real = root_cause(exc)
                return _sig_text(kind, real)
    else:
        compiled = torch.compile(mod, backend=backend, dynamic=DYNAMIC, **kwargs)
    try:
        if not (LEVEL == "aot" and backend == STAGE):
            res = run_with_grads(compiled, inputs)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()  # a kernel that faults shows here, not later
    except Exception as exc:  # compile errors surface at the first call
        real = root_cause(exc)
        if eager_error is not None and type(real) is type(eager_error):
            return None  # raises as eager does
        if type(exc).__name__ != "BackendCompilerFailed" and real is exc:
            kind = "runtime"
        return _sig_text(kind, real)
    finally:
        rng.restore()
    if eager_error is not None:  # returned where eager raised
        message = normalize_message(str(eager_error))
        return f"{{STAGE}}/missing_error: {{qualified_type(eager_error)}}" + (f": {{message}}" if message else "")
    if ACCURACY != "off":
        strict = ACCURACY == "strict"
        fp64 = None
        if not strict:
            try:
                fp64 = run_with_grads(to_float64(mod), inputs, dtype=torch.float64)
            except Exception:
                fp64 = None
        mismatch = compare(ref, res, fp64, strict=strict)
        if mismatch is not None:
            graph_kind = "backward" if mismatch.where.startswith("grad") else forward_kind
            exc_type = "StrictAccuracyError" if strict else "AccuracyError"
            where = mismatch.where.split()[0]
            if FORWARD_KIND == "backward":  # an AOT backward graph: its outputs are gradients
                graph_kind, where = "backward", "grad"
            if mismatch.category != "values":  # a dtype or shape: its own failure
                exc_type, where = f"{{mismatch.category.capitalize()}}Mismatch", f"{{where}} {{mismatch.category}}"
            return f"{{STAGE}}/accuracy: {{exc_type}}: {{graph_kind}} {{where}} differs from eager"
    return None


def main():
    backend = os.environ.get("TORCH_COMPILE_BACKEND", STAGE)
    if "--backend" in sys.argv:
        backend = sys.argv[sys.argv.index("--backend") + 1]
    if "--child" in sys.argv:  # runs the check; may die with the bug (a C++ throw aborts)
        with torch.set_grad_enabled(GRAD_ENABLED):
            sig = check(BACKEND_FUNCTIONS.get(backend, backend))
        print("@@" + ("REPRODUCED: " + sig if sig else "NOT REPRODUCED"), flush=True)
        return 0
    args = [sys.executable, os.path.abspath(__file__), "--child", "--backend", backend]
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(proc.stderr)
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            print(line[2:])
            return 1 if line.startswith("@@REPRODUCED") else 0
        print(line)
    if proc.returncode >= 0:  # a Python error in the check itself, not the bug
        print(f"ERROR: the check failed (exit status {{proc.returncode}}); see the messages above")
        return 2
    # the check process was killed by a signal: a crash, as a C++ throw in generated code does
    import signal as _signal
    sig = _signal.Signals(-proc.returncode).name
    why = next((ln.strip() for ln in proc.stderr.splitlines()
                if any(k in ln for k in ("terminate called", "Segmentation fault", "Aborted",
                                         "Fatal Python error", "illegal memory"))), "")
    message = normalize_message(why or f"process killed by {{sig}}")
    print(f"REPRODUCED: {{STAGE}}/crash: {{sig}}: {{message}}")
    return 1


# ---- helpers (copied from tcompile, so that repro and tool judge alike) ----------

{helpers}


def test_fn():  # True when the failure does not show (as torch's CompilerBisector wants)
    CODE[:] = [main()]
    return CODE[0] == 0


CODE = [0]
if __name__ == "__main__":
    test_fn()
    sys.exit(CODE[0])
'''


def full_repro(
    *,
    gm: fx.GraphModule,
    specs: list[InputSpec],
    sidecar: list[torch.Tensor],
    signature: FailureSignature,
    stage: str,
    accuracy: str,
    meta: CaptureMeta,
    env: Environment,
) -> str:
    """The text of a long-form repro.py (its sidecar, if any, is ``sidecar``)."""
    module_src, imports = module_source(gm, real=_real(specs), sidecar=sidecar)
    inputs_src = compact_source(specs)
    if sidecar:
        inputs_src = (
            "SIDECAR = torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "
            f"{'repro' + SIDECAR_SUFFIX!r}), weights_only=True)\n\n\n" + inputs_src
        )
    config_lines, extra = config_source(meta.get("config") or {})
    backend_fn: str | None = ""
    functions = "{}"
    if meta.get("backend_source") and stage == meta.get("user_backend"):
        backend_fn = meta["backend_source"]
        functions = f"{{{stage!r}: {stage}}}"
    compile_kwargs = compile_kwargs_of(meta, accuracy, stage, gm, specs)
    dynamic = compile_kwargs.pop("dynamic", None)
    fake_pg = ""
    if meta.get("collectives") and has_collectives(gm):  # the minimal graph's
        fake_pg = FAKE_PG.format(rank=meta.get("rank", 0), world_size=meta.get("world_size", 2))
    extra_source = "\n\n".join(x for x in (fake_pg, extra, backend_fn) if x)
    text = _TEMPLATE.format(
        tcompile=env["tcompile"],
        signature=str(signature),
        written=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        torch=env["torch"],
        torch_git=env["torch_git"],
        cuda=env["cuda"] or "none",
        gpu=env["gpu"] or "none",
        python=env["python"],
        os=env["os"],
        imports="\n".join(imports),
        expected=str(signature),
        expected_kind=signature.kind,
        stage=stage,
        accuracy=accuracy,
        compile_kwargs=repr(compile_kwargs),
        dynamic=dynamic,
        grad_enabled=meta.get("grad_enabled", True),
        forward_kind=meta.get("forward_kind") if meta.get("level") == "aot" else None,
        level=meta.get("level", "dynamo"),
        aot_import=AOT_COMPILE_SOURCE if meta.get("level") == "aot" else "",
        config_lines=config_lines,
        extra_source=(extra_source + "\n") if extra_source else "",
        module_src=module_src,
        inputs_src=inputs_src,
        helpers=_helpers(),
    )
    return text.replace(
        "BACKEND_FUNCTIONS.get(backend, backend)", f"{functions}.get(backend, backend)"
    )


def _real(specs: list[InputSpec]) -> bool:
    return any(s.kind == "tensor" and s.fill in ("values", "sidecar") for s in specs)

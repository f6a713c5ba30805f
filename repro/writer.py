"""repro.py: a standalone script that shows the bug with only torch installed.

Layout of the generated file (DESIGN.md mechanism 9): a header saying where it comes
from; the configuration that differs from torch's defaults; the user's backend or
pass, when the failure needs one; the minimal module; its inputs; the compile call;
and the check.  The helpers that judge accuracy and name failures are copied from
tcompile's own source (inspect.getsource), so the repro and tcompile agree exactly.

The check runs in a child process of the repro itself, so a failure that kills the
process (a C++ throw in generated code) is still reported: exit 1 and
``REPRODUCED: <signature>``, or exit 0 and ``NOT REPRODUCED``.
"""

from __future__ import annotations

import datetime
import inspect
import os
import textwrap
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from tcompile.compiler import accuracy as _acc
from tcompile.compiler import signature as _sig
from tcompile.compiler.configs import AOT_COMPILE_SOURCE, config_source

from .environment import environment

INLINE_LIMIT = 64  # elements: larger real inputs go to a sidecar file


def module_source(gm: fx.GraphModule) -> tuple[str, list[str]]:
    """The class definition of the minimal module, and the import lines it needs."""
    code = gm.graph.python_code(root_module="self")
    body = textwrap.indent(code.src.strip("\n"), "    ")
    imports: list[str] = []
    for name, value in sorted(code.globals.items()):
        if name in ("torch", "inf", "nan", "NoneType", "device"):
            continue
        mod = getattr(value, "__module__", None)
        qual = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        if mod and qual and "." not in qual and mod != "builtins":
            imports.append(f"from {mod} import {qual} as {name}")
        elif isinstance(value, type(os)):
            imports.append(f"import {value.__name__} as {name}")
    return f"class Repro(torch.nn.Module):\n{body}\n", imports


def _tensor_literal(t: torch.Tensor) -> str:
    return f"torch.tensor({t.detach().cpu().tolist()!r}, dtype={t.dtype})"


def inputs_source(
    inputs: list[Any], real: bool, sidecar: Path | None
) -> tuple[str, list[Any] | None]:
    """make_inputs(): seeded random inputs with the exact metadata, or real values."""
    lines = ["def make_inputs():", "    g = torch.Generator().manual_seed(0)", "    return ["]
    to_save: list[Any] = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            meta = (
                f"{tuple(x.shape)!r}, {tuple(x.stride())!r}, {x.dtype}, {str(x.device)!r}, "
                f"{bool(x.requires_grad)}"
            )
            if real and x.numel() <= INLINE_LIMIT:
                lines.append(f"        _place({_tensor_literal(x)}, {meta}),")
            elif real:
                to_save.append(x.detach().cpu())
                lines.append(f"        _place(_SIDECAR[{len(to_save) - 1}], {meta}),")
            else:
                lines.append(f"        _rand({meta}, g),")
        else:
            lines.append(f"        {x!r},")
        del i
    lines.append("    ]")
    src = "\n".join(lines) + "\n"
    if to_save:
        assert sidecar is not None
        src = (
            f"_SIDECAR = torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "
            f"{sidecar.name!r}), weights_only=True)\n\n\n"
        ) + src
    return src, (to_save or None)


def _helpers() -> str:
    """Accuracy and signature helpers, copied from tcompile's own modules."""
    parts = [
        "_SCRUBS = " + _scrubs_literal(),
        inspect.getsource(_sig.normalize_message),
        inspect.getsource(_sig.root_cause),
        inspect.getsource(_sig._qualified_type),
        "CUDA_FATAL = " + repr(_sig.CUDA_FATAL),
        inspect.getsource(_sig.cuda_fatal_message),
        "_STRICT_TOL = " + repr(_acc._STRICT_TOL),
        f"MULTIPLIER = {_acc.MULTIPLIER!r}",
        inspect.getsource(_acc.Outcome).replace(
            "@dataclasses.dataclass\n", "@dataclasses.dataclass\n"
        ),
        inspect.getsource(_acc.Mismatch),
        inspect.getsource(_acc.RngState),
        inspect.getsource(_acc.clone_input),
        inspect.getsource(_acc.flatten),
        inspect.getsource(_acc.run_with_grads),
        inspect.getsource(_acc._rmse),
        inspect.getsource(_acc._rms),
        inspect.getsource(_acc._eps),
        inspect.getsource(_acc.compare_tensor),
        inspect.getsource(_acc.compare),
        inspect.getsource(_acc.to_float64),
    ]
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


def _scrubs_literal() -> str:
    items = ", ".join(f"(re.compile({p.pattern!r}), {r!r})" for p, r in _sig._SCRUBS)
    return f"[{items}]"


_TEMPLATE = '''\
#!/usr/bin/env python3
"""Minimal reproduction of a torch.compile failure, written by tcompile {tcompile}.

  failure:  {signature}
  command:  {command}
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

EXPECTED = {expected!r}
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
    ref = run_with_grads(mod, inputs)
    rng.restore()
    forward_kind = FORWARD_KIND or ("forward" if ref.grads else "inference")
    kwargs = dict(COMPILE_KWARGS)
    if backend != STAGE:
        kwargs = {{}}
    kind = "compile"

    def _sig_text(kind, real):  # as tcompile prints a signature (no ': ' before no message)
        fatal = cuda_fatal_message(real)  # a kernel faulted: the CUDA context is dead
        if fatal:
            return f"{{STAGE}}/crash: CUDAError: {{normalize_message(fatal)}}"
        message = normalize_message(str(real))
        return f"{{STAGE}}/{{kind}}: {{_qualified_type(real)}}" + (f": {{message}}" if message else "")

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
        if type(exc).__name__ != "BackendCompilerFailed" and real is exc:
            kind = "runtime"
        return _sig_text(kind, real)
    finally:
        rng.restore()
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
            return f"{{STAGE}}/accuracy: {{exc_type}}: {{graph_kind}} {{where}} differs from eager"
    return None


def main():
    backend = STAGE
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

if __name__ == "__main__":
    sys.exit(main())
'''


def _place_helpers() -> str:
    return '''
def _rand(shape, stride, dtype, device, requires_grad, g):
    """Seeded random values laid out with the exact shape, stride, dtype and device."""
    n = 1 + sum((s - 1) * st for s, st in zip(shape, stride) if s > 0) if all(shape) else 0
    if dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
    elif dtype == torch.bool:
        flat = torch.randint(0, 2, (n,), generator=g).bool()
    else:
        flat = torch.randint(0, 16, (n,), generator=g).to(dtype)
    t = torch.as_strided(flat.to(device), shape, stride)
    return t.requires_grad_(requires_grad) if t.is_floating_point() else t


def _place(values, shape, stride, dtype, device, requires_grad):
    """Real values laid out with the exact shape, stride, dtype and device."""
    t = torch.empty_strided(shape, stride, dtype=dtype, device=device)
    t.copy_(values.reshape(shape))
    return t.requires_grad_(requires_grad) if t.is_floating_point() else t
'''


def write_repro(
    path: Path,
    *,
    gm: fx.GraphModule,
    inputs: list[Any],
    signature: str,
    stage: str,
    accuracy: str,
    meta: dict[str, Any],
    command: list[str],
    real_inputs: bool,
) -> Path:
    """Write repro.py (and a sidecar of real input values when they are large)."""
    env = environment()
    module_src, imports = module_source(gm)
    sidecar = path.with_name(path.stem + "_inputs.pt")
    inputs_src, to_save = inputs_source(inputs, real_inputs, sidecar)
    config_lines, extra = config_source(meta.get("config") or {})
    backend_fn = ""
    functions = "{}"
    if meta.get("backend_source") and stage == meta.get("user_backend"):
        backend_fn = meta["backend_source"]
        functions = f"{{{stage!r}: {stage}}}"
    compile_kwargs: dict[str, Any] = {}
    if meta.get("mode") and meta["mode"] != "default":
        compile_kwargs["mode"] = meta["mode"]
    options = _acc.with_fallback_random(
        meta.get("options"), checking=accuracy != "off", stage=stage, gm=gm
    )
    if options and "mode" not in compile_kwargs:
        compile_kwargs["options"] = options
    extra_source = "\n\n".join(x for x in (extra, backend_fn) if x)
    text = _TEMPLATE.format(
        tcompile=env["tcompile"],
        signature=signature,
        command=" ".join(command),
        written=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        torch=env["torch"],
        torch_git=env["torch_git"],
        cuda=env["cuda"] or "none",
        gpu=env["gpu"] or "none",
        python=env["python"],
        os=env["os"],
        imports="\n".join(imports),
        expected=signature,
        stage=stage,
        accuracy=accuracy,
        compile_kwargs=repr(compile_kwargs),
        dynamic=meta.get("dynamic"),
        grad_enabled=meta.get("grad_enabled", True),
        forward_kind=meta.get("forward_kind") if meta.get("level") == "aot" else None,
        level=meta.get("level", "dynamo"),
        aot_import=AOT_COMPILE_SOURCE if meta.get("level") == "aot" else "",
        config_lines=config_lines,
        extra_source=(extra_source + "\n") if extra_source else "",
        module_src=module_src,
        inputs_src=inputs_src + "\n" + _place_helpers(),
        helpers=_helpers(),
    )
    text = text.replace(
        "BACKEND_FUNCTIONS.get(backend, backend)", f"{functions}.get(backend, backend)"
    )
    compile(text, str(path), "exec")  # never write a script that does not parse
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    if to_save:
        torch.save(to_save, sidecar)
    os.replace(tmp, path)
    os.chmod(path, 0o755)
    return path

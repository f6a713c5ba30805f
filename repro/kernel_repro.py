"""kernel_repro.py: the one Triton kernel that computes a wrong value, launched alone.

Beside a verified repro.py of an accuracy failure on CUDA, when tritonparse is
installed: compiler/kernel_trace.py traces the repro's compile and run in a fresh
process and finds the launch whose output is furthest from eager's; this module writes
that kernel (as a plain ``@triton.jit`` function), its launch (grid, num_warps,
num_stages, every argument) and the values its tensor arguments held before the launch
(kernel_repro.pt, loaded with ``weights_only=True``), and compares what it writes with
eager's value of the graph output it computes.  The file is verified in a fresh
process like repro.py: exit 1 + REPRODUCED, and kept only then.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from tcompile.compiler import layout

if TYPE_CHECKING:
    from collections.abc import Mapping


class KernelRepro(TypedDict, total=False):
    """What :func:`write_kernel_repro` made (minify's ``kernel_repro``): the kernel, what
    its verification said and, verified, the file; or only ``error``."""

    kernel: str
    output: str | None  # the graph output it writes
    relative_error: float | None
    mode: str  # accuracy | triton | source
    verified: bool
    says: str  # the last line the file printed
    path: str  # kernel_repro.py (verified only)
    error: str  # why there is none


TEMPLATE = '''#!/usr/bin/env python3
# One Triton kernel from a torch.compile accuracy failure, by tcompile {version}:
#   {kernel}, launched alone with the arguments it had (kernel_repro.pt, beside it)
#   in the run of repro.py; it writes {output}, {what},
#   and its values are compared with eager's (relative error seen: {error:.3g}).
# {device}, torch {torch}
# python kernel_repro.py: exit 1 + REPRODUCED; exit 0 + NOT REPRODUCED once fixed
import os
import sys

import torch
{header}

{source}

HERE = os.path.dirname(os.path.abspath(__file__))
T = torch.load(os.path.join(HERE, "kernel_repro.pt"), weights_only=True)


def ids(shape, stride, offset=0):
    """The storage positions (in elements) a strided view covers."""
    end = offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 1
    return torch.arange(end).as_strided(shape, stride, offset)


def arg(name, shape, stride):
    """A tensor argument with the values it had before the launch (same strides); the
    output argument lies at element {at} of the graph output it writes (VIEW)."""
    at = AT if name == {output!r} else 0
    size = int(ids(shape, stride, at).max()) + 1
    if name == {output!r}:
        size = max(size, int(ids(*VIEW).max()) + 1)
    t = torch.empty(size, dtype=T[name].dtype, device="cuda").as_strided(shape, stride, at)
    t.copy_(T[name])
    return t


VIEW, AT = {view}, {at}  # the graph output's shape and stride; the argument's place in it


ARGS = {{
{args}
}}
GRID = {grid}


def check():
    {kernel}[GRID](**ARGS, num_warps={num_warps}, num_stages={num_stages})
    torch.cuda.synchronize()
    out = ARGS[{output!r}]
    mine = torch.isin(ids(*VIEW), ids(out.shape, out.stride(), AT).flatten())  # what it wrote
    got = out.as_strided(*VIEW, 0).cpu()[mine]
    want, seen = T["__expected__"][mine], T["__got__"][mine]
    if got.is_floating_point():
        close = torch.isclose(got.double(), want.double(), rtol=1e-3, atol=1e-5, equal_nan=True)
    else:
        close = got == want
    if bool(close.all()):
        return None
    i = int((~close).flatten().nonzero()[0])
    same = " as in the compiled run" if torch.equal(got, seen) else ""
    return (
        f"{kernel} writes {{got.flatten()[i].item()!r}} at element {{i}} of those it writes "
        f"where eager gives {{want.flatten()[i].item()!r}} ({{int((~close).sum())}} of "
        f"{{close.numel()}} elements differ{{same}})"
    )


if __name__ == "__main__":
    seen = check()
    print("NOT REPRODUCED" if seen is None else f"REPRODUCED: {{seen}}")
    sys.exit(0 if seen is None else 1)
'''


def render(doc: dict[str, Any], version: str) -> str:
    lines = []
    for a in doc["args"]:
        if a["type"] == "tensor":
            lines.append(
                f"    {a['name']!r}: arg({a['name']!r}, {tuple(a['shape'])!r}, "
                f"{tuple(a['stride'])!r}),"
            )
        else:
            lines.append(f"    {a['name']!r}: {a['value']!r},")
    return TEMPLATE.format(
        version=version,
        kernel=doc["kernel"],
        output=doc["output"],
        what=doc.get("what") or f"output {doc['output_index']} of the minimized graph",
        error=float(doc["relative_error"]),
        device=doc.get("device", "CUDA"),
        torch=doc.get("torch", "?"),
        header=doc["header"].strip(),
        source=doc["source"].strip(),
        args="\n".join(lines),
        grid=tuple(doc["grid"]),
        view=tuple(tuple(x) for x in doc.get("view") or [[], []]),
        at=int(doc.get("at") or 0),
        num_warps=doc.get("num_warps") or 4,
        num_stages=doc.get("num_stages") or 1,
    )


COMPILE_TEMPLATE = """#!/usr/bin/env python3
# One Triton kernel from a torch.compile compile failure, by tcompile {version}:
#   {kernel}, as inductor generated it for repro.py; {how}:
#   {exc_type}: {exc_line}
# {device}, torch {torch}, Triton {triton}
# python kernel_repro.py: exit 1 + REPRODUCED; exit 0 + NOT REPRODUCED once fixed
import sys

import torch
{header}

{body}


if __name__ == "__main__":
    try:
        {call}
    except Exception as exc:
        if type(exc).__name__ != {exc_type!r}:
            raise
        said = [ln for ln in str(exc).strip().splitlines() if ln.strip()] or [""]
        print(f"REPRODUCED: {{type(exc).__name__}}: {{said[-1].strip()}}")
        sys.exit(1)
    print("NOT REPRODUCED")
    sys.exit(0)
"""

# Triton's type names -> torch dtypes (placeholder tensors of the kernel's signature)
_DTYPES = {
    "fp8e5": "float8_e5m2",
    "fp8e4nv": "float8_e4m3fn",
    "fp8e4b8": "float8_e4m3fnuz",
    "fp8e5b16": "float8_e5m2fnuz",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "fp64": "float64",
    "i1": "bool",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
}


def _placeholder(name: str, ty: str, constants: Mapping[str, object]) -> str | None:
    """The source of a placeholder value for one parameter (None: a constexpr given
    with the constants)."""
    if name in constants or ty == "constexpr":
        return None
    if ty.startswith("*"):
        dtype = _DTYPES.get(ty.lstrip("*k"), "float32")
        return f"torch.zeros(4096, dtype=torch.{dtype}, device='cuda')"
    if ty.startswith("fp"):
        return "1.0"
    return "16"  # an integer: divisible by 16, not 1 (Triton specializes 1)


def render_compile(doc: dict[str, Any], version: str) -> str:
    """kernel_repro.py of a compile failure: Triton's compile of the kernel (mode
    "triton": launched once with placeholders; the compile comes first) or the load of
    its generated module (mode "source")."""
    exc = doc["exception"]
    lines = [ln for ln in exc["message"].splitlines() if ln.strip()] or [""]
    common = dict(
        version=version,
        kernel=doc["kernel"],
        exc_type=exc["type"],
        exc_line=lines[-1].strip()[:200],
        device=doc.get("device", "CUDA"),
        torch=doc.get("torch", "?"),
        triton=doc.get("triton", "?"),
    )
    if doc["mode"] == "source":
        return COMPILE_TEMPLATE.format(
            how="loading its module fails",
            header="",
            body=f"MODULE = {doc['module']!r}",
            call=f"exec(compile(MODULE, {doc['kernel'] + '.py'!r}, 'exec'), {{}})",
            **common,
        )
    constants = doc.get("constants") or {}
    args = [
        f"    {k!r}: {v},"
        for k, ty in doc["signature"].items()
        if (v := _placeholder(k, ty, constants)) is not None
    ]
    body = (
        doc["source"].strip()
        + "\n\n\n# placeholders of the kernel's signature: Triton compiles before it launches\n"
        + "ARGS = {\n"
        + "\n".join(args)
        + "\n}\n"
        + f"CONSTANTS = {constants!r}"
    )
    call = (
        f"{doc['kernel']}[(1,)](**ARGS, **CONSTANTS, num_warps={doc.get('num_warps') or 4}, "
        f"num_stages={doc.get('num_stages') or 1})\n        torch.cuda.synchronize()"
    )
    return COMPILE_TEMPLATE.format(
        how="Triton fails to compile it",
        header=doc.get("header", "").strip(),
        body=body,
        call=call,
        **common,
    )


def available() -> bool:
    """tritonparse and a CUDA device: the kernel repro can be made here."""
    import importlib.util

    if importlib.util.find_spec("tritonparse") is None:
        return False
    import torch

    return torch.cuda.is_available()


def write_kernel_repro(
    repro: Path, *, compile_failure: bool = False, timeout: float = 300
) -> KernelRepro:
    """Trace repro.py (verified) and write kernel_repro.py (+ kernel_repro.pt, the
    tensors of a wrong value) beside it: the kernel that computes the wrong value, or
    with ``compile_failure`` the one whose compile fails (compiler/kernel_compile.py).
    Returns {"path", "kernel", "verified", ...} or {"error": why not}."""
    from .. import __version__
    from .verify import repro_output

    work = Path(tempfile.mkdtemp(prefix="tcompile-kernel-"))
    try:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(work / "cache")}
        module = "kernel_trace"
        if compile_failure:  # every Triton compile in the traced process itself
            env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
            module = "kernel_compile"
        try:
            subprocess.run(
                [sys.executable, "-m", f"tcompile.compiler.{module}", str(repro), str(work)],
                env=env,
                timeout=timeout,
                capture_output=True,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"tracing the repro took longer than {timeout:.0f}s"}
        try:
            doc = json.loads((work / layout.KERNEL_DOC).read_text())
        except (OSError, ValueError):
            return {"error": "the kernel trace wrote nothing (tritonparse failed?)"}
        if doc.get("error"):
            return {"error": doc["error"]}
        out = repro.parent / layout.KERNEL_REPRO
        tmp = repro.parent / ".kernel_repro.py.part"
        if compile_failure:
            layout.write_file(tmp, render_compile(doc, __version__))
        else:
            layout.write_file(tmp, render(doc, __version__))
            shutil.copyfile(
                work / layout.KERNEL_TENSORS, repro.parent / layout.KERNEL_REPRO_TENSORS
            )
        try:  # as a stranger runs it: no tcompile, a cache of its own (verify.py)
            proc = repro_output(tmp, timeout=timeout, cache_dir=work / "cache2")
        except subprocess.TimeoutExpired:
            proc = subprocess.CompletedProcess([], None, "", f"took longer than {timeout:.0f}s")
        verified = proc.returncode == 1 and "REPRODUCED:" in proc.stdout
        result: KernelRepro = {
            "kernel": doc["kernel"],
            "output": doc.get("output"),
            "relative_error": doc.get("relative_error"),
            "mode": doc.get("mode", "accuracy"),
            "verified": verified,
            "says": (proc.stdout.strip().splitlines() or [proc.stderr.strip()[-200:]])[-1],
        }
        if verified:
            tmp.replace(out)
            result["path"] = str(out)
        else:
            tmp.unlink(missing_ok=True)
            (repro.parent / layout.KERNEL_REPRO_TENSORS).unlink(missing_ok=True)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)

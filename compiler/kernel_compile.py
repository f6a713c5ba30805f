"""The Triton kernel inductor cannot compile: run a verified repro.py of a compile
failure and keep the kernel whose compile raised (repro/kernel_repro.py writes it).

Runs in a fresh process on the CUDA machine (``python -m
tcompile.compiler.kernel_compile REPRO.PY WORKDIR``) with one compile thread
(``TORCHINDUCTOR_COMPILE_THREADS=1``, set by the parent), so that every Triton compile
happens in this process.  Two points of inductor are wrapped, both only to look:

* ``CachingAutotuner._precompile_config``: Triton's own compile of a kernel raised
  (a CompilationError in Triton's frontend, an error in its backend): the kernel's
  source, its signature, constants and config are kept ("mode": "triton");
* ``AsyncCompile.triton``: loading the kernel's module raised before Triton saw it (the
  generated Python does not parse): the module's source is kept ("mode": "source").

No launch exists for such a kernel (tritonparse traces compiles that succeed and their
launches), so the kernel repro launches it with placeholder arguments of its signature:
the compile fails first.  Writes WORKDIR/kernel.json, or kernel.json with "error".
"""

from __future__ import annotations

import inspect
import re
import runpy
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch._inductor.async_compile import AsyncCompile
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner, _KernelCompileResult
    from triton import Config

_SCALAR = (bool, int, float, str, type(None))


def _exc(exc: BaseException) -> dict[str, str]:
    """The error as the kernel alone raises it: the root of a chain, and the error
    inductor's "Failed to import X\nSyntaxError: ..." names in its message."""
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    name, message = type(exc).__name__, str(exc).strip()
    last = (message.splitlines() or [""])[-1]
    named = re.match(r"^(\w+(?:Error|Exception)): (.*)$", last)
    if name == "RuntimeError" and named:
        name, message = named.group(1), named.group(2)
    return {"type": name, "message": message[:4000]}


def _watch(seen: dict[str, Any]) -> None:
    from torch._inductor import async_compile
    from torch._inductor.runtime import triton_heuristics as th

    precompile = th.CachingAutotuner._precompile_config
    tried: dict[str, Any] = {}  # the last config whose compile raised (another may pass)

    def _precompile_config(self: CachingAutotuner, cfg: Config) -> _KernelCompileResult:
        try:
            return precompile(self, cfg)
        except Exception as exc:
            try:
                meta = self._create_compile_meta(cfg)
            except Exception:
                meta = self.triton_meta
            tried.clear()
            tried.update(
                mode="triton",
                source="@triton.jit\n" + self.fn.src.lstrip(),
                file=inspect.getsourcefile(self.fn.fn) or "",
                signature={k: str(v) for k, v in meta["signature"].items()},
                constants={k: v for k, v in meta["constants"].items() if isinstance(v, _SCALAR)},
                num_warps=cfg.num_warps,
                num_stages=cfg.num_stages,
                exception=_exc(exc),
            )
            raise

    triton = async_compile.AsyncCompile.triton

    def _triton(
        self: AsyncCompile, kernel_name: str, source_code: str, *a: str, **kw: str
    ) -> object:
        tried.clear()
        try:
            return triton(self, kernel_name, source_code, *a, **kw)
        except Exception as exc:
            if "mode" not in seen:  # the first kernel whose compile failed
                seen.update(kernel=kernel_name, module=source_code, mode="source")
                seen.update(tried or {"exception": _exc(exc)})
            raise

    th.CachingAutotuner._precompile_config = _precompile_config  # type: ignore[method-assign]
    async_compile.AsyncCompile.triton = _triton  # type: ignore[method-assign]


def capture(repro: str) -> dict[str, Any]:
    import torch

    seen: dict[str, Any] = {}
    _watch(seen)
    ns = runpy.run_path(repro, run_name="tcompile_kernel_compile")
    if "Repro" not in ns or "make_inputs" not in ns:
        return {"error": "repro.py has no Repro module and make_inputs (the long form)"}
    compiled = torch.compile(ns["Repro"](), backend="inductor", **(ns.get("KWARGS") or {}))
    try:
        compiled(*ns["make_inputs"]())
    except Exception as exc:
        if "mode" not in seen:
            return {
                "error": "the compile failed outside any Triton kernel's compile "
                f"({type(exc).__name__}: {str(exc).strip()[:200]})"
            }
    else:
        return {"error": "the compile did not fail when traced"}
    header = "import triton\nimport triton.language as tl"
    if seen.get("file"):
        try:
            lines = Path(seen["file"]).read_text().splitlines()
            header = "\n".join(ln for ln in lines if ln.startswith(("import ", "from ")))
        except OSError:
            pass
    seen["header"] = header
    seen["torch"] = torch.__version__
    seen["device"] = torch.cuda.get_device_name()
    try:
        import triton

        seen["triton"] = triton.__version__
    except ImportError:
        seen["triton"] = "?"
    return seen


if __name__ == "__main__":
    from .kernel_trace import main

    sys.exit(main(lambda repro, work: capture(repro)))

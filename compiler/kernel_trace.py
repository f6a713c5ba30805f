"""The Triton kernel behind a wrong value: trace a verified repro.py's compile and run
with tritonparse, find the launch whose output differs from eager, and keep what a
kernel-level repro needs (repro/kernel_repro.py writes it).

Runs in a fresh process on the CUDA machine (``python -m tcompile.compiler.kernel_trace
REPRO.PY WORKDIR``), so that tritonparse's hooks see every compile from the start:
tritonparse (on PyPI) records each Triton compile (the kernel's source, num_warps,
num_stages) and each launch (grid, every argument, and with blob storage the value of
every tensor argument *before* the launch).  The compiled module's outputs are matched
to the launches that wrote them by address; the launch whose output is furthest from
eager's is the culprit kernel.  Its inputs are the blobs; what it should have written is
eager's value of that output of the minimized graph (the nodes it fused end there).
When the outputs need gradients, a backward runs too (the same seeded output grads in
eager and compiled), and the input gradients count as outputs: a backward kernel that
writes a wrong gradient is found the same way.

Writes WORKDIR/kernel.json (and kernel.pt: the tensors), or kernel.json with "error".
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import re
import runpy
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import layout

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import torch


def _flat(x: object) -> list[torch.Tensor]:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat(v)]
    return []


def _events(parsed: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(glob.glob(os.path.join(parsed, "*.ndjson.gz"))):
        if "mapped" in os.path.basename(path):
            continue
        with gzip.open(path, "rt") as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def kernel_source(comp: dict[str, Any]) -> tuple[str, str]:
    """(the kernel module's imports, the kernel as a plain ``@triton.jit`` function):
    inductor's autotuning decorator is dropped; the launch gives its config."""
    src = comp["payload"]["python_source"]
    code = src["code"]
    code = code[code.index("@triton.jit") :] if "@triton.jit" in code else code
    header = ""
    try:
        lines = Path(src["file_path"]).read_text().splitlines()
        head = lines[: max(0, int(src.get("start_line", 1)) - 1)]
        header = "\n".join(ln for ln in head if re.match(r"^(import |from )", ln))
    except (OSError, ValueError):
        header = "import triton\nimport triton.language as tl"
    return header, code.rstrip() + "\n"


def _differ(got: torch.Tensor, want: torch.Tensor) -> float:
    """How far a compiled output is from eager's (0: the same), relative."""
    import torch

    if got.shape != want.shape:
        return float("inf")
    if not got.is_floating_point():
        return float((got != want).sum().item())
    g, w = got.double(), want.double()
    bad = ~torch.isclose(g, w, rtol=1e-3, atol=1e-5, equal_nan=True)
    if not bad.any():
        return 0.0
    return float(((g - w).abs()[bad] / (w.abs()[bad] + 1e-5)).max().item())


def _ids(shape: Sequence[int], stride: Sequence[int], offset: int) -> torch.Tensor:
    """The storage positions (in elements) a strided view covers."""
    import torch

    ext = offset + 1 + sum((n - 1) * st for n, st in zip(shape, stride)) if all(shape) else 1
    return torch.arange(ext).as_strided(tuple(shape), tuple(stride), offset)


def _culprit(
    events: list[dict[str, Any]], got: list[torch.Tensor], want: list[torch.Tensor]
) -> tuple[float, dict[str, Any], str, int, int] | None:
    """(error, launch, argument, output index, element offset of the argument in the
    output) for the launch whose store leaves the furthest-off values: for each region of
    each output, the last launch that wrote it (an earlier one may fill the buffer:
    zeros, then a scatter), its error measured over the elements it covers."""
    import torch

    spans = [
        (t.data_ptr(), t.data_ptr() + int(_ids(t.shape, t.stride(), 0).max()) * t.element_size())
        for t in got
    ]
    last: dict[tuple[int, int], tuple[dict[str, Any], str, Any]] = {}
    for ev in events:
        if ev.get("event_type") != "launch":
            continue
        for name, arg in (ev.get("extracted_args") or {}).items():
            if "out_ptr" not in name or arg.get("type") != "tensor" or not arg.get("data_ptr"):
                continue
            p = int(arg["data_ptr"], 16)
            for i, (lo, hi) in enumerate(spans):
                if got[i].numel() and lo <= p <= hi:
                    last[(i, p)] = (ev, name, arg)
    best = None
    for (i, p), (ev, name, arg) in last.items():
        k = (p - spans[i][0]) // got[i].element_size()
        covered = _ids(arg["shape"], arg["stride"], k).flatten()
        mask = torch.isin(_ids(got[i].shape, got[i].stride(), 0), covered)
        if not mask.any():
            continue
        d = _differ(got[i].cpu()[mask], want[i].cpu()[mask])
        if d > 0 and (best is None or d > best[0]):
            best = (d, ev, name, i, k)
    return best


def _run(ns: dict[str, Any]) -> tuple[list[torch.Tensor], list[torch.Tensor], int, list[int]]:
    """The repro's module in eager and compiled: (eager's outputs, compiled's outputs,
    how many are forward outputs, the inputs whose gradients follow)."""
    import torch

    inputs = ns["make_inputs"]()
    mine = [
        x.detach().clone().requires_grad_(x.requires_grad) if torch.is_tensor(x) else x
        for x in inputs
    ]
    want = _flat(ns["Repro"]()(*mine))
    compiled = torch.compile(ns["Repro"](), backend="inductor", **(ns.get("KWARGS") or {}))
    got = _flat(compiled(*inputs))
    forward, grads_of = len(got), []
    if any(t.requires_grad for t in got):  # the backward's kernels write the gradients
        g = torch.Generator(device=got[0].device).manual_seed(0)
        seeds = [
            torch.randn(t.shape, generator=g, device=t.device).to(t.dtype)
            for t in got
            if t.requires_grad
        ]

        def grads(outs: list[torch.Tensor], leaves: Sequence[object]) -> list[torch.Tensor]:
            use = [x for x in leaves if torch.is_tensor(x) and x.requires_grad]
            outs = [t for t in outs if t.requires_grad]
            return list(torch.autograd.grad(outs, use, seeds, allow_unused=True))

        # torch.autograd.grad hands back the backward's own buffers (no copy into .grad)
        gw, gg = grads(want, mine), grads(got, inputs)
        grads_of = [i for i, x in enumerate(inputs) if torch.is_tensor(x) and x.requires_grad]
        keep = [k for k in range(len(gw)) if gw[k] is not None and gg[k] is not None]
        want += [gw[k] for k in keep]
        got += [gg[k] for k in keep]
        grads_of = [grads_of[k] for k in keep]
    torch.cuda.synchronize()
    return [t.detach() for t in want], [t.detach() for t in got], forward, grads_of


def trace(repro: str, work: str) -> dict[str, object]:
    import tritonparse.structured_logging as tpl

    tpl.init(os.path.join(work, "trace"), enable_trace_launch=True, enable_tensor_blob_storage=True)
    import torch

    ns = runpy.run_path(repro, run_name="tcompile_kernel_trace")
    if "Repro" not in ns or "make_inputs" not in ns:
        return {"error": "repro.py has no Repro module and make_inputs (the long form)"}
    want, got, forward, grads_of = _run(ns)
    from tritonparse.parse.utils import unified_parse

    parsed = os.path.join(work, "parsed")
    unified_parse(source=os.path.join(work, "trace"), out=parsed, overwrite=True)
    events = _events(parsed)
    comps = {
        (e.get("payload") or {}).get("metadata", {}).get("name"): e
        for e in events
        if e.get("event_type") == "compilation"
    }
    best = _culprit(events, got, want)
    launches = [e for e in events if e.get("event_type") == "launch"]
    if best is None:
        return {
            "error": f"no kernel's output differs from eager ({len(launches)} launch(es) "
            "traced; a wrong value made outside a Triton kernel, or within tolerance)"
        }
    d, ev, out_name, index, k = best
    comp = comps.get(ev.get("name"))
    if comp is None:
        return {"error": f"the compile of {ev.get('name')} was not traced"}
    header, source = kernel_source(comp)
    meta = ev.get("compilation_metadata") or comp["payload"]["metadata"]
    tensors: dict[str, torch.Tensor] = {}
    args: list[dict[str, object]] = []
    for name, arg in (ev.get("extracted_args") or {}).items():
        a = {"name": name, "type": arg.get("type")}
        if arg.get("type") == "tensor":
            blob = arg.get("blob_path")
            if not blob:
                return {"error": f"argument {name} of {ev.get('name')} was not stored"}
            t = torch.load(blob, map_location="cpu", weights_only=True)
            tensors[name] = t
            a.update(
                shape=arg.get("shape"),
                stride=arg.get("stride"),
                offset=arg.get("storage_offset", 0),
                dtype=str(arg.get("dtype")),
            )
        else:
            a["value"] = arg.get("value")
        args.append(a)
    tensors["__expected__"] = want[index].cpu()
    tensors["__got__"] = got[index].cpu()
    torch.save(tensors, os.path.join(work, layout.KERNEL_TENSORS))
    return {
        "kernel": ev.get("name"),
        "grid": ev.get("grid"),
        "num_warps": meta.get("num_warps"),
        "num_stages": meta.get("num_stages"),
        "header": header,
        "source": source,
        "args": args,
        "output": out_name,
        # the graph output as a view of the kernel's argument (same address)
        "view": [list(got[index].shape), list(got[index].stride())],
        "at": k,  # where the output argument starts in the graph output, in elements
        "output_index": index,
        "what": (
            f"output {index} of the minimized graph"
            if index < forward
            else f"the gradient of input {grads_of[index - forward]} of the minimized graph"
        ),
        "relative_error": d,
        "launches": len(launches),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
    }


def main(look: Callable[[str, str], Mapping[str, object]] | None = None) -> int:
    """``python -m ... REPRO.PY WORKDIR``: ``look(repro, work)`` (this module's
    :func:`trace` by default; kernel_compile.py passes its own) -> WORKDIR/kernel.json."""
    repro, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    try:
        doc = (look or trace)(repro, work)
    except Exception as exc:  # reported to the parent, which says it
        doc = {"error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
    layout.write_file(Path(work, layout.KERNEL_DOC), json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Small facts about the FX graphs the program compiles, and the one graph-copy helper."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..collectives import has_collectives  # noqa: F401 - the one rule, re-exported
from ..owners import in_torch

COMPUTE_OPS = ("call_function", "call_method", "call_module")
# node metadata of the trace a graph came from: fake tensors of another fake mode
_TRACE_META = ("example_value", "val", "tensor_meta", "grapharg")

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import TypedDict, TypeVar

    from torch.fx.node import Argument

    F = TypeVar("F", bound=Callable[..., object])

    class DdpBucket(TypedDict, total=False):
        """One bucket of a graph DDPOptimizer split (:func:`ddp_bucket`)."""

        bucket: int  # its index among the buckets
        cap_mb: float  # DDP's bucket cap
        graph: torch.fx.GraphModule  # the whole graph Dynamo captured

    # a graph output's (dtype, shape or None when symbolic); None: not a known tensor
    ExpectedOutput = tuple[torch.dtype, tuple[int, ...] | None] | None


def count_compute(gm: torch.fx.GraphModule) -> int:
    """The number of compute nodes (what tcompile reports as a graph's ``nodes``)."""
    return sum(1 for n in gm.graph.nodes if n.op in COMPUTE_OPS)


# what a functorch transform (vmap, jacfwd, jvp, grad) leaves in a Dynamo graph
_TRANSFORM_CALLS = ("_vmap_increment_nesting", "_jvp_increment_nesting", "_grad_increment_nesting")


def holds_transform(gm: torch.fx.GraphModule) -> bool:
    """The graph enters a functorch transform itself (``torch.compile(jacfwd(f))``):
    its body works on batched and dual tensors that exist only inside the transform."""
    return any(
        n.op == "call_function" and getattr(n.target, "__name__", "") in _TRANSFORM_CALLS
        for n in gm.graph.nodes
    )


def ddp_bucket() -> DdpBucket | None:
    """When DDPOptimizer is compiling one bucket of a graph it split (the caller's
    stack runs through torch/_dynamo/backends/distributed.py): which bucket, and the
    bucket cap."""
    import sys

    frame: FrameType | None = sys._getframe(1)
    info: DdpBucket = {}
    while frame is not None:
        if in_torch(frame.f_code.co_filename, "_dynamo", "backends", "distributed.py"):
            target = str(getattr(frame.f_locals.get("n"), "target", ""))
            if target.startswith("submod_") and target[7:].isdigit():
                info.setdefault("bucket", int(target[7:]))
            for value in frame.f_locals.values():
                cap = getattr(value, "bucket_bytes_cap", None)
                if isinstance(cap, (int, float)) and "cap_mb" not in info:
                    info["cap_mb"] = round(cap / 2**20, 3)
                reason = getattr(value, "compile_subgraph_reason", None)
                if reason is not None and "DDPOptimizer" not in str(getattr(reason, "reason", "")):
                    info.setdefault("graph", value)  # the whole graph Dynamo captured
        frame = frame.f_back
    return info if "bucket" in info else None


def in_distributed_job() -> bool:
    import os

    try:
        return int(os.environ.get("WORLD_SIZE", "1")) > 1
    except ValueError:
        return False


def fresh_copy(gm: torch.fx.GraphModule, *, strip_trace_meta: bool = True) -> torch.fx.GraphModule:
    """A new GraphModule over a new graph with the same nodes.

    Compiler passes edit graphs in place (DESIGN.md mechanism 3): a pass run on the
    copy leaves ``gm`` alone.  The copy is a plain GraphModule (an AOT graph remembers
    make_fx's tracer, which does not pickle), and by default carries none of the
    fake-tensor metadata of the original trace (it belongs to another fake mode; the
    compiler derives it again from real inputs)."""
    g = torch.fx.Graph()
    g.output(g.graph_copy(gm.graph, {}))
    if strip_trace_meta:
        for n in g.nodes:
            for key in _TRACE_META:
                n.meta.pop(key, None)
    return torch.fx.GraphModule(gm, g)


def describe_graph(gm: torch.fx.GraphModule) -> dict[str, object]:
    """Frame name, file and line of the user code a Dynamo graph was captured from."""
    info: dict[str, object] = {"frame": "", "file": "", "line": None}
    reason = getattr(gm, "compile_subgraph_reason", None)
    stack = list(getattr(reason, "user_stack", None) or [])
    if stack:
        # the outermost frame that is the user's own (torch.compile(model) enters
        # through torch's nn.Module plumbing first)
        user = [fs for fs in stack if not in_torch(fs.filename)]
        modules = [fs for fs in stack if not in_torch(fs.filename, "_dynamo")]
        top = (user or modules or stack)[0]
        info.update(frame=top.name, file=top.filename, line=top.lineno)
        # the line a graph is at is where it starts (its first op), not where it ended
        # (the break, kept as break_line): the graph table, explain and the failures
        # all say the line the user reads the graph's code at
        first = frame_from_stack_trace(gm)
        if first.get("file") == top.filename and first.get("line"):
            info["line"] = first["line"]
    else:
        info.update(frame_from_stack_trace(gm))
    info["compile_id"] = str(gm.meta.get("dynamo_compile_id", "")) if hasattr(gm, "meta") else ""
    if reason is not None and getattr(reason, "graph_break", False):
        info["break_reason"] = str(getattr(reason, "reason", ""))[:300]
        if stack:
            info["break_file"], info["break_line"] = stack[-1].filename, stack[-1].lineno
    return info


def frame_from_stack_trace(gm: torch.fx.GraphModule) -> dict[str, object]:
    """From the first node's ``stack_trace``: 'File "x.py", line 5, in f'."""
    info: dict[str, object] = {}
    for node in gm.graph.nodes:
        trace = node.meta.get("stack_trace")
        if not trace:
            continue
        lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File")]
        if lines:
            parts = lines[0].split(",")
            info["file"] = parts[0].split('"')[1] if '"' in parts[0] else ""
            try:
                info["line"] = int(parts[1].split()[-1])
            except (IndexError, ValueError):
                pass
            info["frame"] = parts[-1].replace("in ", "").strip()
        break
    return info


def output_args(gm: torch.fx.GraphModule) -> list[Argument]:
    """What the graph returns, flat: a node (or a constant, None) per output."""
    out_node = next((n for n in reversed(gm.graph.nodes) if n.op == "output"), None)
    if out_node is None:
        return []
    return (
        list(out_node.args[0])
        if isinstance(out_node.args[0], (tuple, list))
        else [out_node.args[0]]
    )


def expected_outputs(gm: torch.fx.GraphModule) -> list[ExpectedOutput]:
    """(dtype, shape or None) of each tensor the graph returns, from the fake values
    Dynamo traced it with (None where unknown); shape is None when symbolic."""
    flat = output_args(gm)
    expected: list[ExpectedOutput] = []
    for arg in flat:
        value = (
            arg.meta.get("example_value", arg.meta.get("val"))
            if isinstance(arg, torch.fx.Node)
            else None
        )
        if not isinstance(value, torch.Tensor):
            expected.append(None)
            continue
        shape = tuple(value.shape)
        concrete = all(isinstance(d, int) for d in shape)
        expected.append((value.dtype, shape if concrete else None))
    return expected


def untraced(fn: F) -> F:
    """tcompile's own function that autograd calls (a tensor hook, an engine callback),
    kept from Dynamo: Dynamo traces what a compiled frame calls, and a program that runs
    backward inside a compiled function (#91468's ``torch.autograd.grad``) had Dynamo
    compile the check's own hooks -- graphs of tcompile's among the program's."""
    import torch._dynamo

    return torch._dynamo.disable(fn)


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def fake_call(args: list[Any]) -> bool:
    """Whether a call's tensors are fake (a shape propagation, not a real call).  Every
    call of every graph asks: a plain tensor or parameter (not a functional wrapper) is
    answered by its type, 0.5 us for a small MLP's 7 inputs where ``is_fake`` on each
    took 13 (benchmarks/step_overhead.py)."""
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:
        return False
    for a in args:
        if type(a) in _PLAIN and not torch._is_functional_tensor(a):
            continue
        if isinstance(a, torch.Tensor) and is_fake(a):
            return True
    return False

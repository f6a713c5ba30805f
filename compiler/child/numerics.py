"""Where an accuracy failure's values first go wrong, in which kernel, and which numerics
switch makes them right (issue 25), inside a minifier worker.

*First divergence*: the graph's compute nodes in order; for a node k, the prefix of the
graph up to k, returning k's value, is compiled as the candidate would be (judge.py)
and its value compared with eager's and with float64's (accuracy.compare_tensor, the
one rule).  Wrong values propagate, so the first wrong node is found by bisection over
k: log2(n) compiles.  The compile of that prefix tracks inductor's provenance
(``trace.provenance_tracking_level``): the kernel whose post-grad nodes compute the
node is named.

*Switches*: data (:data:`SWITCHES`): a config entry and the value that turns a numerics
policy off, with what it means when it makes the failure go away.  The worker judges
the graph under one switch (``patched``); the parent asks for all in parallel.  A
switch this torch lacks is skipped; a new torch's switch is one line here.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from ...minifier.interval import first_failing
from .. import accuracy
from ..configs import MISSING, get_dotted
from .graphs import COMPUTE_OPS, fresh_copy

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import TypedDict

    from ..snapshot import Snapshot
    from .build import CompilerFn

    class Divergence(TypedDict, total=False):
        """Where a graph's values (or gradients) first go wrong: :func:`first_divergence`,
        :func:`first_grad_divergence`, and what localize.py and serve.py add to them."""

        node: str | None  # the first wrong node; None: not found (``why`` says why)
        why: str
        right_alone: bool  # the graph's last value is right on its own
        op: str
        index: int  # of the node among the compared ones
        of: int
        source: str  # the user's line it comes from
        detail: str | None  # what differs
        compiles: int  # prefixes compiled
        kernel: str | None  # the generated kernel that computes it
        grads: bool  # a gradient's divergence
        graph: str  # "backward": inside the compiled backward graph
        switches: list[list[object]]  # [config entry, value, what it means]: serve.py

    class Localized(TypedDict, total=False):
        """A checked call's failure, localized (runners.GraphRunner.localize)."""

        divergence: Divergence


# (config entry, value, what it means when the failure goes away with it)
SWITCHES: tuple[tuple[str, bool | int | str, str], ...] = (
    ("emulate_precision_casts", True, "a precision policy: inductor elides eager's casts"),
    # TORCHINDUCTOR_NUMERICS (newer torch): strict pointwise ops, strict reductions, both
    ("numerics", "strict_pointwise", "pointwise numerics: inductor's strict pointwise mode"),
    ("numerics", "strict_reduction", "reduction numerics: inductor's strict reduction mode"),
    ("numerics", "strict", "a precision policy: inductor's strict numerics mode"),
    ("eager_numerics.disable_ftz", True, "denormals: compiled code flushes them to zero"),
    ("fallback_random", True, "random numbers: compiled code draws its own"),
    ("split_reductions", False, "reduction order: a split reduction sums in another order"),
    ("eager_numerics.division_rounding", True, "division rounding (Triton's approximate div)"),
    ("eager_numerics.use_pytorch_libdevice", True, "libdevice's transcendentals (1-ulp)"),
    ("cpp.simdlen", 1, "CPU vectorized code: the scalar code is right"),
    ("layout_optimization", False, "layout: inductor chose another memory layout"),
    ("comprehensive_padding", False, "padding: inductor padded a tensor's strides"),
    ("tf32", False, "TF32 matmuls on the GPU"),
    # a Triton schedule: reductions over a tensor's rows and its columns in one kernel
    # (#193061's wrong gradients, the tracker's workaround: TORCHINDUCTOR_MIX_ORDER_REDUCTION=0)
    ("triton.mix_order_reduction", False, "reduction scheduling: mix-order reduction"),
)
_CUDA_ONLY = {"tf32", "triton.mix_order_reduction"}  # changes nothing in CPU code


def available_switches(cuda: bool) -> list[tuple[str, bool | int | str, str]]:
    """The switches this torch has, and that differ from the value in force."""
    import torch._inductor.config as inductor_config

    out = []
    for key, value, why in SWITCHES:
        if key in _CUDA_ONLY and not cuda:
            continue
        if key == "tf32":
            if torch.backends.cuda.matmul.allow_tf32 != value:
                out.append((key, value, why))
            continue
        obj = get_dotted(inductor_config, key)
        if obj is not MISSING and obj != value:
            out.append((key, value, why))
    return out


@contextlib.contextmanager
def patched(patch: dict[str, Any] | None) -> Iterator[None]:
    """inductor config (and TF32) as a switch sets it, for one judgement."""
    if not patch:
        yield
        return
    import torch._inductor.config as inductor_config

    patch = dict(patch)
    tf32 = patch.pop("tf32", None)
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        if tf32 is not None:
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        with inductor_config.patch(patch) if patch else contextlib.nullcontext():
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _prefix(gm: torch.fx.GraphModule, node_name: str) -> torch.fx.GraphModule:
    """The graph up to ``node_name``, returning its value."""
    g = fresh_copy(gm, strip_trace_meta=False)
    keep = next(n for n in g.graph.nodes if n.name == node_name)
    out = next(n for n in g.graph.nodes if n.op == "output")
    out.args = ((keep,),)
    g.graph.eliminate_dead_code()
    g.recompile()
    return g


def _values(
    gm: torch.fx.GraphModule, inputs: Sequence[object], dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """Every tensor node's value, eager, or with every floating value taken to ``dtype``
    as it is made (float64: as float64.to_float64 computes its reference)."""
    import copy

    from ..snapshot import exact_copies

    seen: dict[str, torch.Tensor] = {}
    target = gm if dtype is None else copy.deepcopy(gm).to(dtype)

    class Record(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> object:
            value = super().run_node(n)
            if dtype is not None and isinstance(value, torch.Tensor) and value.is_floating_point():
                value = value.to(dtype)
            if isinstance(value, torch.Tensor):
                seen[n.name] = value.detach()
            return value

    with torch.no_grad():
        Record(target).run(*exact_copies(inputs, dtype))
    return seen


def first_divergence(
    gm: torch.fx.GraphModule, inputs: Sequence[object], compile_fn: CompilerFn
) -> Divergence:
    """The first compute node whose compiled value is clearly worse than eager's
    (against float64), by bisection over graph prefixes; ``compile_fn(gm, inputs)``
    gives a callable."""
    nodes = [n.name for n in gm.graph.nodes if n.op in COMPUTE_OPS]
    eager = _values(gm, inputs)
    nodes = [n for n in nodes if n in eager]
    if not nodes:
        return {"node": None, "why": "no tensor-valued node to compare"}
    try:
        exact = _values(gm, inputs, torch.float64)
    except Exception:
        exact = {}
    tried: dict[int, str | None] = {}

    def wrong(k: int) -> str | None:
        if k not in tried:
            name = nodes[k]
            try:
                compiled = compile_fn(_prefix(gm, name), inputs)
                with torch.no_grad():
                    from ..snapshot import exact_copies

                    value = accuracy.flatten(compiled(*exact_copies(inputs)))[0]
                tried[k] = accuracy.compare_tensor(
                    eager[name], value, exact.get(name), strict=False
                )
            except Exception as exc:  # a prefix that does not compile: not wrong values
                tried[k] = None
                tried[-k - 1] = f"{type(exc).__name__}: {exc}"[:200]
        return tried[k]

    return _bisect(gm, nodes, wrong, tried, "the graph's last value is right on its own")


def _bisect(
    gm: torch.fx.GraphModule,
    nodes: list[str],
    wrong: Callable[[int], str | None],
    tried: dict[int, str | None],
    why: str,
) -> Divergence:
    """The first k whose prefix is wrong (wrong(k): what differs, or None), by the one
    interval search (minifier/interval.py)."""
    hi = len(nodes) - 1
    if wrong(hi) is None:  # ``right_alone``: what the parent acts on (not ``why``'s words)
        return {"node": None, "why": why, "right_alone": True}
    lo = first_failing(-1, hi, lambda pts: [wrong(k) is not None for k in pts])
    node = next(n for n in gm.graph.nodes if n.name == nodes[lo])
    return {
        "node": node.name,
        "op": _op_name(node),
        "index": lo,
        "of": len(nodes),
        "source": _source_line(node),
        "detail": tried[lo],
        "compiles": len([k for k in tried if k >= 0]),
    }


def _grads(
    fn: Callable[..., object], snap: Snapshot, dtype: torch.dtype | None = None
) -> list[torch.Tensor | None] | None:
    """The input gradients of a fixed random projection of ``fn``'s first output."""
    with torch.enable_grad():  # (a backward hook, where this may run, turns it off)
        values, leaves = snap.materialize(dtype, grads=True)
        out = accuracy.flatten(fn(*values))[0]
        if not isinstance(out, torch.Tensor) or not out.requires_grad or not leaves:
            return None
        g = torch.Generator().manual_seed(1234)
        proj = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out)
        return list(torch.autograd.grad((out * proj).sum(), leaves, allow_unused=True))


def first_grad_divergence(
    gm: torch.fx.GraphModule, snap: Snapshot, compile_fn: CompilerFn
) -> Divergence:
    """A gradient's first divergence: the first node k such that the input gradients of
    the graph's prefix up to k (of a fixed projection of k's value) are clearly worse
    compiled than eager (against float64): the node whose backward goes wrong first,
    by the same bisection over prefixes, each prefix compiled with its backward."""
    import copy

    nodes = [n.name for n in gm.graph.nodes if n.op in COMPUTE_OPS]
    if not nodes:
        return {"node": None, "why": "no node to compare"}
    tried: dict[int, str | None] = {}

    class F64(torch.fx.Interpreter):  # every floating value taken to float64 as made
        def run_node(self, n: torch.fx.Node) -> object:
            v = super().run_node(n)
            return (
                v.to(torch.float64) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            )

    def wrong(k: int) -> str | None:
        if k not in tried:
            prefix = _prefix(gm, nodes[k])
            tried[k] = None
            try:
                eager = _grads(prefix, snap)
                exact = _grads(
                    F64(copy.deepcopy(prefix).to(torch.float64)).run, snap, torch.float64
                )
                with torch.enable_grad():
                    fn = compile_fn(prefix, snap.materialize(None, grads=True)[0])
                compiled = _grads(fn, snap)
            except Exception as exc:  # a prefix that does not compile: not wrong values
                tried[-k - 1] = f"{type(exc).__name__}: {exc}"[:200]
                return None
            for i, (e, c, x) in enumerate(zip(eager or [], compiled or [], exact or [])):
                if e is not None and c is not None:
                    verdict = accuracy.compare_tensor(e, c, x, strict=False)
                    if verdict:
                        tried[k] = f"grad {i}: {verdict}"
                        break
        return tried[k]

    return _bisect(gm, nodes, wrong, tried, "the gradients of the graph's last value are right")


def _op_name(node: torch.fx.Node) -> str:
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def _source_line(node: torch.fx.Node) -> str:
    """The user's line the node comes from: the last frame of its stack trace."""
    return source_of_trace(str(node.meta.get("stack_trace") or ""))


def source_of_trace(stack_trace: str) -> str:
    """``file:line, in fn: code`` of a stack trace's last frame."""
    trace = stack_trace.strip().splitlines()
    frames = [i for i, ln in enumerate(trace) if ln.strip().startswith("File ")]
    if not frames:
        return ""
    i = frames[-1]
    where = trace[i].strip().replace("File ", "", 1)
    code = trace[i + 1].strip() if i + 1 < len(trace) else ""
    return f"{where}: {code}" if code else where


def kernel_of(
    gm: torch.fx.GraphModule,
    node_name: str,
    compile_fn: CompilerFn,
    inputs: Sequence[object],
    snap: Snapshot | None = None,
) -> str | None:
    """The generated kernel that computes ``node_name``: the prefix graph up to it is
    compiled and its code read (inductor names a fused kernel after the ops it fuses:
    ``cpp_fused_mul_relu_sub_0``, ``triton_poi_fused_relu_0``); the kernel that names the
    node's op, else the last one.  ``snap`` (a wrong gradient): the prefix runs forward
    and backward on it, and the kernel is the backward code's -- its first kernel, where
    the node's own gradient is computed (a backward runs in reverse), or one naming
    the op."""
    import re
    from unittest import mock

    try:
        from torch._inductor.graph import GraphLowering
    except ImportError:
        return None
    from ..snapshot import exact_copies

    # torch's run_and_get_code would do this, but it calls torch._dynamo.reset() first:
    # that throws away the program's compiled frames, and every later call of its
    # model recompiles (issue 40).  The prefix is compiled without Dynamo, so no reset
    # is needed; the output-code hook alone is patched, and put back.
    codes: list[str] = []
    prefix = _prefix(gm, node_name)
    try:
        with mock.patch.object(GraphLowering, "save_output_code", codes.append):
            if snap is None:
                with torch.no_grad():
                    compile_fn(prefix, inputs)(*exact_copies(inputs))
            else:
                with torch.enable_grad():
                    fn = compile_fn(prefix, snap.materialize(None, grads=True)[0])
                _grads(fn, snap)
    except Exception:
        return None
    if snap is not None:
        codes = codes[-1:]  # the backward's (compiled when it first runs)
    names: list[str] = []
    for code in codes:
        for name in re.findall(r"\b((?:cpp|triton)_\w+?_\d+)\b", code):
            if name not in names:
                names.append(name)
    if not names:
        return None
    node = next(n for n in gm.graph.nodes if n.name == node_name)
    op = _op_name(node).lower().strip("_")
    named = [k for k in names if op and op in k.lower()]
    if snap is not None:
        return (named or names)[0]
    return (named or names)[-1]

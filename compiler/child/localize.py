"""Where a run's accuracy failure first goes wrong (issue 25), in the program's process.

``tcompile run --accuracy`` (and bisect's baseline run) judge the program's own call
(observe.py).  When that call's values are wrong, the graph's first divergent node and
the kernel that computes it are found here, at once, from the call's exact snapshot
(numerics.first_divergence: prefixes of the graph, bisected).  Without a second run
of the program, and without touching it:

- prefixes are compiled by the stage's compile function called directly (no Dynamo:
  the program's frames, its caches of compiled frames and tcompile's graph numbering
  are not touched), without the program's ``mode`` (no CUDA graphs or autotuning added
  to its process);
- the program's compiled graph is never called again;
- the RNG is where the program's call left it, afterwards;
- a bisection run does not count their subsystem applications (subsystems.py).

Once per graph; under an outer autocast (the prefixes would run outside it) or in a
distributed job (under DDP the prefix compiles made later calls recompile) nothing is
localized: said so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .. import accuracy
from ..stack import backend_name
from .build import build_stage
from .graphs import fresh_copy
from .judge import _PlainHooks
from .subsystems import not_counted

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch
    from torch._inductor.utils import InputType

    from ..snapshot import Snapshot
    from .build import CompiledFn
    from .numerics import Divergence
    from .observe import Ambient
    from .runners import GraphRunner


def localize(
    runner: GraphRunner, snap: Snapshot, ambient: Ambient, grads: bool = False
) -> Divergence:
    """The first divergence of ``runner``'s graph on the call ``snap`` holds (``grads``:
    of its input gradients: the node whose backward goes wrong first)."""
    from .numerics import first_divergence, first_grad_divergence, kernel_of

    state = ambient.describe()
    if state:
        return {"node": None, "why": f"not localized: the call ran under {state}"}
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # seen: under DDP, compiling prefixes in a rank's process made its later calls
        # recompile (and fail again); a distributed job's graph is localized by minify
        return {"node": None, "why": "not localized: a distributed job (minify localizes it)"}
    gm = runner.reference
    spec = runner.backend.spec() if runner.backend is not None else None
    options = getattr(spec, "options", None)
    user_backend = getattr(spec, "user_backend", None)
    options = accuracy.with_fallback_random(options, checking=True, stage=runner.stage, gm=gm)
    own = user_backend is not None and backend_name(user_backend) == runner.stage
    compile_stage = build_stage(
        runner.stage,
        _PlainHooks(),
        user_backend=user_backend if own else None,
        options=options or None,
    )

    def compile_fn(g: torch.fx.GraphModule, inputs: Sequence[object]) -> CompiledFn:
        return compile_stage(fresh_copy(g, strip_trace_meta=False), inputs)

    rng = accuracy.RngState()
    try:
        inputs = snap.values()
        with not_counted():  # a bisection's numbering is the program's own
            if grads:
                inside = _in_backward_graph(runner)
                if inside.get("node"):
                    return inside
                found = first_grad_divergence(gm, snap, compile_fn)
                if found.get("node"):  # (so found["node"] is a node's name, below)
                    found["kernel"] = kernel_of(
                        gm, cast(str, found["node"]), compile_fn, inputs, snap
                    )
                return {**found, "grads": True}
            found = first_divergence(gm, inputs, compile_fn)
            if found.get("node"):
                found["kernel"] = kernel_of(gm, cast(str, found["node"]), compile_fn, inputs)
        return found
    except Exception as exc:  # the analysis, never the program
        return {"node": None, "why": f"not localized: {type(exc).__name__}: {exc}"[:300]}
    finally:
        rng.restore()


def _in_backward_graph(runner: GraphRunner) -> Divergence:
    """A wrong gradient inside the backward graph inductor compiled: its first node whose
    inputs are right and whose value is wrong (prefixes of the backward graph, on the
    inputs the program's own backward call got: the forward's saved values and the
    tangents), its kernel, and the user's line of the forward op it differentiates (a
    backward node carries its forward op's stack trace).  Inductor's only: another
    stage's backward graph is what runs, there is no compiled one to compare."""
    from .numerics import first_divergence, kernel_of

    call = runner.session.backward_calls.pop(runner.index, None)
    if call is None or runner.stage != "inductor":
        return {}
    gm, inputs = call
    from torch._inductor.compile_fx import compile_fx_inner

    def compile_fn(g: torch.fx.GraphModule, args: Sequence[object]) -> CompiledFn:
        # the backward call's inputs: what torch names InputType
        compiled = compile_fx_inner(
            fresh_copy(g, strip_trace_meta=False), cast("list[InputType]", list(args))
        )
        return lambda *a: compiled(list(a))

    found = first_divergence(gm, inputs, compile_fn)
    if found.get("node"):
        found["kernel"] = kernel_of(gm, cast(str, found["node"]), compile_fn, inputs)
        # (two of its keys: mypy takes no keyword arguments for a TypedDict's update)
        cast("dict[str, object]", found).update(grads=True, graph="backward")
        node = next(n for n in gm.graph.nodes if n.name == found["node"])
        found["source"] = found.get("source") or _forward_source(runner, node)
    return found


def _forward_source(runner: GraphRunner, node: torch.fx.Node) -> str:
    """The user's line of the forward op a backward node differentiates (its autograd
    sequence number), else the module it ran in."""
    import re

    from .numerics import source_of_trace

    traces = runner.session.forward_traces.get(runner.index, {})
    # (a node without a seq_nr looks up None: no trace)
    trace = traces.get(node.meta.get("seq_nr"))  # type: ignore[arg-type]
    if trace and source_of_trace(trace):
        return source_of_trace(trace)
    modules = node.meta.get("fwd_nn_module_stack") or {}
    if modules:
        path, kind = list(modules.values())[-1]
        path = re.sub(r"^L\['\w+'\]\.?", "", str(path)) or "the compiled module"
        return f"in module {path} ({getattr(kind, '__name__', kind)})"
    return ""

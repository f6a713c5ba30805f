"""Immutable graph cases and the one operation every pass is built from.

A :class:`Case` is a GraphModule plus one concrete input per placeholder.  Cases are
values: nothing here edits a graph that already exists; every change builds a new
graph (:func:`rebuild`) from the current one.

``rebuild`` takes what to *keep* computing, what to *lift* (replace a node by a
placeholder holding the concrete value that node had in an eager run of the current
case) and which values to output; it then removes dead code and unused inputs.
Truncating a suffix, cutting a prefix, deleting node sets, dropping outputs and
lifting parameters are all calls to it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.fx as fx

COMPUTE_OPS = ("call_function", "call_method", "call_module")


class Case:
    """A graph (never edited once built), the module its get_attr/call_module
    targets live in, and one input per placeholder.

    The GraphModule (Python code generation) is made on first use of ``gm``: the
    gate rejects many candidates on their graph alone, and with jobs > 1 the code is
    generated in the worker thread that tests the candidate.
    """

    __slots__ = ("root", "graph", "inputs", "_gm", "_key", "_values", "_order", "_lock")

    def __init__(self, root: torch.nn.Module, graph: fx.Graph, inputs: Sequence[Any]) -> None:
        self.root = root
        self.graph = graph
        self.inputs = tuple(inputs)
        self._gm: fx.GraphModule | None = None
        self._key: str | None = None
        self._values: dict[str, Any] | None = None
        self._order: tuple[int, int, int, int] | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, gm: fx.GraphModule, inputs: Sequence[Any]) -> Case:
        case = cls(gm, gm.graph, inputs)
        case._gm = gm
        return case

    @property
    def gm(self) -> fx.GraphModule:
        with self._lock:
            if self._gm is None:
                self._gm = fx.GraphModule(self.root, self.graph)
            return self._gm

    @property
    def size(self) -> int:
        return self.order_key()[0]

    def order_key(self) -> tuple[int, int, int, int]:
        """Smaller is better: compute nodes, then module attributes (parameters and
        buffers read by get_attr: a repro is simpler with them as inputs), inputs,
        outputs."""
        if self._order is None:
            counts = {"placeholder": 0, "get_attr": 0}
            compute = 0
            for n in self.graph.nodes:
                if n.op in COMPUTE_OPS:
                    compute += 1
                elif n.op in counts:
                    counts[n.op] += 1
            self._order = (
                compute,
                counts["get_attr"],
                counts["placeholder"],
                len(output_values(self.graph)),
            )
        return self._order

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = canonical_key(self.graph, self.inputs)
        return self._key


def _graph(g: fx.Graph | fx.GraphModule) -> fx.Graph:
    return g.graph if isinstance(g, fx.GraphModule) else g


def count_compute(g: fx.Graph | fx.GraphModule) -> int:
    return sum(1 for n in _graph(g).nodes if n.op in COMPUTE_OPS)


def compute_nodes(g: fx.Graph | fx.GraphModule) -> list[fx.Node]:
    return [n for n in _graph(g).nodes if n.op in COMPUTE_OPS]


def output_node(g: fx.Graph | fx.GraphModule) -> fx.Node:
    for n in reversed(_graph(g).nodes):
        if n.op == "output":
            return n
    raise ValueError("graph has no output node")


def output_values(g: fx.Graph | fx.GraphModule) -> list[Any]:
    """The flat list of values the graph returns (nodes or constants)."""
    out = output_node(g).args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _meta(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return (
            f"T{tuple(value.shape)}{tuple(value.stride())}{value.dtype}{value.device}"
            f"{int(value.requires_grad)}"
        )
    return f"{type(value).__name__}:{value!r}"[:64]


def canonical_key(g: fx.Graph | fx.GraphModule, inputs: Sequence[Any]) -> str:
    """Same nodes (of the original graph), same structure and targets, same input
    metadata => same key."""
    index: dict[fx.Node, int] = {}
    parts: list[str] = []

    def arg(a: Any) -> str:
        if isinstance(a, fx.Node):
            return f"%{index[a]}"
        if isinstance(a, (tuple, list)):
            return "(" + ",".join(arg(x) for x in a) + ")"
        if isinstance(a, dict):
            return "{" + ",".join(f"{k}:{arg(v)}" for k, v in sorted(a.items())) + "}"
        return repr(a)

    inputs_iter = iter(inputs)
    for i, n in enumerate(_graph(g).nodes):
        index[n] = i
        if n.op == "placeholder":
            parts.append(f"P {n.name} {_meta(next(inputs_iter, None))}")
        else:
            # the name says which node of the original graph this is: two candidates made
            # of different original nodes are different candidates, however alike
            parts.append(f"{n.op} {n.name} {_target_name(n.target)} {arg(n.args)} {arg(n.kwargs)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    mod = getattr(target, "__module__", "") or ""
    return f"{mod}.{name}" if name else str(target)


class _Recorder(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule) -> None:
        super().__init__(gm, garbage_collect_values=False)
        self.values: dict[str, Any] = {}

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        self.values[n.name] = result
        return result


def own_copy(value: Any) -> Any:
    """A private copy of a value (a tensor keeps its layout and requires_grad)."""
    if isinstance(value, torch.Tensor):
        v = value.detach().clone(memory_format=torch.preserve_format)
        if value.requires_grad and v.is_floating_point():
            v.requires_grad_(True)
        return v
    return value


def node_values(case: Case) -> dict[str, Any]:
    """The value of every node in one eager run of ``case`` (computed once, cached)."""
    if case._values is None:
        rec = _Recorder(case.gm)
        args = [own_copy(x) for x in case.inputs]
        # an input that requires grad goes in as a non-leaf, as activations are: a
        # graph may update it in place, which autograd refuses for a leaf
        args = [a.clone() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
        rec.run(*args)
        case._values = {k: own_copy(v) for k, v in rec.values.items()}
    return case._values


def rebuild(
    case: Case,
    *,
    lift: Iterable[str] = (),
    drop: Iterable[str] = (),
    outputs: Sequence[Any] | None = None,
    values: dict[str, Any] | None = None,
) -> Case:
    """A new case from ``case``.

    lift:    names of nodes replaced by placeholders holding their eager value
    drop:    names of nodes removed (only valid when nothing kept uses them)
    outputs: the new flat output list (nodes of ``case`` or constants); default: same
    Dead code and unused placeholders are removed afterwards.
    """
    lift, drop = set(lift), set(drop)
    if lift and values is None:
        values = node_values(case)
    old_inputs = dict(zip([n.name for n in case.graph.nodes if n.op == "placeholder"], case.inputs))
    g = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    new_inputs: list[Any] = []
    wanted_outputs = output_values(case.graph) if outputs is None else list(outputs)
    # placeholders first, in order: existing ones, then lifted nodes (topological order)
    for n in case.graph.nodes:
        if n.op == "placeholder" and n.name not in drop:
            env[n] = g.placeholder(n.name, type_expr=n.type)
            env[n].meta = dict(n.meta)
            new_inputs.append(old_inputs[n.name])
    for n in case.graph.nodes:
        if n.name in lift and n.op != "placeholder":
            p = g.placeholder(n.name)
            p.meta = dict(n.meta)
            env[n] = p
            new_inputs.append(values[n.name])  # type: ignore[index]
    for n in case.graph.nodes:
        if n.op in ("placeholder", "output") or n.name in lift or n.name in drop:
            continue
        missing = [a for a in n.all_input_nodes if a not in env]
        if missing:
            continue  # depends on something dropped: it goes too
        env[n] = g.node_copy(n, lambda a: env[a])
    outs = []
    for v in wanted_outputs:
        if isinstance(v, fx.Node):
            if v in env:
                outs.append(env[v])
        else:
            outs.append(v)
    g.output(tuple(outs))
    # dead code and unused inputs go before the one GraphModule (one recompile)
    _dce(g, case.root)
    new_inputs = _prune_placeholders(g, new_inputs)
    return Case(case.root, g, new_inputs)


# Calls that change process-wide state rather than return a value: a graph captured
# under a functorch transform (jacfwd, vmap, grad) enters and leaves the transform with
# them, and their results are never used.  FX's own dead-code elimination knows only
# some (``_jvp_increment_nesting`` but not ``_vmap_increment_nesting``, not
# ``_set_fwd_grad_enabled``): dropping the entry into a transform while keeping its body
# turns a candidate into another program.
_STATE_CALL_WORDS = ("increment_nesting", "decrement_nesting", "dual_level", "autocast")


def has_effect(n: fx.Node) -> bool:
    """Whether ``n`` must stay even when nothing uses its value: FX's impure nodes,
    in-place updates (``x.fill_(1)``, ``torch.Tensor.add_``) and state changes."""
    if n.op in ("placeholder", "output"):
        return True
    if n.op not in ("call_function", "call_method"):
        return _impure(n)
    name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
    name = str(name or "")
    if name.endswith("_") and not name.endswith("__"):
        return True  # in place: what it updates may be read later, or be an input
    if n.op == "call_function" and (
        any(w in name for w in _STATE_CALL_WORDS) or name.startswith(("_set_", "set_"))
    ):
        return True
    return _impure(n)


def _impure(n: fx.Node) -> bool:
    try:
        return bool(n.is_impure())
    except Exception:  # a target FX cannot judge: keep it
        return True


def _dce(g: fx.Graph, root: torch.nn.Module) -> None:
    """Dead-code elimination that keeps every node with an effect (:func:`has_effect`);
    it asks the module whether call_module is pure."""
    g.owning_module = root
    try:
        g.eliminate_dead_code(is_impure_node=has_effect)
    finally:
        g.owning_module = None


def _prune_placeholders(g: fx.Graph, inputs: list[Any]) -> list[Any]:
    kept = []
    for n, x in zip([n for n in g.nodes if n.op == "placeholder"], inputs):
        if n.users:
            kept.append(x)
        else:
            g.erase_node(n)
    return kept


def eliminate_dead_code(case: Case) -> Case:
    """Remove nodes whose values are never used (side-effecting nodes stay), then the
    inputs nothing uses any more."""
    g = copy_graph(case.graph)
    _dce(g, case.root)
    inputs = _prune_placeholders(g, list(case.inputs))
    return Case(case.root, g, inputs)


def drop_unused_inputs(case: Case) -> Case:
    """Remove placeholders nothing uses, and their inputs (``case`` itself if none)."""
    if all(n.users for n in case.graph.nodes if n.op == "placeholder"):
        return case
    g = copy_graph(case.graph)
    inputs = _prune_placeholders(g, list(case.inputs))
    return Case(case.root, g, inputs)


def copy_graph(graph: fx.Graph) -> fx.Graph:
    """A new graph with the same nodes (the one graph-copy helper of the engine)."""
    g = fx.Graph()
    out = g.graph_copy(graph, {})
    g.output(out)
    return g


def make_case(gm: fx.GraphModule, inputs: Sequence[Any]) -> Case:
    """The starting case: a private copy of ``gm`` (the caller's is never touched)
    with a flat tuple output."""
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(phs) != len(inputs):
        raise ValueError(f"graph has {len(phs)} placeholders but {len(inputs)} inputs were given")
    g = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for n in gm.graph.nodes:
        if n.op == "output":
            out = n.args[0]
            flat = list(out) if isinstance(out, (tuple, list)) else [out]
            g.output(tuple(env[a] if isinstance(a, fx.Node) else a for a in flat))
        else:
            env[n] = g.node_copy(n, lambda a: env[a])
    return Case(gm, g, inputs)

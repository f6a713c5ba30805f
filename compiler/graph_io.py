"""Saving and loading FX graphs between processes, exactly as they are.

``torch.save`` of a GraphModule pickles its *code* and, on load, traces that code
again: any op that does not depend on an input (``torch.linspace(...)``, ``torch.ones``
in a model) runs at load time and comes back as a constant tensor, so a bug in that
op's lowering is gone from the graph the minifier works on.  Here a graph is saved as
its nodes (op, name, target by name, args and kwargs with node references) plus the
attributes it reads (tensors by value, subgraphs of higher-order ops recursively,
other modules as objects), and rebuilt node by node: nothing is traced or run.

Part of the contract both processes share (minifier workers load candidates, the
parent loads the capture); imports torch only when a function runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import io
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, cast

from . import layout

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import torch
    from torch.fx.node import Argument, Target

VERSION = 1


class NodeData(TypedDict):
    """One node of :class:`GraphData`: its target by reference (``_target_ref``), its
    args and kwargs with node references (``_encode``)."""

    op: str
    name: str
    target: tuple[object, ...]
    args: object
    kwargs: object
    stack_trace: str | None


class AttrData(TypedDict, total=False):
    """An attribute a graph reads: one of a subgraph, a parameter (and whether it
    requires grad), a tensor, or any other object."""

    graph: GraphData
    parameter: torch.Tensor
    grad: bool
    tensor: torch.Tensor
    object: object


class GraphData(TypedDict):
    """A graph module as plain data (:func:`to_data`)."""

    version: int
    nodes: list[NodeData]
    attrs: dict[str, AttrData]


@dataclasses.dataclass(frozen=True)
class _NodeRef:
    name: str


@dataclasses.dataclass(frozen=True)
class _TorchConst:
    """A torch constant ``torch.save`` cannot pickle (``torch.contiguous_format`` and the
    other memory formats: "cannot pickle 'module' object"), by its name in torch."""

    name: str


def _target_ref(target: Target) -> tuple[object, ...]:
    import torch

    if isinstance(target, str):
        return ("str", target)
    if isinstance(target, _StandIn):
        return target.ref
    if isinstance(target, torch._ops.OpOverload):
        name = target._schema.name
        return ("overload", name, target._overloadname, _defining_module(name))
    if isinstance(target, torch._ops.OpOverloadPacket):
        name = target._qualified_op_name
        return ("packet", name, "", _defining_module(name))
    if isinstance(target, torch._ops.HigherOrderOperator):
        return ("hop", target.__name__, "", type(target).__module__)
    mod = getattr(target, "__module__", None)
    qual = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if mod and qual and "<" not in qual:
        try:
            if _resolve_fn(mod, qual) is target:
                return ("fn", mod, qual)
        except Exception:
            pass
        if mod.startswith("torch") and hasattr(torch, getattr(target, "__name__", "")):
            if getattr(torch, target.__name__) is target:
                return ("fn", "torch", target.__name__)
    if mod and qual:
        # a function made inside another (torch's boolean_dispatch makes
        # F.adaptive_max_pool2d so): found by the name its module gives it
        found = _module_name_of(mod, target)
        if found:
            return ("fn", mod, found)
    return ("object", target)  # pickled as it is (a user function defined importably)


def _defining_module(qualname: str) -> str | None:
    """The module that defined a custom op (``torch.library.custom_op``), where it is
    importable (not ``__main__``): loading the graph elsewhere imports it."""
    try:
        from torch._library.custom_ops import OPDEFS

        opdef = OPDEFS.get(qualname)
        module = getattr(getattr(opdef, "_init_fn", None), "__module__", None)
    except Exception:  # noqa: BLE001 -- an older torch: no module recorded
        return None
    return module if module and module != "__main__" else None


def _module_name_of(module: str, target: object) -> str | None:
    """The attribute of ``module`` that is ``target`` (its ``__name__`` first)."""
    mod = sys.modules.get(module)
    if mod is None:
        return None
    name = getattr(target, "__name__", "")
    if name and getattr(mod, name, None) is target:
        return name
    return next((k for k, v in vars(mod).items() if v is target and not k.startswith("_")), None)


def _resolve_fn(module: str, qualname: str) -> object:
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


# Op namespaces whose ops exist only once a module of torch's registered them: a
# process that loads a graph (the parent, a fresh worker) may not have imported it
# (``torch.ops.prims.fma`` is registered by torch._prims, which inductor's
# decompositions import in the process that captured the graph).
_REGISTERED_BY = {
    "prims": ("torch._prims", "torch._inductor.inductor_prims"),
    "inductor": ("torch._inductor.inductor_prims",),
    "quantized_decomposed": ("torch.ao.quantization.fx._decomposed",),
    "_c10d_functional": ("torch.distributed._functional_collectives",),
    "c10d_functional": ("torch.distributed._functional_collectives",),
    "_dtensor": ("torch.distributed.tensor",),
    "higher_order": ("torch._higher_order_ops", "torch._dynamo", "torch._inductor.compile_fx"),
}
# where nothing above names the namespace: torch's modules that register ops, in order
_TORCH_REGISTRARS = (
    "torch._prims",
    "torch._inductor.inductor_prims",
    "torch._inductor.decomposition",
    "torch._higher_order_ops",
    "torch.ao.quantization.fx._decomposed",
)


def _op(ns: str, name: str, module: str | None = None) -> Callable[..., object]:
    """``torch.ops.NS.NAME``, importing what registers it where it is not there yet:
    torch's module for its own namespaces, the module that defined a custom op."""
    import torch

    try:
        return getattr(getattr(torch.ops, ns), name)
    except AttributeError:
        pass
    tries = (*_REGISTERED_BY.get(ns, ()), *([module] if module else []), *_TORCH_REGISTRARS)
    for mod in dict.fromkeys(tries):
        try:
            importlib.import_module(mod)
            return getattr(getattr(torch.ops, ns), name)
        except (ImportError, AttributeError):
            continue
    raise UnresolvedOp(f"{ns}::{name}")


class UnresolvedOp(LookupError):
    """An op no module this process can import registers (a custom op defined in the
    program's ``__main__``): the graph loads with a stand-in for it."""


class _StandIn:
    """An op this process cannot resolve, kept by name: the graph's structure is intact
    (a minifier's passes read it), saving it again writes the same reference, and
    calling it says what is missing instead of computing anything."""

    def __init__(self, ref: tuple[str | None, ...]) -> None:
        self.ref = ref
        self.__name__ = str(ref[1]).replace("::", ".")
        self.__qualname__ = self.__name__

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise UnresolvedOp(
            f"{self.ref[1]} is not registered in this process (a custom op whose module "
            "it cannot import)"
        )

    def __repr__(self) -> str:
        return self.__name__ + (f".{self.ref[2] or 'default'}" if self.ref[0] == "overload" else "")


def _resolve_target(ref: tuple[Any, ...]) -> Target:
    import torch

    kind = ref[0]
    if kind == "str":
        return ref[1]
    module = ref[3] if len(ref) > 3 else None
    try:
        if kind == "overload":
            ns, _, op = ref[1].partition("::")
            return getattr(_op(ns, op, module), ref[2] or "default")
        if kind == "packet":
            ns, _, op = ref[1].partition("::")
            return _op(ns, op, module)
        if kind == "hop":
            hops = torch._ops._higher_order_ops
            return hops[ref[1]] if ref[1] in hops else _op("higher_order", ref[1], module)
    except (UnresolvedOp, AttributeError):
        return _StandIn(ref)
    if kind == "fn":
        return cast("Target", _resolve_fn(ref[1], ref[2]))
    return ref[1]


def _encode(value: object, names: Mapping[torch.fx.Node, str]) -> object:
    import torch

    if isinstance(value, torch.fx.Node):
        return _NodeRef(names[value])
    if isinstance(value, torch.memory_format):
        return _TorchConst(str(value).removeprefix("torch."))
    if isinstance(value, tuple):
        return tuple(_encode(v, names) for v in value)
    if isinstance(value, list):
        return [_encode(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _encode(v, names) for k, v in value.items()}
    return value


def _decode(value: object, env: Mapping[str, torch.fx.Node]) -> object:
    if isinstance(value, _NodeRef):
        return env[value.name]
    if isinstance(value, _TorchConst):
        import torch

        return getattr(torch, value.name)
    if isinstance(value, tuple):
        return tuple(_decode(v, env) for v in value)
    if isinstance(value, list):
        return [_decode(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _decode(v, env) for k, v in value.items()}
    return value


def fetch_attr(root: object, target: str) -> object:
    """``root.a.b.c`` for the dotted ``target`` of a ``get_attr`` node."""
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def to_data(gm: torch.fx.GraphModule) -> GraphData:
    """A graph module as plain data (tensors, names, and values pickle can carry)."""
    import torch

    names = {n: n.name for n in gm.graph.nodes}
    nodes: list[NodeData] = []
    attrs: dict[str, AttrData] = {}
    for n in gm.graph.nodes:
        nodes.append(
            {
                "op": n.op,
                "name": n.name,
                "target": _target_ref(n.target),
                "args": _encode(n.args, names),
                "kwargs": _encode(n.kwargs, names),
                "stack_trace": n.meta.get("stack_trace"),
            }
        )
        if n.op in ("get_attr", "call_module") and n.target not in attrs:
            value = fetch_attr(gm, n.target)
            if isinstance(value, torch.fx.GraphModule):
                attrs[n.target] = {"graph": to_data(value)}
            elif isinstance(value, torch.nn.Parameter):
                attrs[n.target] = {"parameter": value.detach(), "grad": value.requires_grad}
            elif isinstance(value, torch.Tensor):
                attrs[n.target] = {"tensor": value}
            else:
                attrs[n.target] = {"object": value}
    return {"version": VERSION, "nodes": nodes, "attrs": attrs}


def from_data(data: GraphData) -> torch.fx.GraphModule:
    """The graph module :func:`to_data` described, rebuilt node by node."""
    import torch

    if data.get("version") != VERSION:
        raise ValueError(f"graph data version {data.get('version')}, expected {VERSION}")
    root = torch.nn.Module()
    target: Target  # an attribute's name here, a node's target below
    for target, spec in data["attrs"].items():
        if "graph" in spec:
            value: object = from_data(spec["graph"])
        elif "parameter" in spec:
            value = torch.nn.Parameter(spec["parameter"], requires_grad=spec["grad"])
        elif "tensor" in spec:
            value = spec["tensor"]
        else:
            value = spec["object"]
        _install(root, target, value)
    g = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for rec in data["nodes"]:
        target = _resolve_target(rec["target"])
        args = cast("tuple[Argument, ...]", _decode(rec["args"], env))
        kwargs = cast("dict[str, Argument]", _decode(rec["kwargs"], env))
        if rec["op"] == "output":
            g.output(args[0])
            continue
        node = g.create_node(rec["op"], target, args, kwargs, name=rec["name"])
        if rec.get("stack_trace"):
            node.meta["stack_trace"] = rec["stack_trace"]
        env[rec["name"]] = node
    return torch.fx.GraphModule(root, g)


def _install(root: torch.nn.Module, target: str, value: object) -> None:
    import torch

    parts = target.split(".")
    owner = root
    for part in parts[:-1]:
        if not hasattr(owner, part):
            owner.add_module(part, torch.nn.Module())
        owner = getattr(owner, part)
    if isinstance(value, torch.nn.Module):
        owner.add_module(parts[-1], value)
    elif isinstance(value, torch.nn.Parameter):
        owner.register_parameter(parts[-1], value)
    elif isinstance(value, torch.Tensor):
        owner.register_buffer(parts[-1], value)
    else:
        setattr(owner, parts[-1], value)


def save_graph(gm: torch.fx.GraphModule, path: str | os.PathLike[str]) -> None:
    """Atomically (a reader never sees half a file)."""
    import torch

    buf = io.BytesIO()
    torch.save(to_data(gm), buf)
    layout.write_file(path, buf.getvalue())


def load_graph(path: str | os.PathLike[str] | io.BytesIO) -> torch.fx.GraphModule:
    """A graph saved by :func:`save_graph` (tcompile's own files: ``weights_only=False``
    for the objects a graph may hold, a module or a user function)."""
    import torch

    return from_data(torch.load(path, weights_only=False))

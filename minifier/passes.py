"""Reduction passes.  Each is a small named function ``(problem, case) -> Case | None``.

Rules for designing a pass (after Hypothesis's "Designing Shrink Passes"):

* A pass only *proposes* candidates, built with :func:`graph.rebuild` from the current
  best case; the problem's gate (engine.Problem) decides whether a candidate is tested:
  candidates that are not smaller, or were tried before, never reach the oracle.
* Where the structure is ordered (a prefix or suffix of the topological order) use the
  problem's binary search: a single culprit costs O(log n) oracle calls.  Where it is
  not, use ddmin over a list of items.
* Return the smallest failing case found, or None.  Never edit ``case``.
* A pass must be deterministic: the same case gives the same candidates in the same
  order, whatever ``jobs`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx as fx

from .ddmin import ddmin
from .graph import (
    Case,
    compute_nodes,
    copy_graph,
    drop_unused_inputs,
    eliminate_dead_code,
    node_values,
    output_node,
    output_values,
    rebuild,
)

if TYPE_CHECKING:
    from .engine import Problem


def _live_after(case: Case, k: int) -> list[fx.Node]:
    """Compute nodes among the first k+1 whose values are used after the cut."""
    nodes = compute_nodes(case.graph)
    prefix = set(nodes[: k + 1])
    live = []
    for n in nodes[: k + 1]:
        if any(u not in prefix for u in n.users):  # a later node or the output uses it
            live.append(n)
    return live


def truncate_suffix(problem: Problem, case: Case) -> Case | None:
    """Make an earlier node the end: output the values live at the cut."""
    nodes = compute_nodes(case.graph)
    n = len(nodes)
    if n <= 1:
        return None

    def candidate(k: int) -> Case | None:
        if k >= n - 1:
            return None
        keep = set(nodes[: k + 1])
        drop = [m.name for m in nodes[k + 1 :]]
        outs = [v for v in _live_after(case, k) if v in keep]
        if not outs:
            return None
        return rebuild(case, drop=drop, outputs=outs)

    # Where an earlier run of this pass already ended the case here, the end rarely
    # moved (the passes since took nodes from the front or the middle): drop-the-last
    # is asked first -- one call, not log2(n), to confirm the end (else one more).
    end = nodes[-1].name
    guesses = [n - 2] if end in problem.ends_found else []
    k = problem.bisect_first_failing(0, n - 1, candidate, "truncate_suffix", guesses)
    problem.ends_found.add(nodes[k].name if k is not None else end)
    return candidate(k) if k is not None else None


def cut_prefix(problem: Problem, case: Case) -> Case | None:
    """Replace everything before a node by placeholders holding concrete values."""
    nodes = compute_nodes(case.graph)
    n = len(nodes)
    if n <= 1:
        return None
    originals = output_values(case.graph)

    def candidate(k: int) -> Case | None:
        # k = number of leading compute nodes to lift/drop; larger is smaller
        if k <= 0 or k >= n:
            return None
        head = nodes[:k]
        tail = set(nodes[k:])
        lift = [m.name for m in head if any(u in tail for u in m.users)]
        drop = [m.name for m in head if m.name not in lift]
        outs = [v for v in originals if not isinstance(v, fx.Node) or v in tail]
        if not any(isinstance(v, fx.Node) for v in outs):
            return None
        return rebuild(case, lift=lift, drop=drop, outputs=outs)

    k = problem.bisect_last_failing(1, n - 1, candidate, "cut_prefix")
    return candidate(k) if k is not None else None


def remove_node_set(case: Case, names: list[str]) -> Case | None:
    """Remove a set of compute nodes, both ways: a kept node that used a removed one
    gets its concrete value as an input; a kept node whose value fed a removed one
    becomes an output (so deleting what follows a culprit does not kill it)."""
    gone = set(names)
    nodes = compute_nodes(case.graph)
    if not gone or len(gone) >= len(nodes):
        return None  # nothing removed, or nothing left to compile
    kept = [m for m in nodes if m.name not in gone]
    lift = sorted({a.name for m in kept for a in m.all_input_nodes if a.name in gone})
    drop = [m.name for m in nodes if m.name in gone and m.name not in lift]
    outs = [v for v in output_values(case.graph) if not (isinstance(v, fx.Node) and v.name in gone)]
    for m in kept:
        if any(u.op != "output" and u.name in gone for u in m.users) and m not in outs:
            outs.append(m)
    if not any(isinstance(v, fx.Node) for v in outs):
        return None
    return rebuild(case, lift=lift, drop=drop, outputs=outs)


def is_chain(case: Case) -> bool:
    """Each compute node feeds at most one compute node and is fed by at most one."""
    nodes = compute_nodes(case.graph)
    members = set(nodes)
    for n in nodes:
        if sum(1 for u in n.users if u in members) > 1:
            return False
        if sum(1 for a in n.all_input_nodes if a in members) > 1:
            return False
    return True


def delete_nodes(problem: Problem, case: Case) -> Case | None:
    """ddmin over compute nodes (see :func:`remove_node_set`).

    Not on a chain: there truncate_suffix and cut_prefix have already found the
    shortest failing window by binary search, and removing a node from its middle
    feeds the rest eager's correct value, which a bug that propagates along the
    chain does not survive -- ddmin would only spend calls proving it."""
    if is_chain(case):
        return None

    def items(c: Case) -> list[str]:
        return [m.name for m in compute_nodes(c.graph)]

    def without(c: Case, names: list[str]) -> Case | None:
        return remove_node_set(c, names)

    return ddmin(problem, case, items, without, "delete_nodes")


def bypass_ops(problem: Problem, case: Case) -> Case | None:
    """Take out every application of one op at once, its users reading the op's input
    instead.  Unlike :func:`remove_node_set` (which feeds the rest eager's value), the
    chain stays connected, so an error made upstream still reaches the ops that
    amplify it, and the ordinary ops between those go.  Only nodes whose value has
    their first input's shape, dtype and device (an elementwise step); one candidate
    per op, most applications first, for ops applied at least 3 times in a graph of at
    least 8 nodes (smaller ones are what truncate, cut and ddmin leave: every op there
    is usually needed, and a candidate would only spend a call proving it)."""
    nodes = compute_nodes(case.graph)
    if len(nodes) < 8:
        return None
    try:
        values = node_values(case)
    except Exception:  # the graph does not run here (a collective, a device): no guesses
        return None
    groups: dict[str, list[str]] = {}
    for n in nodes:
        src = next((a for a in n.args if isinstance(a, fx.Node)), None)
        mine, theirs = values.get(n.name), values.get(src.name) if src is not None else None
        if not isinstance(mine, torch.Tensor) or not isinstance(theirs, torch.Tensor):
            continue
        if (mine.shape, mine.dtype, mine.device) == (theirs.shape, theirs.dtype, theirs.device):
            groups.setdefault(str(n.target), []).append(n.name)
    for members in sorted(groups.values(), key=len, reverse=True):
        if len(members) >= 3 and (found := problem.try_one(bypassed(case, members), "bypass_ops")):
            return found
    return None


def bypassed(case: Case, names: list[str]) -> Case | None:
    """``case`` with these nodes taken out, each one's users reading its first input."""
    g = copy_graph(case.graph)
    gone = set(names)
    for n in list(g.nodes):
        if n.name in gone:
            src = next(a for a in n.args if isinstance(a, fx.Node))
            n.replace_all_uses_with(src)
            g.erase_node(n)
    out = output_node(g)
    if not any(isinstance(v, fx.Node) and v.op != "placeholder" for v in out.all_input_nodes):
        return None  # nothing left to compile
    return eliminate_dead_code(Case(case.root, g, case.inputs))


def drop_outputs(problem: Problem, case: Case) -> Case | None:
    """ddmin over the outputs."""

    def items(c: Case) -> list[str]:
        return [str(i) for i in range(len(output_values(c.graph)))]

    def without(c: Case, names: list[str]) -> Case | None:
        outs = output_values(c.graph)
        gone = {int(i) for i in names}
        keep = [v for i, v in enumerate(outs) if i not in gone]
        if not any(isinstance(v, fx.Node) for v in keep):
            return None
        return rebuild(c, outputs=keep)

    if len(output_values(case.graph)) <= 1:
        return None
    return ddmin(problem, case, items, without, "drop_outputs")


def remove_unused_inputs(problem: Problem, case: Case) -> Case | None:
    cand = drop_unused_inputs(case)
    return problem.try_one(cand, "drop_unused_inputs") if cand is not case else None


def dead_code(problem: Problem, case: Case) -> Case | None:
    cand = eliminate_dead_code(case)
    if cand.order_key() == case.order_key():
        return None
    return problem.try_one(cand, "eliminate_dead_code")


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and a.device == b.device
            and a.stride() == b.stride()
            and a.requires_grad == b.requires_grad
            and bool(torch.equal(a, b))
        )
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return False
    return type(a) is type(b) and a == b


def consolidate_inputs(problem: Problem, case: Case) -> Case | None:
    """Merge placeholders whose inputs are equal (same metadata, same values)."""
    cand = merge_duplicate_inputs(case)
    return problem.try_one(cand, "consolidate_inputs") if cand is not None else None


def merge_duplicate_inputs(case: Case) -> Case | None:
    phs = [n for n in case.graph.nodes if n.op == "placeholder"]
    first: list[tuple[Any, str]] = []
    alias: dict[str, str] = {}
    for n, v in zip(phs, case.inputs):
        for val, name in first:
            if _same_value(val, v):
                alias[n.name] = name
                break
        else:
            first.append((v, n.name))
    if not alias:
        return None
    g = copy_graph(case.graph)
    by_name = {n.name: n for n in g.nodes}
    for dup, orig in alias.items():
        by_name[dup].replace_all_uses_with(by_name[orig])
    return drop_unused_inputs(Case(case.root, g, case.inputs))


def params_to_inputs(problem: Problem, case: Case) -> Case | None:
    """Turn parameters and buffers (get_attr nodes) into inputs."""
    cand = lift_attributes(case)
    return problem.try_one(cand, "params_to_inputs") if cand is not None else None


def lift_attributes(case: Case) -> Case | None:
    """Tensor attributes become inputs; a subgraph of a higher-order op (``cond``,
    ``while_loop``: a GraphModule read by get_attr) stays an attribute -- as an input
    it is an object no repro can build."""
    attrs = [
        n.name
        for n in case.graph.nodes
        if n.op == "get_attr" and isinstance(_attribute(case.root, n.target), torch.Tensor)
    ]
    if not attrs:
        return None
    return rebuild(case, lift=attrs)


def _attribute(root: torch.nn.Module, target: Any) -> Any:
    obj: Any = root
    for part in str(target).split("."):
        obj = getattr(obj, part, None)
    return obj


PassFn = Callable[["Problem", Case], "Case | None"]

#: The schedule is data: run in this order, loop to a fixed point.
DEFAULT_SCHEDULE: tuple[PassFn, ...] = (
    truncate_suffix,
    cut_prefix,
    delete_nodes,
    bypass_ops,
    drop_outputs,
    consolidate_inputs,
    params_to_inputs,
    remove_unused_inputs,
    dead_code,
)

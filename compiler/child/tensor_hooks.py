"""A gradient hook that does not run under compile as it runs in eager (issue 63).

``y.register_hook(h)`` on a tensor a compiled graph returned: eager calls ``h`` with
the whole gradient of ``y``, including what flows into it from the graph's other
outputs computed from ``y`` (``z = f(y)``, returned beside it).  Under compile those
flow inside the graph's one backward node (AOTAutograd's compiled function): ``h``
sees only the gradient that comes into ``y`` from outside the graph, or never runs
(#91468: the hook's scaling of the gradient is lost, the gradient is wrong).  The
compiled graph itself is right, so no check of its values can see it.

The rule is exact, not a heuristic: at the backward node's pre-hook, a gradient
arriving for an output that depends on ``y`` *in the captured graph* is one eager
would have passed through ``h``.  Nothing is judged when no hook is registered on a
compiled output: the cost is one weak reference per tensor output of each call.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import TYPE_CHECKING, Any

from ..owners import Owner, owner
from ..signature import FailureKind, FailureSignature
from .graphs import output_args, untraced
from .numerics import source_of_trace

if TYPE_CHECKING:
    from types import FrameType

    import torch
    from torch.autograd.graph import Node
    from torch.utils.hooks import RemovableHandle

    from .runners import GraphRunner
    from .session import Session


class HookWatch:
    """Installed by the session: ``torch.Tensor.register_hook`` watched; a graph whose
    outputs are computed from one another gets, at each call under grad, tcompile's own
    hook on each such output -- registered before any of the program's, in reverse
    order of the graph (an output's dependents first: autograd calls a node's tensor
    hooks in the order their tensors got their first hook) -- that notes which
    gradients arrived and, on an output the program hooked, judges."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._dependents: dict[int, dict[int, set[int]]] = {}
        self._said: set[tuple[str, str, str]] = set()
        # id(tensor) -> (tensor ref, graph, output, [(name, defined, where)]): the
        # program's hooks on outputs of the last calls
        self.hooked: dict[
            int, tuple[weakref.ref[object], GraphRunner, int, list[tuple[str, str, str]]]
        ] = {}
        # id(tensor) -> (ref, i, runner)
        self._outputs: dict[int, tuple[weakref.ref[object], int, GraphRunner]] = {}
        self._register: Any = None
        _install(self)

    def ran(self, runner: GraphRunner, out: object) -> None:
        """A call of ``runner``'s compiled graph returned ``out``."""
        import torch

        deps = self.dependents(runner)
        if not deps or not torch.is_grad_enabled():
            return  # no output computed from another: nothing can be bypassed
        outs = out if isinstance(out, (list, tuple)) else [out]

        def node(k: int) -> Node | None:
            t = outs[k] if k < len(outs) else None
            return t.grad_fn if isinstance(t, torch.Tensor) else None

        # only gradients that meet inside one backward node (AOTAutograd's compiled
        # function) bypass a hook: with the eager backend, or an output that is a view
        # made outside the graph, they flow through the source's own node as in eager
        local = {
            i: {j for j in js if node(j) is not None and node(j) is node(i)}
            for i, js in deps.items()
        }
        local = {i: js for i, js in local.items() if js}
        if not local:
            return
        involved = set(local) | {j for js in local.values() for j in js}
        arrived: set[int] = set()
        self._outputs = {k: v for k, v in self._outputs.items() if v[0]() is not None}
        self.hooked = {k: v for k, v in self.hooked.items() if v[0]() is not None}
        for k in sorted(involved, reverse=True):  # dependents before their sources
            t = outs[k]
            self._outputs[id(t)] = (weakref.ref(t), k, runner)
            hook = functools.partial(_noted, self, runner, k, arrived, local.get(k, set()), id(t))
            # torch.save of the tensor says nothing of tcompile's hook (it would warn that
            # a backward hook is not serialized: a line the program never printed)
            self._register(t, torch.utils.hooks.unserializable_hook(hook))

    def registered(self, tensor: torch.Tensor, hook: object, frame: FrameType) -> None:
        """The program hooked ``tensor``: remembered if a graph's call returned it."""
        found = self._outputs.get(id(tensor))
        if found is None or found[0]() is not tensor:
            return
        _, i, runner = found
        name = getattr(hook, "__qualname__", None) or type(hook).__name__
        code = getattr(hook, "__code__", None)
        defined = f" (defined at {code.co_filename}:{code.co_firstlineno})" if code else ""
        entry = self.hooked.get(id(tensor))
        if entry is None or entry[0]() is not tensor:  # a dead tensor's id, reused
            entry = self.hooked[id(tensor)] = (found[0], runner, i, [])
        entry[3].append((name, defined, _user_frame(frame)))

    def judge(
        self, runner: GraphRunner, k: int, arrived: set[int], deps: set[int], key: int
    ) -> None:
        entry = self.hooked.get(key)
        if entry is None or entry[0]() is None or entry[1] is not runner:
            return
        if not arrived & deps:
            return  # no gradient of its dependents: eager's hook sees the same
        for name, defined, where in entry[3]:
            self._say(runner, k, name, defined, where, _source_of(runner, k))

    def dependents(self, runner: GraphRunner) -> dict[int, set[int]]:
        """Output index -> the other outputs computed from it, in the captured graph."""
        cached = self._dependents.get(runner.index)
        if cached is not None:
            return cached
        outs = output_args(runner.reference)
        ancestors: dict[object, set[object]] = {}  # node -> the nodes it is computed from
        for n in runner.reference.graph.nodes:
            seen: set[object] = set()
            for a in n.all_input_nodes:
                seen.add(a)
                seen |= ancestors.get(a, set())
            ancestors[n] = seen
        result: dict[int, set[int]] = {}
        for i, a in enumerate(outs):
            for j, b in enumerate(outs):
                if i != j and hasattr(b, "op") and a in ancestors.get(b, set()):
                    result.setdefault(i, set()).add(j)
        self._dependents[runner.index] = result
        return result

    def _say(
        self, runner: GraphRunner, i: int, name: str, defined: str, where: str, source: str
    ) -> None:
        key = (name, defined, where)  # once per hook: a graph compiled again bypasses it too
        if key in self._said:
            return
        self._said.add(key)
        what = f"output {i} of graph {runner.index}" + (f" ({source})" if source else "")
        message = (
            f"the hook {name}{defined} registered at {where or 'an unknown line'} on {what} "
            f"does not run as in eager: the gradient of graph {runner.index}'s outputs "
            "computed from it flows inside the graph's compiled backward: the hook does not "
            "see it (eager passes it through the hook)"
        )
        self.session.failure(
            graph=runner.index,
            graph_kind="backward",
            kind=FailureKind.HOOK,
            stage=runner.stage,
            signature=FailureSignature(
                stage=runner.stage,
                kind=FailureKind.HOOK.value,
                exc_type="HookBypassed",
                message=f"{name} on output {i} of graph {runner.index}",
                frame=where,
            ),
            message=message,
        )


def _noted_impl(
    watch: HookWatch,
    runner: GraphRunner,
    k: int,
    arrived: set[int],
    deps: set[int],
    key: int,
    grad: torch.Tensor | None,
) -> None:
    """tcompile's hook on output ``k`` of one call: its gradient arrived; judged if the
    program hooked it.  It returns None: no gradient changes."""
    try:
        if grad is not None:
            arrived.add(k)
        watch.judge(runner, k, arrived, deps, key)
    except Exception:  # watching never changes what the program does
        pass


_noted = untraced(_noted_impl)


def _install(watch: HookWatch) -> None:
    import torch

    original = torch.Tensor.register_hook
    if getattr(original, "_tcompile_watch", None) is not None:
        original._tcompile_watch[0] = watch  # type: ignore[attr-defined]
        watch._register = original._tcompile_original  # type: ignore[attr-defined]
        return
    current = [watch]
    watch._register = original

    def register_hook(self: torch.Tensor, hook: object) -> RemovableHandle:
        caller = sys._getframe(1).f_code.co_filename
        # the program's hooks only (tcompile's own checks register theirs too); anything
        # torch would refuse gets torch's own error, unchanged
        if self.requires_grad and callable(hook) and owner(caller) is not Owner.TCOMPILE:
            try:
                current[0].registered(self, hook, sys._getframe(1))
            except Exception:  # watching never changes what the program does
                pass
        return original(self, hook)

    register_hook._tcompile_watch = current  # type: ignore[attr-defined]
    register_hook._tcompile_original = original  # type: ignore[attr-defined]
    register_hook.__doc__ = original.__doc__
    torch.Tensor.register_hook = register_hook  # type: ignore[method-assign]


_RESUME = "torch_dynamo_resume_in_"


def _user_frame(frame: FrameType | None) -> str:
    """The program's innermost frame; Dynamo's resume function of ``f`` (the code after
    a graph break) as ``f``, where the line it runs under Dynamo is not the source's."""
    from ..owners import is_user

    f = frame
    while f is not None:
        code = f.f_code
        if is_user(code.co_filename):
            name = code.co_name
            if name.startswith(_RESUME):
                fn, _, line = name[len(_RESUME) :].rpartition("_at_")
                return f"{code.co_filename} in {fn}, after its graph break at line {line}"
            return f"{code.co_filename}:{f.f_lineno} in {name}"
        f = f.f_back
    return ""


def _source_of(runner: GraphRunner, i: int) -> str:
    """The program's line that made output ``i`` (its node's stack trace)."""
    outs = output_args(runner.reference)
    node = outs[i] if i < len(outs) else None
    return source_of_trace(str(getattr(node, "meta", {}).get("stack_trace") or ""))

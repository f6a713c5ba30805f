"""Checking a graph by watching the program's own call (DESIGN.md mechanism 11).

A check must not change what it checks.  The accuracy check of a graph therefore
never calls the compiled graph itself: it watches the call the program makes.

Forward: before the call, an exact snapshot of its inputs (snapshot.py: strides,
storage offsets, aliasing, requires_grad) and the RNG state.  The program's call runs
as it would, and its real outputs, and the inputs it updated in place, are what is
judged.  The references (eager twice, to tell a nondeterministic graph, and float64)
run on fresh copies of the snapshot, from the RNG state the call started from, in the
call's own ambient state (it is still in force: autocast, grad mode, default dtype);
the RNG state the call left is restored after them, so the program's sequence of
random numbers is the one it would have had.

Backward: the gradients the program's own backward computes for the graph's inputs,
seen by hooks on autograd's nodes (a node that consumes a graph input's gradient edge
reports what it sends there), and the gradients the program sent into the graph's
outputs (tensor hooks: the tangents).  At the end of that backward pass (an engine
callback) the reference recomputes: eager's forward on the snapshot *in the ambient
state the forward ran in* (an outer ``torch.autocast`` included), then its backward
with the same tangents *in the state the program's backward runs in* -- where autocast
is usually off.  A check that took gradients inside the forward call (as tcompile's
first check did) ran eager's backward under the forward's autocast and agreed with a
compiled backward that wrongly computes in bfloat16.

Nothing here may raise into the program: a check that cannot run says so in a note.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, cast

import torch

from .. import accuracy, float64
from ..accuracy import AccuracyMode
from ..signature import FailureKind
from ..snapshot import Snapshot, changed
from .graphs import untraced

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from torch.autograd.graph import Node
    from torch.utils.hooks import RemovableHandle

    from .runners import GraphRunner

    # an autograd node's gradients, as a backward hook gets them (None: undefined)
    _Grads = tuple[torch.Tensor | None, ...]

_DEVICES = ("cpu", "cuda")
MAX_NODES = 200_000  # autograd nodes walked to find where a graph's input gradients go


class Ambient:
    """The state a call ran in outside its graph: autocast per device type, grad mode,
    default dtype.  ``enter()`` puts it back (for the reference's forward)."""

    def __init__(self) -> None:
        self.autocast: list[tuple[str, bool, torch.dtype | None]] = []
        for dev in _DEVICES:
            try:
                on = torch.is_autocast_enabled(dev)
                self.autocast.append((dev, on, torch.get_autocast_dtype(dev) if on else None))
            except (RuntimeError, TypeError, AttributeError):
                continue
        try:
            self.cache = torch.is_autocast_cache_enabled()
        except AttributeError:
            self.cache = True
        self.grad = torch.is_grad_enabled()
        self.default_dtype = torch.get_default_dtype()

    @contextlib.contextmanager
    def enter(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for dev, on, dtype in self.autocast:
                if on:
                    stack.enter_context(
                        torch.autocast(dev, dtype=dtype, enabled=True, cache_enabled=self.cache)
                    )
                else:
                    stack.enter_context(torch.autocast(dev, enabled=False))
            stack.enter_context(torch.set_grad_enabled(self.grad))
            old = torch.get_default_dtype()
            torch.set_default_dtype(self.default_dtype)
            stack.callback(torch.set_default_dtype, old)
            yield

    @staticmethod
    @contextlib.contextmanager
    def outside() -> Iterator[None]:
        """Autocast off on every device: where a program's backward runs (torch's advice:
        autocast wraps the forward only)."""
        with contextlib.ExitStack() as stack:
            for dev in _DEVICES:
                stack.enter_context(torch.autocast(dev, enabled=False))
            yield

    def coarse(self) -> torch.dtype | None:
        """The lower precision of the autocast in force, if any."""
        return next((d for _, on, d in self.autocast if on), None)

    def to_json(self) -> list[list[str]]:
        """The autocasts in force, as a repro restates them: [[device, dtype], ...]."""
        return [[dev, str(d)] for dev, on, d in self.autocast if on]

    def describe(self) -> str:
        on = [
            f"autocast({dev}, {str(dtype).replace('torch.', '')})"
            for dev, o, dtype in self.autocast
            if o
        ]
        return ", ".join(on)


class Watch:
    """One checked call of one graph (see the module docstring)."""

    def __init__(self, runner: GraphRunner, args: list[object]) -> None:
        self.runner = runner
        self.session = runner.session
        self.strict = self.session.config.accuracy == AccuracyMode.STRICT
        self.snap = Snapshot(args)
        self.before = self.snap.materialize(grads=False)[0]
        self.rng = accuracy.RngState()
        self.eager_error: BaseException | None = None  # eager raised on the call's inputs
        self.ambient = Ambient()
        self.judged_backward = False
        self._roundings: dict[str, torch.dtype] | None = None

    def roundings(self) -> dict[str, torch.dtype]:
        """Under an outer autocast: the values its policy rounds (accuracy.to_float64)."""
        if self._roundings is None:
            self._roundings = {}
            if self.ambient.describe():
                try:
                    self._roundings = float64.autocast_roundings(
                        self.runner.reference, self.snap, self.ambient.enter
                    )
                except Exception:
                    pass
        return self._roundings

    # -- forward ----------------------------------------------------------------------

    def forward(self, out: object, args: list[object]) -> None:
        """Judge the program's call: its outputs and the inputs it updated."""
        try:
            self._forward(out, args)
        except Exception as exc:  # the check, never the program
            self.session.note(
                self.runner.index,
                f"the accuracy check of this graph could not run ({type(exc).__name__}: "
                f"{str(exc)[:200]}, at {_where(exc)}); the program's call was not affected",
            )

    def _forward(self, out: object, args: list[object]) -> None:
        runner = self.runner
        outputs = accuracy.flatten(out)
        res = accuracy.Outcome(
            [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs],
            [],
            {
                i: (b, a.detach())
                for i, (b, a) in enumerate(zip(self.before, args))
                if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and changed(b, a)
            },
        )
        after = accuracy.RngState()
        try:
            ref = self._reference(forward_only=True)
            if ref is None:
                if self.eager_error is not None:
                    self._missing_error(self.eager_error)
                return
            fp64 = None
            if not self.strict:
                self.rng.restore()
                fp64 = float64.float64_outcome(
                    runner.reference, self.snap, tangents=[], roundings=self.roundings()
                )
        finally:
            after.restore()  # the program goes on from where its own call left the RNG
        if self._verdict(ref, res, fp64):
            return  # the backward of a wrong forward differs too: not another failure
        if runner.quarantined:
            return
        if torch.is_grad_enabled() and self.snap.grad_inputs() and not runner.collective:
            self._watch_backward(outputs, args)

    def _reference(
        self, forward_only: bool, tangents: list[torch.Tensor | None] | None = None
    ) -> accuracy.Outcome | None:
        """Eager's outcome on the snapshot, twice from the call's RNG state; None when it
        cannot be judged (eager raises: the program's own error; or nondeterministic)."""
        runner = self.runner
        runs = []
        try:
            for _ in range(2):
                self.rng.restore()
                runs.append(self._run(runner.reference, None, [] if forward_only else tangents))
        except Exception as exc:
            if forward_only and not runs:  # eager raises on the call's own inputs
                self.eager_error = exc
            return None
        if not accuracy.outcomes_identical(runs[0], runs[1]):
            self.session.note(
                runner.index,
                "nondeterministic reference: two eager runs from the same RNG state differ; "
                "accuracy not judged for this graph",
            )
            return None
        return runs[0]

    def _missing_error(self, exc: BaseException) -> None:
        """The compiled graph returned where eager raises on the same inputs (the program
        got a tensor where eager's call would have failed): a failure of this graph,
        the error that should have been raised its identity (issue 63)."""
        from ..signature import FailureKind, missing_error, root_cause

        runner = self.runner
        real = root_cause(exc)
        self.session.failure(
            graph=runner.index,
            graph_kind=runner.forward_kind,
            kind=FailureKind.MISSING_ERROR,
            stage=runner.stage,
            signature=missing_error(runner.stage, exc),
            message=f"eager raises {type(real).__name__}: {str(real).strip()[:300]} on this "
            "call's inputs; the compiled graph returned instead",
        )

    def _run(
        self,
        fn: Callable[..., object],
        dtype: torch.dtype | None,
        tangents: list[torch.Tensor | None] | None,
    ) -> accuracy.Outcome:
        return accuracy.run_with_grads(
            fn, self.snap, dtype, tangents=tangents, forward_context=self.ambient.enter
        )

    def _verdict(
        self, ref: accuracy.Outcome, res: accuracy.Outcome, fp64: accuracy.Outcome | None
    ) -> bool:
        """Judge; True when the values are wrong (said as a failure)."""
        runner = self.runner
        # the autocast's lower precision (accuracy.compare_tensor)
        coarse = self.ambient.coarse() if self.roundings() else None
        verdict = accuracy.judge_outcomes(
            ref,
            res,
            fp64,
            strict=self.strict,
            stage=runner.stage,
            forward_kind=runner.forward_kind,
            coarse=coarse,
        )
        if verdict is None:
            if not self.strict:
                runner._note_more_precise(ref, res, fp64)
            return False
        sig, mismatch = verdict
        message = str(mismatch)
        state = self.ambient.describe()
        if state:
            message += f" (the call ran under {state})"
        kind = accuracy.graph_kind_of(mismatch, runner.forward_kind)
        # a gradient: the node whose backward goes wrong first (prefixes with backward)
        extra = runner.localize(self, grads=kind == "backward")
        self.session.failure(
            graph=runner.index,
            graph_kind=kind,
            kind=FailureKind.ACCURACY,
            stage=runner.stage,
            signature=sig,
            message=message,
            **extra,
        )
        runner.capture_pending(self.snap.values(), self.ambient)  # this call's inputs
        return True

    # -- backward ---------------------------------------------------------------------

    def _watch_backward(self, outputs: list[object], args: list[object]) -> None:
        """Hooks that see the program's backward through this call's graph."""
        grad_inputs = self.snap.grad_inputs()
        edges: dict[tuple[int, int], int] = {}
        self._keep: list[Node] = []  # the nodes whose ids are keys: alive while we watch
        for i in grad_inputs:
            # (an input that requires grad: a tensor)
            edge = torch.autograd.graph.get_gradient_edge(cast("torch.Tensor", args[i]))
            self._keep.append(edge.node)
            edges[(id(edge.node), edge.output_nr)] = i
        self.tangents: dict[int, torch.Tensor] = {}
        self.grads: dict[int, torch.Tensor] = {}
        self.handles: list[RemovableHandle] = []
        diff = [
            (j, o)
            for j, o in enumerate(outputs)
            if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None
        ]
        for j, o in diff:
            edge = torch.autograd.graph.get_gradient_edge(o)
            if (id(edge.node), edge.output_nr) in edges:
                return  # an output that is an input: its gradient is not the graph's alone
            self.handles.append(o.register_hook(untraced(self._tangent_hook(j))))
        if diff and self.session.config.localize:  # its backward graph's inputs, if wrong
            self.session.watch_backward.add(self.runner.index)
        seen: set[int] = set()
        todo = [o.grad_fn for _, o in diff]
        while todo and len(seen) < MAX_NODES:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            self._keep.append(node)
            for k, (nxt, nr) in enumerate(node.next_functions):
                if nxt is None:
                    continue
                i = edges.get((id(nxt), nr))
                if i is not None:
                    self.handles.append(node.register_hook(untraced(self._grad_hook(k, i))))
                else:
                    todo.append(nxt)

    def _tangent_hook(self, j: int) -> Callable[[torch.Tensor | None], None]:
        def hook(grad: torch.Tensor | None) -> None:
            # autograd may hand a tensor hook None (an output whose gradient is
            # undefined: seen on GPT-2's unused outputs); and a hook must never raise
            # into the program's backward (issue 38: it did, and the program died)
            if self.judged_backward or grad is None:
                return
            try:
                # a copy: autograd may reuse the buffer it handed the hook and write
                # into it afterwards (torch.cond's backward did: the check judged the
                # program's right gradient against eager's under a changed tangent)
                self.tangents[j] = grad.detach().clone()
                if not getattr(self, "_queued", False):
                    self._queued = True
                    torch.autograd.Variable._execution_engine.queue_callback(
                        untraced(self._backward_done)
                    )
            except Exception as exc:
                self._hook_failed(exc)

        return hook

    def _grad_hook(self, k: int, i: int) -> Callable[[_Grads, _Grads], None]:
        def hook(grad_inputs: _Grads, grad_outputs: _Grads) -> None:
            if self.judged_backward or k >= len(grad_inputs) or grad_inputs[k] is None:
                return
            try:
                # a copy, as for the tangents (of a gradient that is not None: see above)
                g = cast("torch.Tensor", grad_inputs[k]).detach().clone()
                self.grads[i] = g if i not in self.grads else self.grads[i] + g
            except Exception as exc:
                self._hook_failed(exc)

        return hook

    def _hook_failed(self, exc: BaseException) -> None:
        """A hook of the check failed: the gradient check is dropped, the program's
        backward goes on untouched."""
        self.judged_backward = True
        for h in self.handles:
            h.remove()
        self.session.note(
            self.runner.index,
            f"the gradient check of this graph could not run ({type(exc).__name__}: "
            f"{str(exc)[:200]}); the program's backward was not affected",
        )

    def _backward_done(self) -> None:
        """End of the program's backward pass: judge the gradients it computed."""
        if self.judged_backward:
            return
        self.judged_backward = True
        for h in self.handles:
            h.remove()
        try:
            self._judge_backward()
        except Exception as exc:  # the check, never the program
            self.session.note(
                self.runner.index,
                f"the gradient check of this graph could not run ({type(exc).__name__}: "
                f"{str(exc)[:200]}, at {_where(exc)}); the program's backward was not affected",
            )
        finally:
            self._keep = []
            self.session.backward_calls.pop(self.runner.index, None)  # judged: not kept

    def _judge_backward(self) -> None:
        if not self.grads or not self.tangents:
            return
        n = max(self.tangents) + 1
        tangents = [self.tangents.get(j) for j in range(n)]
        order = self.snap.grad_inputs()
        now = accuracy.RngState()
        try:
            with torch.enable_grad():
                ref = self._reference(forward_only=False, tangents=tangents)
                if ref is None:
                    return
                fp64 = None
                if not self.strict:
                    self.rng.restore()
                    fp64 = float64.float64_outcome(
                        self.runner.reference,
                        self.snap,
                        tangents=tangents,
                        forward_context=self.ambient.enter,
                        roundings=self.roundings(),
                    )
        finally:
            now.restore()
        keep = [i in self.grads for i in order]  # the inputs the program's backward reached
        ref_grads = [g if k else None for g, k in zip(ref.grads, keep)]
        res_grads = [self.grads.get(i) for i in order]
        for k, (a, b) in enumerate(zip(ref_grads, res_grads)):
            if a is None and b is not None and not bool(b.any()):
                res_grads[k] = None  # a zero gradient where eager has none: the same
        res = accuracy.Outcome([], res_grads)
        ref = accuracy.Outcome([], ref_grads)
        if fp64 is not None:
            fp64 = accuracy.Outcome([], [g if k else None for g, k in zip(fp64.grads, keep)])
        self._verdict(ref, res, fp64)


def _where(exc: BaseException) -> str:
    """Where a check failed: its innermost frames (file:line in function), for a note
    that someone can act on (a check that cannot run is tcompile's problem to fix)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    return " <- ".join(
        f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in reversed(frames)
    )

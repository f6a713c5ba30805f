"""What runs in place of compiled graphs, and the AOT-level compile hooks.

:class:`GraphRunner` is what Dynamo calls for a Dynamo graph: it runs the compiled
graph, re-runs eagerly on a runtime error (a compiler failure only if eager passes),
checks the first calls under ``--accuracy``, and quarantines a graph that failed (it
runs eagerly from then on).  :class:`AotHooks` wraps each forward / backward /
inference compile of one Dynamo graph; a backward graph runs in a
:class:`_BackwardRunner` that falls back to the eager copy kept before compilation.
In a minifier worker, the graph being minified *serves* at its first call (serve.py).
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any, NoReturn, cast

import torch

from .. import accuracy
from ..accuracy import AccuracyMode
from ..cause import same_kind
from ..protocol import MORE_PRECISE, Event
from ..signature import FailureKind, cuda_fatal_message, first_lines
from .graphs import count_compute, fresh_copy, has_collectives, in_distributed_job
from .graphs import fake_call as _fake
from .recorder import PHASE_CHECK, PHASE_COMPILE, PHASE_IDLE, PHASE_RUN, serves
from .session import Session, is_dynamo_exception
from .subsystems import compiling

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from torch.fx import GraphModule

    from ..accuracy import Outcome
    from . import graphs, numerics, observe, session
    from .backend import TcompileBackend
    from .build import CompiledFn


class AotHooks:
    """Wraps each AOT-level compile of one Dynamo graph (see build.AotHooks)."""

    def __init__(self, session: Session, index: int, stage: str, backend: Any = None) -> None:
        self.session = session
        self.index = index
        self.stage = stage
        self.backend = backend
        self.failed_kind: str | None = None
        self.kinds: list[str] = []
        self.inner_seconds = 0.0  # AOT-level compiles (inductor's compile_fx_inner) so far

    def compile(
        self,
        kind: str,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[object],
        real_compile: Callable[..., CompiledFn],
        **kwargs: object,
    ) -> CompiledFn:
        rec = self.session.recorder
        nodes = count_compute(gm)
        serve = self.session.config.serve
        if (
            serves(serve, self.index, "aot")
            and serve is not None
            and serve.graph_kind in (None, kind)
        ):
            # a minifier worker at the AOT level: no compile; stop at the first call of
            # this graph and judge candidates there, with its real inputs
            return _AotServer(self, fresh_copy(gm, strip_trace_meta=False), kind)
        # Backward graphs are compiled lazily, during loss.backward(): keep an eager
        # copy to fall back on, taken before the compiler's passes edit the graph.
        keep = copy.deepcopy(gm) if kind == "backward" else None
        if kind == "forward" and self.session.config.localize:
            # the user's line of each forward op, by its autograd sequence number: a
            # wrong backward node is named by the forward op it differentiates
            self.session.forward_traces[self.index] = {
                n.meta["seq_nr"]: n.meta["stack_trace"]
                for n in gm.graph.nodes
                if n.meta.get("seq_nr") is not None and n.meta.get("stack_trace")
            }
        rec.mark(self.index, PHASE_COMPILE, kind)
        t0 = time.perf_counter()

        def emit(failed: bool) -> float:
            seconds = time.perf_counter() - t0
            rec.emit(
                Event.AOT_GRAPH,
                index=self.index,
                kind=kind,
                nodes=nodes,
                stage=self.stage,
                compile_seconds=seconds,
                failed=failed,
            )
            return seconds

        try:
            with (
                _debug_artifacts(self.session.config.debug_dir, self.index, kind),
                compiling(self.index),
            ):
                compiled = real_compile(gm, example_inputs, **kwargs)
        except Exception as exc:
            emit(failed=True)
            if keep is None:
                self.failed_kind = kind
                raise
            self.session.failure(
                graph=self.index,
                graph_kind=kind,
                kind=FailureKind.COMPILE,
                stage=self.stage,
                exc=exc,
            )
            return _boxed_eager(keep)
        finally:
            rec.mark(-1, PHASE_IDLE)
        self.inner_seconds += emit(failed=False)
        self.kinds.append(kind)
        if keep is not None:
            return _BackwardRunner(self.session, self.index, self.stage, compiled, keep)
        try:  # autograd's errors in this graph's backward name it (session.backward_graph_of)
            compiled._tcompile_graph = self.index  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass
        return compiled


class _AotServer:
    """Stands in for the AOT graph being minified: serves at its first call."""

    _boxed_call = True

    def __init__(self, hooks: AotHooks, gm: torch.fx.GraphModule, kind: str) -> None:
        self.hooks = hooks
        self.reference = gm
        self.kind = kind

    def __call__(self, *call_args: object) -> NoReturn:
        from .serve import serve

        hooks = self.hooks
        serve(
            hooks.session.config,
            self.reference,
            [a.detach() if isinstance(a, torch.Tensor) else a for a in _unbox(call_args)],
            index=hooks.index,
            stage=hooks.stage,
            forward_kind=self.kind,
            spec=hooks.backend.spec(),
            level="aot",
            recorder=hooks.session.recorder,
        )


def _debug_artifacts(debug_dir: str | None, index: int, kind: str) -> Any:
    """inductor's debug trace for this AOT graph, in DIR/graph-NNN-kind/."""
    import contextlib
    import os

    import torch._inductor.config as inductor_config

    if not debug_dir:
        return contextlib.nullcontext()
    where = os.path.join(debug_dir, f"graph-{index:03d}-{kind}")
    return inductor_config.patch({"trace.enabled": True, "trace.debug_dir": where})


def _unbox(call_args: tuple[object, ...]) -> list[object]:
    """AOTAutograd calls compiled graphs boxed (one list) or not, depending on the path."""
    if len(call_args) == 1 and type(call_args[0]) is list:
        return call_args[0]
    return list(call_args)


def _boxed_eager(gm: torch.fx.GraphModule) -> CompiledFn:
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def _call(fn: CompiledFn, args: list[object]) -> object:
    return fn(list(args)) if getattr(fn, "_boxed_call", False) else fn(*args)


_CACHE_FIELDS = ("_fx_graph_cache_key", "_fx_graph_cache_debug_lines", "guards_expr")


class _BackwardRunner:
    """Runs a compiled backward graph; a runtime error falls back to the eager graph."""

    _boxed_call = True

    def __init__(
        self, session: Session, index: int, stage: str, compiled: CompiledFn, eager_gm: GraphModule
    ) -> None:
        self.session, self.index, self.stage = session, index, stage
        # on the instance too: torch._dynamo.disable's functools.wraps copies the instance's
        # __dict__ only -- else AOTAutograd calls it unboxed and warns the user (issue 40)
        self._boxed_call = True
        self.compiled = compiled
        self.eager_gm = eager_gm
        self.eager = _boxed_eager(eager_gm)
        self.quarantined = False
        self.collective = in_distributed_job() and has_collectives(eager_gm)  # see GraphRunner
        # AOTAutogradCache saves a training graph by these: else its bugs never show (#194976)
        for name in _CACHE_FIELDS:
            if hasattr(compiled, name):
                setattr(self, name, getattr(compiled, name))

    def __call__(self, *call_args: object) -> object:
        # AOTAutograd calls backward compilers' results boxed or not, depending on
        # the path: accept both.
        args = _unbox(call_args)
        if self.quarantined:
            return self.eager(args)
        saved = list(args)
        if self.index in self.session.watch_backward:  # a check watches this backward
            self.session.watch_backward.discard(self.index)
            self.session.backward_calls[self.index] = (
                self.eager_gm,
                [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args],
            )
        rec = self.session.recorder
        rec.note_site()
        rec.mark(self.index, PHASE_RUN, "backward")
        try:
            return _call(self.compiled, args)
        except Exception as exc:
            # the CUDA context is dead: eager cannot run; or the graph talks to other
            # ranks: re-running it on this rank alone would hang them
            fatal = cuda_fatal_message(exc) or self.collective
            result = None if fatal else self.eager(list(saved))  # eager raising: not ours
            self.session.failure(
                graph=self.index,
                graph_kind="backward",
                kind=FailureKind.RUNTIME,
                stage=self.stage,
                exc=exc,
            )
            if fatal:
                raise
            self.quarantined = True
            return result
        finally:
            rec.mark(-1, PHASE_IDLE)


class GraphRunner:
    """What Dynamo calls in place of a compiled graph."""

    def __init__(
        self,
        session: Session,
        index: int,
        stage: str,
        compiled: Any,
        reference: torch.fx.GraphModule,
        forward_kind: str = "forward",
        backend: TcompileBackend | None = None,
    ) -> None:
        self.session, self.index, self.stage = session, index, stage
        self.backend = backend  # the TcompileBackend (user backend, mode, options)
        self.forward_kind = forward_kind  # "inference" when AOT compiled no backward
        self.compiled = compiled
        self.reference = reference
        cfg = session.config
        self.checks_left = cfg.check_calls if cfg.accuracy != AccuracyMode.OFF else 0
        self.quarantined = compiled is None  # its compile failed: it runs eagerly
        self.serve_here = serves(cfg.serve, index, "dynamo")
        self._sync_first = True
        self._watch: observe.Watch | None = None  # the check watching the current call
        self.localized = False  # its first divergence found (localize.py): once
        self.expected: list[graphs.ExpectedOutput] = []  # the dtypes and shapes Dynamo traced
        # A graph that talks to other ranks is never re-run eagerly on one rank alone (a
        # hang).  Its forward check runs on every rank at its first call, so references
        # issue the same collectives everywhere (issue 37); its gradients are not judged
        # (DDP's buckets may still be in flight at the end of a rank's backward), said.
        self.collective = in_distributed_job() and has_collectives(reference)
        if self.collective and self.checks_left:
            session.note(
                index,
                "this graph holds collectives (all_reduce, ...): its forward is judged on "
                "every rank at the same call, the references issuing the same collectives "
                "everywhere; its gradients are not judged",
            )

    def __call__(self, *call_args: object) -> object:
        # Dynamo calls a backend's result with positional args, never boxed (and
        # aot_module_simplified's forward carries a misleading `_boxed_call`).
        args = list(call_args)
        if _fake(args):
            # not the program's call: Dynamo's DDPOptimizer runs each bucket's compiled
            # submodule on fake tensors to propagate shapes.  A check (or a first-call
            # sync, or a minifier worker) taking that call judged nothing: every check
            # under DDP with several buckets failed with DataDependentOutputException
            # (issue 37)
            return (self.reference if self.quarantined else self.compiled)(*args)
        if self.serve_here:  # a minifier worker: stop here and judge candidates
            self._serve(args)
        self._serve_first_failure(args)  # its compile failed
        if self.quarantined:
            return eager_call(self.reference, args)
        if self.session.last_calls is not None:  # judged if the program dies (postmortem.py)
            self.session.last_calls.keep(self, args)  # a checked call too: its backward
        if self.checks_left > 0:
            # the check watches this very call (observe.py): it adds no call of the
            # compiled graph, and the program gets the compiled results, right or wrong
            self.checks_left -= 1
            from .observe import Watch

            rec = self.session.recorder
            rec.mark(self.index, PHASE_CHECK, "dynamo")
            try:
                watch = Watch(self, args)
            finally:
                rec.mark(-1, PHASE_IDLE)
            self._watch = watch  # a metadata failure of this call is localized from it
            try:
                out = self._run(args)
            finally:
                self._watch = None
            if not self.quarantined:
                rec.mark(self.index, PHASE_CHECK, "dynamo")
                try:
                    watch.forward(out, args)
                finally:
                    rec.mark(-1, PHASE_IDLE)
                # its check failed: a worker serves it, with the inputs as they were
                self._serve_first_failure(watch.snap.values())
            return out
        return self._run(args)

    def _run(self, args: list[object]) -> object:
        """The program's call of the compiled graph; a runtime error falls back to eager
        (a compiler failure only if eager passes)."""
        rec = self.session.recorder
        rec.note_site()
        rec.mark(self.index, PHASE_RUN, self.forward_kind)
        try:
            out = self.compiled(*args)
            self.session.hook_watch.ran(self, out)
            if self._sync_first:
                # the first call of a graph on the GPU waits for its kernels, so that a
                # kernel that faults is caught here, in this graph, not at some later
                # synchronisation in the program
                self._sync_first = False
                accuracy.cuda_sync(args)
                mismatch = accuracy.metadata_mismatch(self.expected, out)
                if mismatch is not None:  # another dtype or shape than eager's: always a bug
                    self._metadata_failure(mismatch)
            return out
        except Exception as exc:
            if is_dynamo_exception(exc):
                raise
            if cuda_fatal_message(exc) or self.collective:
                # the CUDA context is dead: not even eager can run in this process; or
                # the graph talks to other ranks: re-running it here alone would hang
                self._runtime_failure(exc)
                raise
            try:
                result = eager_call(self.reference, args)
            except Exception as eager:  # eager raising too: the program's own error ...
                if not same_kind(exc, eager):  # ... unless the compiled graph raised another
                    self._runtime_failure(exc)
                    raise exc from None
                self._own_error(exc, eager)
                raise
            self._runtime_failure(exc)
            self.capture_pending(args)  # a run saving its failing graphs (bisect's baseline)
            return result
        finally:
            rec.mark(-1, PHASE_IDLE)

    def _serve(self, args: list[object], target: session.ServeTarget | None = None) -> None:
        from .serve import serve

        serve(
            self.session.config,
            self.reference,
            args,
            index=self.index,
            stage=self.stage,
            forward_kind=self.forward_kind,
            spec=cast("TcompileBackend", self.backend).spec(),  # backend.py gives it
            signature=target[1] if target else None,
            graph_kind=target[2] if target else None,
            recorder=self.session.recorder,
            meta_extra={"message": self.session.serve_message} if target else None,
        )

    def _serve_first_failure(self, args: list[object]) -> None:
        """A worker told to serve the first failure it meets, and this graph had it."""
        target = self.session.serve_target
        if target is not None and target[0] == self.index:
            self._serve(args, target)
        self.capture_pending(args)

    def capture_pending(self, args: list[object], ambient: observe.Ambient | None = None) -> None:
        """A run saving its failing graphs (HookConfig.capture): this graph's failure,
        with ``args`` (its next call's, or the checked call's own snapshot, ``ambient``
        the state that call ran in: a gradient is judged inside the backward, where grad
        mode is off), and go on."""
        pending = self.session.take_capture(self.index) if self.session.config.capture else None
        if pending is not None:
            from .serve import capture_graph

            capture_graph(
                self.session.config.capture,  # type: ignore[arg-type]
                self.reference,
                args,
                index=self.index,
                stage=self.stage,
                forward_kind=self.forward_kind,
                spec=cast("TcompileBackend", self.backend).spec(),  # backend.py gives it
                signature=pending[0],
                graph_kind=pending[1],
                message=pending[2],
                ambient=ambient,
            )

    def _own_error(self, exc: BaseException, eager: BaseException) -> None:
        said = first_lines(f"{type(exc).__name__}: {exc}", 1, 200)
        self.session.note(self.index, f"the compiled graph raised ({said}) and eager raised "
            f"on the same inputs too ({type(eager).__name__}: {first_lines(str(eager), 1, 200)})"
            ": the program's own error; it goes on with eager's (plain python dies of the "
            "compiled graph's)")  # fmt: skip

    def _runtime_failure(self, exc: BaseException, graph_kind: str | None = None) -> None:
        self.session.failure(
            graph=self.index,
            graph_kind=graph_kind or self.forward_kind,
            kind=FailureKind.RUNTIME,
            stage=self.stage,
            exc=exc,
        )
        self.quarantined = True

    def _metadata_failure(self, mismatch: accuracy.Mismatch) -> None:
        strict = self.session.config.accuracy == AccuracyMode.STRICT
        sig = accuracy.accuracy_signature(self.stage, strict, mismatch, self.forward_kind)
        extra = self.localize(self._watch) if self._watch is not None else {}
        self.session.failure(
            graph=self.index,
            graph_kind=self.forward_kind,
            kind=FailureKind.ACCURACY,
            stage=self.stage,
            signature=sig,
            message=str(mismatch),
            **extra,
        )

    def localize(self, watch: observe.Watch, grads: bool = False) -> numerics.Localized:
        """``{"divergence": ...}`` for the failure this checked call shows (``grads``: a
        gradient), once per graph and only with ``localize`` on (localize.py)."""
        if not self.session.config.localize or self.localized:
            return {}
        from .localize import localize

        self.localized = True
        return {"divergence": localize(self, watch.snap, watch.ambient, grads=grads)}

    def _note_more_precise(self, ref: Outcome, res: Outcome, fp64: Outcome | None) -> None:
        """Compiled differs from eager but is at least as close to float64: not a
        failure, and said so (a program comparing with eager would see a difference)."""
        differs = accuracy.compare(ref, res, None, strict=True)
        if differs is None:
            return
        what = f"{accuracy.graph_kind_of(differs, self.forward_kind)} {differs}"
        self.session.note(
            self.index,
            f"compiled differs from eager ({what}) but is closer to float64 than eager is: "
            "compiled is more precise than eager here, not a failure; --strict-accuracy "
            "treats any difference from eager as a failure",
            tag=MORE_PRECISE,
        )


def eager_call(gm: torch.fx.GraphModule, args: Sequence[object]) -> object:
    """``gm(*args)``, keeping the traceback of an error raised on a line of the graph's
    generated code: ``GraphModule.__call__`` re-raises such an error without its frames,
    and cause.py reads the user line the failing node came from off that frame (the
    program's own error, raised in a graph that runs eagerly, is then compared with
    plain python's by that line).  Module hooks, where there are any, run as before."""
    from torch.nn.modules import module as nn_module

    hooked = (
        getattr(gm, "_forward_hooks", None)
        or getattr(gm, "_forward_pre_hooks", None)
        or nn_module._global_forward_hooks
        or nn_module._global_forward_pre_hooks
    )
    if isinstance(gm, torch.fx.GraphModule) and not hooked:
        if getattr(gm, "_needs_recompile", lambda: False)():  # a lazy one: its code first
            gm.real_recompile()
        return gm.forward(*args)
    return gm(*args)

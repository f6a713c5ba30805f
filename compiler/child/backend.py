"""The wrapping backend (DESIGN.md mechanisms 2-6).

Every ``torch.compile`` call in the user's process is given a :class:`TcompileBackend`
in place of its own backend.  For each graph Dynamo hands it, the backend

1. numbers the graph (one counter per process) and describes it (frame, file:line,
   compile id, node count);
2. keeps a copy taken *before* compilation (passes mutate graphs in place);
3. compiles it with the selected stage, or leaves it eager when the graph is gated off,
   recording every AOT-level graph (forward / backward / inference) on the way;
4. hands back a :class:`~.runners.GraphRunner`, which classifies what happens when the
   graph runs (runtime errors, accuracy).

A compile error falls back to the eager copy and the run goes on, so one run reports
every failure.
"""

from __future__ import annotations

import copy
import os
import time
from typing import TYPE_CHECKING

import torch

from .. import accuracy
from ..accuracy import AccuracyMode
from ..protocol import Event
from ..signature import FailureKind
from ..stack import Stage, backend_name
from .build import aot_kind_of_failure, build_stage
from .graphs import (
    count_compute,
    ddp_bucket,
    describe_graph,
    expected_outputs,
    frame_from_stack_trace,
    has_collectives,
)
from .judge import CompileSpec
from .recorder import PHASE_COMPILE, PHASE_IDLE, serves
from .runners import AotHooks, GraphRunner
from .session import Session
from .subsystems import compiling

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from torch.utils._config_module import ContextDecorator

    from .build import CompiledFn
    from .graphs import DdpBucket


class TcompileBackend:
    """Stands in for the backend of one ``torch.compile`` call."""

    def __init__(
        self,
        session: Session,
        *,
        user_backend: str | Callable[..., object] = "inductor",
        mode: str | None = None,
        options: dict[str, object] | None = None,
        dynamic: bool | None = None,
        fullgraph: bool = False,
    ) -> None:
        self.session = session
        self.user_backend = user_backend
        self.mode = mode
        self.options = options
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        self.compiler_name = "tcompile"

    @property
    def stage(self) -> str:
        return self.session.config.stage or backend_name(self.user_backend)

    def spec(self) -> CompileSpec:
        """How the program's torch.compile call compiles (for a minifier's judge)."""
        return CompileSpec(self.user_backend, self.mode, self.options, self.dynamic)

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: Sequence[object], **_: object
    ) -> CompiledFn:
        session, rec = self.session, self.session.recorder
        index = rec.next_graph_index()
        stage = self.stage
        session.graph_stage[index] = stage
        base = dict(index=index, kind="dynamo", nodes=count_compute(gm), **describe_graph(gm))
        base["collectives"] = has_collectives(gm)  # it talks to the other ranks itself
        base["device"] = _device_of(example_inputs)  # where it runs: a report's title says
        bucket = ddp_bucket()
        if bucket is not None:  # one bucket of a graph DDPOptimizer split
            base.update(_bucket_fields(gm, bucket))
        gate, gate_rank = session.config.gate, session.config.gate_rank
        other_rank = gate_rank is not None and int(os.environ.get("RANK", "0")) != gate_rank
        if other_rank or (gate is not None and index not in gate):
            rec.emit(Event.GRAPH, stage=Stage.EAGER.value, gated=True, compile_seconds=0.0, **base)
            return gm.forward
        reference = copy.deepcopy(gm)
        hooks = AotHooks(session, index, stage, backend=self)
        explain = session.config.explain
        if explain:
            from .diagnostics import compile_metrics, ops_of

            before = compile_metrics()
            base["ops"] = ops_of(gm)
        t0 = time.perf_counter()
        if serves(session.config.serve, index, "dynamo"):
            compiled = None  # a minifier worker serves this graph: its compile is not needed
        else:
            compiled = self._compile(gm, example_inputs, index, stage, hooks)
        seconds = time.perf_counter() - t0
        if explain:
            base["phases"] = session.phases(before, compile_metrics(), seconds, hooks.inner_seconds)
        rec.emit(Event.GRAPH, stage=stage, compile_seconds=seconds, failed=compiled is None, **base)
        session.emit_counts()
        forward_kind = (
            "inference"
            if "inference" in hooks.kinds or not _wants_grad(example_inputs)
            else "forward"
        )
        if compiled is None and not (session.config.serve or session.config.capture):
            return reference.forward
        runner = GraphRunner(session, index, stage, compiled, reference, forward_kind, backend=self)
        runner.expected = expected_outputs(gm)
        return runner

    def _compile(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[object],
        index: int,
        stage: str,
        hooks: AotHooks,
    ) -> CompiledFn | None:
        """The compiled graph, or None when compiling failed (said as a failure)."""
        session, rec = self.session, self.session.recorder
        user_backend = None if stage != backend_name(self.user_backend) else self.user_backend
        # random ops must draw eager's numbers while accuracy is judged; only then
        # (fallback_random also changes which decompositions inductor uses, so the
        # patch applies to every stage)
        checking = session.config.accuracy != AccuracyMode.OFF and accuracy.has_random_ops(gm)
        options = accuracy.with_fallback_random(self.options, checking=checking, stage=stage, gm=gm)
        if checking:  # the one thing the check changes: a passive run decides (faithful.py)
            rec.emit(
                Event.CHECK_EFFECT,
                graph=index,
                text=f"graph {index} draws random numbers: compiled with fallback_random=True "
                "so that its values could be judged",
            )
        try:
            compile_fn = build_stage(
                stage,
                hooks,
                user_backend=user_backend,
                mode=self.mode,
                options=options or None,
                dynamic=self.dynamic,
            )
        except (ImportError, AttributeError, NameError, TypeError) as exc:
            # torch lacks an API tcompile's stack is built from: tcompile's failure,
            # not the compiler's (the graph runs eagerly; the parent exits 4)
            import torch

            session.recorder.emit(
                Event.INTERNAL,
                graph=index,
                message=f"cannot build the {stage} stage on torch {torch.__version__}: "
                f"{type(exc).__name__}: {exc}",
            )
            return None
        rec.mark(index, PHASE_COMPILE, "dynamo")
        if stage == Stage.INDUCTOR.value:  # which pattern fired, or raised (patterns.py)
            from .patterns import install as install_patterns

            install_patterns()
        try:
            with _fallback_random(checking), compiling(index):
                return compile_fn(gm, example_inputs)
        except Exception as exc:
            if _dynamo_control_flow(exc):
                # not a failure: Dynamo's own signal to trace the frame again (a scalar
                # tensorified after all, ...); it must reach Dynamo as it would without us
                raise
            kind = hooks.failed_kind or aot_kind_of_failure(exc, example_inputs)
            session.failure(
                graph=index,
                graph_kind=kind,
                kind=FailureKind.COMPILE,
                stage=stage,
                exc=exc,
                before_aot_compile=hooks.failed_kind is None and kind != "dynamo",
            )
            return None
        finally:
            rec.mark(-1, PHASE_IDLE)


def _device_of(example_inputs: Sequence[object]) -> str | None:
    """The device type a graph runs on: its first tensor input's (``cuda``, ``cpu``)."""
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            return x.device.type
    return None


def _dynamo_control_flow(exc: BaseException) -> bool:
    """Dynamo's exceptions that steer its tracing rather than report a failure
    (``RestartAnalysis`` and its kind: ``TensorifyScalarRestartAnalysis`` is raised from
    inside the backend's compile when a float must become a tensor input)."""
    from torch._dynamo import exc as dexc

    kinds = tuple(
        t
        for t in (getattr(dexc, "RestartAnalysis", None), getattr(dexc, "SkipFrame", None))
        if isinstance(t, type)
    )
    return bool(kinds) and isinstance(exc, kinds)


def _wants_grad(example_inputs: Sequence[object]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
    )


class _fallback_random:
    """Random ops draw eager's numbers in compiled code while accuracy is checked."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self._patch: ContextDecorator | None = None

    def __enter__(self) -> None:
        if self.on:
            import torch._inductor.config as inductor_config

            self._patch = inductor_config.patch(fallback_random=True)
            self._patch.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._patch is not None:
            self._patch.__exit__(*exc)


def _bucket_fields(gm: torch.fx.GraphModule, bucket: DdpBucket) -> dict[str, object]:
    """A DDP bucket's graph: where the program's code is, and, after the first bucket,
    the graph break DDPOptimizer made there (explain lists it with its reason)."""
    where = frame_from_stack_trace(gm)
    if not where.get("file") and bucket.get("graph") is not None:
        where = describe_graph(bucket["graph"])  # the frame the whole graph came from
    out: dict[str, object] = {"ddp_bucket": bucket["bucket"], "break_reason": None}
    if where.get("file"):
        out.update(frame=where.get("frame", ""), file=where["file"], line=where.get("line"))
    if bucket["bucket"] > 0:
        cap = f", bucket_cap_mb={bucket['cap_mb']:g}" if "cap_mb" in bucket else ""
        out["break_reason"] = (
            f"DDPOptimizer split the graph at a DDP bucket boundary (bucket {bucket['bucket']}"
            f"{cap}), so that each bucket's all-reduce overlaps the rest of the backward; "
            "torch._dynamo.config.optimize_ddp = False keeps one graph"
        )
        out["break_file"], out["break_line"] = where.get("file") or "", where.get("line")
    return out

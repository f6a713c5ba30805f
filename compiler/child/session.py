"""One per process under the hooks: the hook config, the event recorder, and the
failures said so far (each said once).  Made on first use (hooks.session())."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ..crash import FATAL_PREFIX
from ..owners import in_torch
from ..protocol import STOP_EXIT, Event, HookConfig
from ..signature import CAPTURED_KINDS, FailureKind, FailureSignature, first_lines, root_cause
from .recorder import Recorder

if TYPE_CHECKING:
    import torch

    from .numerics import Divergence
    from .postmortem import LastCalls

    # a minifier worker's first failure to serve: (graph, its signature, graph kind)
    ServeTarget = tuple[int, FailureSignature, str]


def is_dynamo_exception(exc: BaseException) -> bool:
    """A TorchDynamo capture failure (not a backend failure wrapped by Dynamo): one of
    Dynamo's own exceptions, or a symbolic-shapes error raised while Dynamo made the
    frame's guards (a dynamic size the code specialises: ConstraintViolationError),
    which Dynamo lets through unwrapped, or a recompile limit hit that is fatal."""
    try:
        from torch._dynamo import exc as dexc
        from torch.fx.experimental import symbolic_shapes
    except Exception:  # pragma: no cover
        return False
    if isinstance(exc, dexc.BackendCompilerFailed):
        return False
    guard_errors = tuple(
        t
        for t in (
            getattr(symbolic_shapes, "ConstraintViolationError", None),
            getattr(symbolic_shapes, "GuardOnDataDependentSymNode", None),
        )
        if isinstance(t, type)
    )
    # a recompile limit hit under fullgraph=True (or fail_on_recompile_limit_hit) raises
    # an exception of Dynamo's own that is not a TorchDynamoException
    limit = getattr(dexc, "FailOnRecompileLimitHit", None)
    own = (limit,) if isinstance(limit, type) else ()
    return isinstance(exc, (dexc.TorchDynamoException, *own, *guard_errors))


def guard_reasons(code: object) -> list[str]:
    """The guard failures Dynamo has noted for ``code`` so far (one per cache entry that
    failed, each time the frame was compiled again), as Dynamo wrote them."""
    try:
        from torch._dynamo.utils import guard_failures
    except Exception:  # pragma: no cover
        return []
    return [str(r) for r in guard_failures.get(code, ())]


def backward_graph_of(exc: BaseException) -> int | None:
    """The graph whose compiled backward ``exc`` was raised in, if any: AOTAutograd's
    backward frame holds ``ctx``, whose forward class holds the compiled forward that
    runners.AotHooks tagged with its graph's index."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            ctx = tb.tb_frame.f_locals.get("ctx")
            forward_cls = getattr(type(ctx), "_forward_cls", None)
            fw = getattr(forward_cls, "compiled_fw", None)
            for _ in range(4):
                index = getattr(fw, "_tcompile_graph", None)
                if isinstance(index, int):
                    return index
                fw = getattr(fw, "__wrapped__", None)
            tb = tb.tb_next
        e = e.__cause__ or e.__context__
    return None


def stacks_on_request(config: HookConfig) -> None:
    """A distributed worker dumps its Python stacks on SIGUSR2 (procs.py asks, before
    killing a run that hung), so that a timeout says where each rank was waiting.
    Registered when the process first compiles (not in its helper processes)."""
    if "WORLD_SIZE" not in os.environ or not config.dir:
        return
    import faulthandler
    import signal

    try:
        os.makedirs(config.dir, exist_ok=True)
        f = open(os.path.join(config.dir, f"stack-{os.getpid()}.txt"), "w")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR2, file=f, all_threads=True, chain=False)
    except (OSError, ValueError, RuntimeError):
        pass


def stacks_on_death(config: HookConfig) -> None:
    """A process that dies of a signal (a C++ ``throw`` in a compiled kernel aborts it)
    leaves its Python stacks in ``fatal-PID.txt`` (faulthandler, which then lets the
    signal kill it as before): the parent reads the program's line it died at, and asks
    whether eager raises at that line (collect.fails_the_same_way).  A program that
    enabled faulthandler itself keeps its own (nothing is changed)."""
    import faulthandler

    if not config.dir or faulthandler.is_enabled():
        return
    try:
        os.makedirs(config.dir, exist_ok=True)
        f = open(os.path.join(config.dir, f"{FATAL_PREFIX}{os.getpid()}.txt"), "w")  # noqa: SIM115
        faulthandler.enable(file=f, all_threads=True)
    except (OSError, ValueError, RuntimeError):
        pass


class Session:
    def __init__(self, config: HookConfig) -> None:
        self.config = config
        self.recorder = Recorder(config.dir)
        stacks_on_request(config)
        stacks_on_death(config)
        self._said: set[tuple[object, ...]] = set()
        self.graph_stage: dict[int, str] = {}  # graph index -> the stage compiling it
        self._tracing_seen = 0.0
        stop = config.stop_on
        self._stop_on = FailureSignature.from_json(stop) if stop else None
        # a minifier worker serving the first failure it meets: (graph, signature, kind)
        self.serve_target: ServeTarget | None = None
        self.serve_message = ""  # the unscrubbed text of the failure served
        # a run saving its failing graphs (config.capture): graph -> (signature, graph
        # kind, message) of its first failure, saved at the graph's next call
        self.to_capture: dict[int, tuple[FailureSignature, str, str]] = {}
        self.captured: set[int] = set()
        # the backward graphs of graphs whose gradients a check watches: graph index ->
        # (the eager backward graph, the inputs the program's backward call got), for
        # localizing a wrong gradient inside the backward graph (localize.py)
        self.watch_backward: set[int] = set()
        self.backward_calls: dict[int, tuple[torch.fx.GraphModule, list[object]]] = {}
        self.forward_traces: dict[int, dict[int, str]] = {}  # graph -> seq_nr -> trace
        self.failures_said = 0
        # each graph's last call, judged if the program dies of its own check (postmortem.py)
        self.last_calls: LastCalls | None = None
        if config.keep_last_calls:
            from .postmortem import LastCalls

            self.last_calls = LastCalls(self)
        from .tensor_hooks import HookWatch

        self.hook_watch = HookWatch(self)  # hooks that do not run as in eager (issue 63)

    def failure(
        self,
        *,
        graph: int | None,
        graph_kind: str,
        kind: FailureKind,
        stage: str,
        exc: BaseException | None = None,
        signature: FailureSignature | None = None,
        message: str = "",
        divergence: Divergence | None = None,
        before_aot_compile: bool = False,
    ) -> None:
        pattern = None
        if signature is None:
            assert exc is not None
            from .patterns import pattern_of

            pattern = pattern_of(exc)
            signature = FailureSignature.from_exception(stage, kind, exc)
            message = message or f"{type(root_cause(exc)).__name__}: {root_cause(exc)}"
            if where := raised_in_pass(exc):  # the inductor pass a bisect may only name whole
                message = f"{first_lines(message, 11, 320)}\n({where})"
        key = (graph, graph_kind, signature.kind, signature.exc_type, signature.message)
        if key in self._said:
            return
        self._said.add(key)
        self.failures_said += 1
        self.recorder.emit(
            Event.FAILURE,
            graph=graph,
            graph_kind=graph_kind,
            kind=signature.kind,
            stage=stage,
            signature=signature.to_json(),
            signature_text=str(signature),
            message=first_lines(message, 12, 400),
            **({"divergence": divergence} if divergence is not None else {}),
            **({"before_aot_compile": True} if before_aot_compile else {}),
            **({"pattern": pattern} if pattern else {}),
        )
        self._maybe_serve(graph, graph_kind, signature, message)
        self._maybe_capture(graph, graph_kind, signature, message)
        if self._stop_on is not None and self._stop_on.matches(signature, any_stage=True):
            self.emit_counts()
            # the parent stops every other process of the run too (other ranks)
            self.recorder.emit(Event.STOPPED, graph=graph)
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(STOP_EXIT)  # the failure showed: the rest of the program is not needed

    def _maybe_serve(
        self, graph: int | None, graph_kind: str, sig: FailureSignature, message: str = ""
    ) -> None:
        """In a worker told to serve the first failure it meets (``serve.first_failure``):
        remember the first one that fits, a compile or accuracy failure in a graph (the
        graph's runner then serves it, with the inputs of that very call)."""
        spec = self.config.serve
        if spec is None or not spec.first_failure or self.serve_target is not None or graph is None:
            return
        if sig.kind not in (FailureKind.COMPILE.value, FailureKind.ACCURACY.value):
            return
        if spec.graph is not None and spec.graph != graph:
            return
        if spec.match:
            import re

            if not re.search(spec.match, str(sig)):
                return
        self.serve_target = (graph, sig, graph_kind)
        self.serve_message = first_lines(message, 12, 400)  # unscrubbed (autotune.py)

    def _maybe_capture(
        self, graph: int | None, graph_kind: str, sig: FailureSignature, message: str
    ) -> None:
        """A run saving its failing graphs: the first compile, runtime or accuracy
        failure of each graph (up to layout.MAX_CAPTURES graphs) is saved at its next
        call (a runtime error's and a wrong value's: at the very call)."""
        from ..layout import MAX_CAPTURES

        if not self.config.capture or graph is None or graph in self.captured:
            return
        if sig.kind not in CAPTURED_KINDS:
            return
        if graph in self.to_capture or len(self.captured) >= MAX_CAPTURES:
            return
        self.to_capture[graph] = (sig, graph_kind, first_lines(message, 12, 400))

    def take_capture(self, graph: int) -> tuple[FailureSignature, str, str] | None:
        pending = self.to_capture.pop(graph, None)
        if pending is not None:
            self.captured.add(graph)
        return pending

    def emit_counts(self) -> None:
        """Applications of inductor's subsystems so far (bisection runs only)."""
        if self.config.bisect is None:
            return
        from .subsystems import counter

        c = counter()
        if c is not None and c.seen:
            self.recorder.emit(
                Event.BISECT_COUNTS, counts=c.snapshot(), effects=c.effects(), graphs=c.graphs()
            )

    def phases(
        self, before: dict[str, float], after: dict[str, float], total: float, inner: float
    ) -> dict[str, float]:
        """Compile seconds of one graph by phase (from torch's compile-time metrics)."""
        tracing = before.get("bytecode_tracing", 0.0)
        capture = max(0.0, tracing - self._tracing_seen)
        self._tracing_seen = after.get("bytecode_tracing", tracing)
        codegen = after.get("GraphLowering.compile_to_module", 0.0) - before.get(
            "GraphLowering.compile_to_module", 0.0
        )
        return {
            "dynamo_capture": round(capture, 4),
            "aot_autograd": round(max(0.0, total - inner), 4),
            "inductor": round(max(0.0, inner - codegen), 4),
            "codegen": round(max(0.0, codegen), 4),
        }

    def note(self, graph: int | None, text: str, tag: str | None = None) -> None:
        """Say ``text`` of graph ``graph`` once; ``tag`` names what it says, for the
        parent to act on (``more_precise``) without reading the words back."""
        key = ("note", graph, text)
        if key not in self._said:
            self._said.add(key)
            self.recorder.emit(Event.NOTE, graph=graph, text=text, **({"tag": tag} if tag else {}))


def raised_in_pass(exc: BaseException) -> str | None:
    """The innermost function of inductor's FX passes the error came from, for people and
    for bisect's culprit (issue 52: #195282's crash is raised while ``_sfdp_replacement_2``
    of fuse_attention.py is traced; bisect alone names ``pass_pattern_0``).  None: not
    raised in one."""
    import traceback

    seen: set[int] = set()
    cur: BaseException | None = exc
    found = None
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for fs in traceback.extract_tb(cur.__traceback__):
            if in_torch(fs.filename, "_inductor", "fx_passes") and not fs.name.startswith("<"):
                found = f"raised in inductor's {fs.name}, fx_passes/{os.path.basename(fs.filename)}"
        cur = cur.__cause__ or cur.__context__
    return found

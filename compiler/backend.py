"""The wrapping backend (DESIGN.md mechanisms 2-6).

Every ``torch.compile`` call in the user's process is given a :class:`TcompileBackend`
in place of its own backend.  For each graph Dynamo hands it, the backend

1. numbers the graph (one counter per process) and describes it (frame, file:line,
   compile id, node count);
2. keeps a copy taken *before* compilation (passes mutate graphs in place);
3. compiles it with the selected stage, or leaves it eager when the graph is gated off,
   recording every AOT-level graph (forward / backward / inference) on the way;
4. classifies failures: a compile error falls back to the eager copy and the run goes
   on; a runtime error is re-run eagerly and is a compiler failure only if eager passes;
   under ``--accuracy`` the first calls are checked against eager and float64.

A graph that failed once is *quarantined*: it runs eagerly from then on, so one bug
neither repeats in every step nor corrupts the numbers later graphs are checked on.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from . import accuracy
from .protocol import HookConfig
from .recorder import Recorder
from .signature import (
    FailureKind,
    FailureSignature,
    cuda_fatal_message,
    first_lines,
    root_cause,
)
from .stages import Stage, backend_name, build_stage

PHASE_IDLE, PHASE_COMPILE, PHASE_RUN, PHASE_CHECK = 0, 1, 2, 3


def compute_nodes(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def describe_graph(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """Frame name, file and line of the user code a Dynamo graph was captured from."""
    info: dict[str, Any] = {"frame": "", "file": "", "line": None}
    reason = getattr(gm, "compile_subgraph_reason", None)
    stack = list(getattr(reason, "user_stack", None) or [])
    if stack:
        # the outermost frame that is the user's own (torch.compile(model) enters
        # through torch's nn.Module plumbing first)
        paths = [(fs, fs.filename.replace("\\", "/")) for fs in stack]
        user = [fs for fs, p in paths if "/torch/" not in p]
        modules = [fs for fs, p in paths if "/torch/_dynamo/" not in p]
        top = (user or modules or stack)[0]
        info.update(frame=top.name, file=top.filename, line=top.lineno)
    else:
        for node in gm.graph.nodes:
            trace = node.meta.get("stack_trace")
            if trace:
                lines = [
                    ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File")
                ]
                if lines:
                    # 'File "x.py", line 5, in f'
                    parts = lines[0].split(",")
                    info["file"] = parts[0].split('"')[1] if '"' in parts[0] else ""
                    try:
                        info["line"] = int(parts[1].split()[-1])
                    except (IndexError, ValueError):
                        pass
                    info["frame"] = parts[-1].replace("in ", "").strip()
                break
    info["compile_id"] = str(gm.meta.get("dynamo_compile_id", "")) if hasattr(gm, "meta") else ""
    if reason is not None and getattr(reason, "graph_break", False):
        info["break_reason"] = str(getattr(reason, "reason", ""))[:300]
        if stack:
            info["break_file"], info["break_line"] = stack[-1].filename, stack[-1].lineno
    return info


def is_dynamo_exception(exc: BaseException) -> bool:
    """A TorchDynamo capture failure (not a backend failure wrapped by Dynamo)."""
    try:
        from torch._dynamo import exc as dexc
    except Exception:  # pragma: no cover
        return False
    if isinstance(exc, dexc.BackendCompilerFailed):
        return False
    return isinstance(exc, dexc.TorchDynamoException)


class Session:
    """One per process: the hook config, the event recorder, failures said so far."""

    def __init__(self, config: HookConfig) -> None:
        self.config = config
        self.recorder = Recorder(config.dir)
        self._said: set[tuple[Any, ...]] = set()
        self.graph_stage: dict[int, str] = {}  # graph index -> the stage compiling it

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
    ) -> None:
        if signature is None:
            assert exc is not None
            signature = FailureSignature.from_exception(stage, kind, exc)
            message = message or f"{type(root_cause(exc)).__name__}: {root_cause(exc)}"
        key = (graph, graph_kind, signature.kind, signature.exc_type, signature.message)
        if key in self._said:
            return
        self._said.add(key)
        self.recorder.emit(
            "failure",
            graph=graph,
            graph_kind=graph_kind,
            kind=signature.kind,
            stage=stage,
            signature=signature.to_json(),
            signature_text=str(signature),
            message=first_lines(message, 12, 400),
        )
        stop = self.config.stop_on
        if (
            stop
            and all(stop.get(k) == getattr(signature, k) for k in ("kind", "exc_type"))
            and (signature.kind in ("crash", "timeout") or stop.get("message") == signature.message)
        ):
            self.emit_counts()
            import os

            from .protocol import STOP_EXIT

            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            os._exit(STOP_EXIT)  # the failure showed: the rest of the program is not needed

    def emit_counts(self) -> None:
        """Applications of inductor's subsystems so far (bisection runs only)."""
        if self.config.bisect is None:
            return
        from .subsystems import counter

        c = counter()
        if c is not None and c.seen:
            self.recorder.emit("bisect_counts", counts=c.snapshot())

    _tracing_seen = 0.0

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

    def note(self, graph: int | None, text: str) -> None:
        key = ("note", graph, text)
        if key not in self._said:
            self._said.add(key)
            self.recorder.emit("note", graph=graph, text=text)


class _AotHooks:
    """Wraps each AOT-level compile of one Dynamo graph (see stages.AotHooks)."""

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
        gm: Any,
        example_inputs: Any,
        real_compile: Callable[..., Any],
        **kwargs: Any,
    ) -> Any:
        rec = self.session.recorder
        nodes = compute_nodes(gm)
        serve = self.session.config.serve
        if (
            serve
            and serve.get("level") == "aot"
            and serve.get("graph") == self.index
            and (serve.get("graph_kind") in (None, kind))
        ):
            # a minifier worker at the AOT level: no compile; stop at the first call of
            # this graph and judge candidates there, with its real inputs
            return _AotServer(self.session, self, _plain_graph_module(gm), kind)
        # Backward graphs are compiled lazily, during loss.backward(): keep an eager
        # copy to fall back on, taken before the compiler's passes edit the graph.
        keep = copy.deepcopy(gm) if kind == "backward" else None
        rec.mark(self.index, PHASE_COMPILE, kind)
        t0 = time.perf_counter()

        def emit(failed: bool) -> float:
            seconds = time.perf_counter() - t0
            rec.emit(
                "aot_graph",
                index=self.index,
                kind=kind,
                nodes=nodes,
                stage=self.stage,
                compile_seconds=seconds,
                failed=failed,
            )
            return seconds

        try:
            with _debug_artifacts(self.session.config.debug_dir, self.index, kind):
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
        return compiled


def _plain_graph_module(gm: Any) -> Any:
    """A copy that pickles as a plain GraphModule (an AOT graph remembers make_fx's
    tracer, and unpickling it would need torch internals the reader may not have)."""
    g = torch.fx.Graph()
    g.output(g.graph_copy(gm.graph, {}))
    return torch.fx.GraphModule(gm, g)


class _AotServer:
    """Stands in for the AOT graph being minified: serves at its first call."""

    _boxed_call = True

    def __init__(self, session: Session, hooks: _AotHooks, gm: Any, kind: str) -> None:
        self.session = session
        self.reference = gm
        self.index = hooks.index
        self.stage = hooks.stage
        self.forward_kind = kind
        self.backend = hooks.backend

    def __call__(self, *call_args: Any) -> Any:
        from .worker import serve

        args = (
            call_args[0] if len(call_args) == 1 and type(call_args[0]) is list else list(call_args)
        )
        serve(
            self.session,
            self,
            [a.detach() if isinstance(a, torch.Tensor) else a for a in args],
            meta_override={"level": "aot"},
        )


def _debug_artifacts(debug_dir: str | None, index: int, kind: str) -> Any:
    """inductor's debug trace for this AOT graph, in DIR/graph-NNN-kind/."""
    import contextlib

    if not debug_dir:
        return contextlib.nullcontext()
    import os

    import torch._inductor.config as inductor_config

    return inductor_config.patch(
        {
            "trace.enabled": True,
            "trace.debug_dir": os.path.join(debug_dir, f"graph-{index:03d}-{kind}"),
        }
    )


def _boxed_eager(gm: Any) -> Any:
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def _call(fn: Any, args: list[Any]) -> Any:
    if getattr(fn, "_boxed_call", False):
        return fn(list(args))
    return fn(*args)


class _BackwardRunner:
    """Runs a compiled backward graph; a runtime error falls back to the eager graph."""

    _boxed_call = True

    def __init__(
        self, session: Session, index: int, stage: str, compiled: Any, eager_gm: Any
    ) -> None:
        self.session, self.index, self.stage = session, index, stage
        self.compiled = compiled
        self.eager = _boxed_eager(eager_gm)
        self.quarantined = False

    def __call__(self, *call_args: Any) -> Any:
        # AOTAutograd calls backward compilers' results boxed or not, depending on
        # the path: accept both.
        args = (
            call_args[0] if len(call_args) == 1 and type(call_args[0]) is list else list(call_args)
        )
        if self.quarantined:
            return self.eager(args)
        saved = list(args)
        rec = self.session.recorder
        rec.mark(self.index, PHASE_RUN, "backward")
        try:
            return _call(self.compiled, args)
        except Exception as exc:
            fatal = cuda_fatal_message(exc)  # the CUDA context is dead: eager cannot run
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
        backend: Any = None,
    ) -> None:
        self.session, self.index, self.stage = session, index, stage
        self.backend = backend  # the TcompileBackend (user backend, mode, options)
        self.forward_kind = forward_kind  # "inference" when AOT compiled no backward
        self.compiled = compiled
        self.reference = reference
        cfg = session.config
        self.checks_left = cfg.check_calls if cfg.accuracy != "off" else 0
        self.quarantined = compiled is None  # its compile failed: it runs eagerly
        self.serve_here = (
            bool(cfg.serve)
            and cfg.serve.get("graph") == index
            and cfg.serve.get("level", "dynamo") == "dynamo"
        )
        self._fp64: Any = None
        self._sync_first = True

    def __call__(self, *call_args: Any) -> Any:
        # Dynamo calls a backend's result with positional args, never boxed (and
        # aot_module_simplified's forward carries a misleading `_boxed_call`).
        args = list(call_args)
        if self.serve_here:  # a minifier worker: stop here and judge candidates
            from .worker import serve

            serve(self.session, self, args)
        if self.quarantined:
            return self.reference(*args)
        if self.checks_left > 0:
            self.checks_left -= 1
            self._check(args)
            if self.quarantined:
                return self.reference(*args)
        rec = self.session.recorder
        rec.mark(self.index, PHASE_RUN, self.forward_kind)
        try:
            out = self.compiled(*args)
            if self._sync_first:
                # the first call of a graph on the GPU waits for its kernels, so that a
                # kernel that faults is caught here, in this graph, not at some later
                # synchronisation in the program
                self._sync_first = False
                accuracy.cuda_sync(args)
            return out
        except Exception as exc:
            if is_dynamo_exception(exc):
                raise
            if cuda_fatal_message(exc):
                # the CUDA context is dead: not even eager can run in this process
                self._runtime_failure(exc)
                raise
            result = self.reference(*args)  # eager raising too: the user's error, not ours
            self._runtime_failure(exc)
            return result
        finally:
            rec.mark(-1, PHASE_IDLE)

    def _runtime_failure(self, exc: BaseException) -> None:
        self.session.failure(
            graph=self.index,
            graph_kind=self.forward_kind,
            kind=FailureKind.RUNTIME,
            stage=self.stage,
            exc=exc,
        )
        self.quarantined = True

    def _compiled_fn(self, *args: Any) -> Any:
        return self.compiled(*args)

    def _check(self, args: list[Any]) -> None:
        strict = self.session.config.accuracy == "strict"
        rng = accuracy.RngState()
        rec = self.session.recorder
        rec.mark(self.index, PHASE_CHECK, "dynamo")
        try:
            try:
                ref = accuracy.run_with_grads(self.reference, args)
                rng.restore()
                again = accuracy.run_with_grads(self.reference, args)
            except Exception:
                return  # eager itself fails here: the program's own error shows on the real call
            finally:
                rng.restore()
            if not accuracy.outcomes_identical(ref, again):
                self.session.note(
                    self.index,
                    "nondeterministic reference: two eager runs from the same RNG state differ; "
                    "accuracy not judged for this graph",
                )
                return
            fp64 = None
            if not strict:
                try:
                    if self._fp64 is None:
                        self._fp64 = accuracy.to_float64(self.reference)
                    fp64 = accuracy.run_with_grads(self._fp64, args, dtype=torch.float64)
                except Exception:
                    fp64 = None
                finally:
                    rng.restore()
            try:
                res = accuracy.run_with_grads(self._compiled_fn, args)
                accuracy.cuda_sync(args)  # a faulting kernel shows here, not in compare()
            except Exception as exc:
                if is_dynamo_exception(exc):
                    raise
                self._runtime_failure(exc)
                return
            finally:
                rng.restore()
            mismatch = accuracy.compare(ref, res, fp64, strict=strict)
            if mismatch is not None:
                graph_kind = "backward" if mismatch.where.startswith("grad") else self.forward_kind
                exc_type = "StrictAccuracyError" if strict else "AccuracyError"
                sig = FailureSignature(
                    stage=self.stage,
                    kind=FailureKind.ACCURACY.value,
                    exc_type=exc_type,
                    message=f"{graph_kind} {mismatch.where.split()[0]} differs from eager",
                    frame="",
                )
                self.session.failure(
                    graph=self.index,
                    graph_kind=graph_kind,
                    kind=FailureKind.ACCURACY,
                    stage=self.stage,
                    signature=sig,
                    message=str(mismatch),
                )
                self.quarantined = True
        finally:
            rec.mark(-1, PHASE_IDLE)


class TcompileBackend:
    """Stands in for the backend of one ``torch.compile`` call."""

    def __init__(
        self,
        session: Session,
        *,
        user_backend: Any = "inductor",
        mode: str | None = None,
        options: dict[str, Any] | None = None,
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

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], **_: Any) -> Any:
        session, rec = self.session, self.session.recorder
        index = rec.next_graph_index()
        stage = self.stage
        info = describe_graph(gm)
        session.graph_stage[index] = stage
        base = dict(index=index, kind="dynamo", nodes=compute_nodes(gm), **info)
        gate = session.config.gate
        if gate is not None and index not in gate:
            rec.emit("graph", stage=Stage.EAGER.value, gated=True, compile_seconds=0.0, **base)
            return gm.forward
        reference = copy.deepcopy(gm)
        hooks = _AotHooks(session, index, stage, backend=self)
        user_backend = None if stage != backend_name(self.user_backend) else self.user_backend
        # random ops must draw eager's numbers while accuracy is judged; only then
        # (fallback_random also changes which decompositions inductor uses)
        checking = session.config.accuracy != "off" and accuracy.has_random_ops(gm)
        options = dict(self.options or {})
        if checking and stage == Stage.INDUCTOR:
            options.setdefault("fallback_random", True)
        explain = session.config.explain
        if explain:
            from .diagnostics import compile_metrics, ops_of

            before = compile_metrics()
            base["ops"] = ops_of(gm)
        t0 = time.perf_counter()
        rec.mark(index, PHASE_COMPILE, "dynamo")
        compiled = None
        try:
            compile_fn = build_stage(
                stage,
                hooks,
                user_backend=user_backend,
                mode=self.mode,
                options=options or None,
                dynamic=self.dynamic,
            )
            with _fallback_random(checking):
                compiled = compile_fn(gm, example_inputs)
        except Exception as exc:
            session.failure(
                graph=index,
                graph_kind=hooks.failed_kind or "dynamo",
                kind=FailureKind.COMPILE,
                stage=stage,
                exc=exc,
            )
        finally:
            rec.mark(-1, PHASE_IDLE)
        seconds = time.perf_counter() - t0
        if explain:
            base["phases"] = session.phases(before, compile_metrics(), seconds, hooks.inner_seconds)
        rec.emit(
            "graph",
            stage=stage,
            compile_seconds=seconds,
            failed=compiled is None,
            **base,
        )
        session.emit_counts()
        forward_kind = (
            "inference"
            if "inference" in hooks.kinds or not _wants_grad(example_inputs)
            else "forward"
        )
        if compiled is None and not session.config.serve:
            return reference.forward
        return GraphRunner(session, index, stage, compiled, reference, forward_kind, backend=self)


def _wants_grad(example_inputs: list[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
    )


class _fallback_random:
    """Random ops draw eager's numbers in compiled code while accuracy is checked."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self._patch: Any = None

    def __enter__(self) -> None:
        if self.on:
            import torch._inductor.config as inductor_config

            self._patch = inductor_config.patch(fallback_random=True)
            self._patch.__enter__()

    def __exit__(self, *exc: Any) -> None:
        if self._patch is not None:
            self._patch.__exit__(*exc)

"""Judging one candidate graph, inside a worker (DESIGN.md mechanism 7).

A worker is the user's own program, paused at the first call of the failing graph
(see serve.py), so the candidate is compiled with exactly the state the failure had:
the same backend object, mode and options, inductor config, custom passes and
patched decompositions.  The :class:`Verdict` says whether the *same* failure shows.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, cast

import torch

from tcompile.minifier.verdict import Verdict

from .. import accuracy, float64
from ..accuracy import AccuracyMode
from ..signature import FailureKind, FailureSignature, missing_error, root_cause
from ..stack import backend_name
from .build import build_stage
from .graphs import fresh_copy

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from torch._inductor.utils import InputType

    from .build import CompiledFn, CompilerFn
    from .observe import Ambient


@dataclasses.dataclass
class CompileSpec:
    """How the program's ``torch.compile`` call compiles: its backend, mode, options."""

    user_backend: str | Callable[..., object] | None = None
    mode: str | None = None
    options: dict[str, object] | None = None
    dynamic: bool | None = None


@dataclasses.dataclass
class Target:
    """The failure being minified and how to compile candidates."""

    signature: FailureSignature
    stage: str
    accuracy: str  # off | loose | strict
    spec: CompileSpec = dataclasses.field(default_factory=CompileSpec)
    level: str = "dynamo"  # or "aot": candidates are AOT graphs, compiled by compile_fx_inner
    graph_kind: str = "forward"
    # the state the program's call ran in (observe.Ambient): the forward runs in it,
    # the backward outside autocast, as the program's did
    ambient: Ambient | None = None
    any_stage: bool = False  # the same failure at another stage counts (a bisect's ladder)

    @property
    def checking(self) -> bool:
        return (
            self.accuracy != AccuracyMode.OFF or self.signature.kind == FailureKind.ACCURACY.value
        )

    def verdict(self, sig: FailureSignature) -> Verdict:
        same = sig.matches(self.signature, any_stage=self.any_stage)
        return Verdict.SAME_FAILURE if same else Verdict.OTHER_FAILURE


Judgement = tuple[Verdict, "dict[str, object] | None"]


class _PlainHooks:
    def compile(
        self,
        kind: str,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[object],
        real_compile: Callable[..., CompiledFn],
        **kwargs: object,
    ) -> CompiledFn:
        return real_compile(gm, example_inputs, **kwargs)


def judge(gm: torch.fx.GraphModule, inputs: list[InputType], target: Target) -> Judgement:
    """The verdict on one candidate, and the signature of the failure it shows."""
    if target.level == "aot":
        return judge_aot(gm, inputs, target)
    strict = target.accuracy == AccuracyMode.STRICT
    rng = accuracy.RngState()
    # the candidate must run eagerly: otherwise it is not a program, let alone a bug --
    # except for a crash: compiled code that dies where eager raises a catchable error
    # (an index out of bounds that aborts the process) is the bug itself
    eager_error: Exception | None = None
    amb = target.ambient
    within = amb.enter if amb is not None else None
    outside = amb.outside if amb is not None else contextlib.nullcontext
    # a missing error (issue 63): eager must raise, and the compiled graph return
    missing = target.signature.kind == FailureKind.MISSING_ERROR.value
    try:
        with outside():
            ref = accuracy.run_with_grads(gm, inputs, forward_context=within)
    except Exception as exc:
        if target.signature.kind not in (FailureKind.CRASH.value, FailureKind.MISSING_ERROR.value):
            return Verdict.INVALID, None
        eager_error = exc
    finally:
        rng.restore()
    if missing and eager_error is None:
        return Verdict.PASS, None  # eager raises nothing here: not this failure
    compiled, compile_errors = _compile_through_dynamo(gm, target)
    try:
        with outside():
            res = accuracy.run_with_grads(compiled, inputs, forward_context=within)
        accuracy.cuda_sync(inputs)  # a kernel that faults shows here (a crash: see serve.py)
    except Exception as exc:
        if (
            eager_error is not None
            and type(root_cause(exc)) is type(root_cause(eager_error))
            and not compile_errors
        ):
            return Verdict.PASS, None  # raises as eager does: no crash, no missing error
        kind = FailureKind.COMPILE if compile_errors else FailureKind.RUNTIME
        sig = FailureSignature.from_exception(target.stage, kind, (compile_errors or [exc])[0])
        return target.verdict(sig), sig.to_json()
    finally:
        rng.restore()
    if eager_error is not None:
        if missing:  # returned where eager raised
            sig = missing_error(target.stage, eager_error)
            return target.verdict(sig), sig.to_json()
        return Verdict.PASS, None  # no crash (nor eager's error): not this failure
    forward_kind = "forward" if ref.grads else "inference"
    if target.checking:
        roundings = None
        if amb is not None and amb.coarse() is not None:  # the program's autocast policy
            roundings = float64.autocast_roundings(gm, inputs, amb.enter)
        fp64 = None
        if not strict:
            with outside():
                fp64 = float64.float64_outcome(
                    gm, inputs, rng, forward_context=within, roundings=roundings
                )
        verdict = accuracy.judge_outcomes(
            ref,
            res,
            fp64,
            strict=strict,
            stage=target.stage,
            forward_kind=forward_kind,
            # roundings are only found under an ambient state
            coarse=cast("Ambient", amb).coarse() if roundings else None,
        )
        if verdict is not None:
            return target.verdict(verdict[0]), verdict[0].to_json()
    return Verdict.PASS, None


def _compile_through_dynamo(
    gm: torch.fx.GraphModule, target: Target
) -> tuple[CompiledFn, list[BaseException]]:
    """The candidate compiled as repro.py compiles it: through Dynamo (symbolic sizes
    stay symbolic with dynamic=True), with the stage and the program's options.
    Compile errors surface at the first call; they are collected here."""
    spec = target.spec
    options = accuracy.with_fallback_random(
        spec.options, checking=target.checking, stage=target.stage, gm=gm
    )
    # the program's own backend only when the stage is that backend (--backend
    # overrides it, as in the run that found the failure)
    own = spec.user_backend is not None and backend_name(spec.user_backend) == target.stage
    compile_fn = build_stage(
        target.stage,
        _PlainHooks(),
        user_backend=spec.user_backend if own else None,
        mode=spec.mode,
        options=options or None,
        dynamic=spec.dynamic,
    )
    errors: list[BaseException] = []

    def backend(g: torch.fx.GraphModule, example_inputs: Sequence[object]) -> CompiledFn:
        try:
            return compile_fn(g, example_inputs)
        except Exception as exc:
            errors.append(exc)
            raise

    # torch's own entry point: in a worker torch.compile is tcompile's.  The bound
    # forward, not the module: GraphModule's call wrapper would be traced too.
    import torch._dynamo

    candidate = fresh_copy(gm)
    compiled = torch._dynamo.optimize(backend, nopython=True, dynamic=spec.dynamic)(
        candidate.forward
    )
    return compiled, errors


def compiler_for(target: Target) -> CompilerFn:
    """``(gm, inputs) -> callable``: a graph compiled as candidates are (numerics.py)."""
    if target.level == "aot":
        from torch._inductor.compile_fx import compile_fx_inner

        def aot(gm: torch.fx.GraphModule, inputs: Sequence[object]) -> CompiledFn:
            copies = cast("list[InputType]", [accuracy.clone_input(x) for x in inputs])
            compiled = compile_fx_inner(fresh_copy(gm), copies)
            return lambda *args: compiled(list(args))

        return aot
    return lambda gm, inputs: _compile_through_dynamo(gm, target)[0]


def judge_aot(gm: torch.fx.GraphModule, inputs: list[InputType], target: Target) -> Judgement:
    """An AOT-level candidate: ATen ops, compiled by inductor's compile_fx_inner (as
    inductor compiles the forward/backward/inference graphs it is handed)."""
    from torch._inductor.compile_fx import compile_fx_inner

    strict = target.accuracy == AccuracyMode.STRICT

    def clones() -> list[InputType]:
        return [accuracy.clone_input(x) for x in inputs]

    with torch.no_grad():
        try:
            ref = accuracy.Outcome(accuracy.flatten(gm(*clones())), [])
        except Exception:
            return Verdict.INVALID, None
        kind = FailureKind.COMPILE
        try:
            compiled = compile_fx_inner(fresh_copy(gm), clones())
            kind = FailureKind.RUNTIME
            res = accuracy.Outcome(accuracy.flatten(compiled(clones())), [])
            accuracy.cuda_sync(inputs)
        except Exception as exc:
            sig = FailureSignature.from_exception(target.stage, kind, exc)
            return target.verdict(sig), sig.to_json()
        if target.checking:
            fp64 = None if strict else float64.float64_outcome(gm, inputs, grads=False)
            verdict = accuracy.judge_outcomes(
                ref, res, fp64, strict=strict, stage=target.stage, forward_kind=target.graph_kind
            )
            if verdict is not None:
                return target.verdict(verdict[0]), verdict[0].to_json()
    return Verdict.PASS, None

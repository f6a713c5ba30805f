"""Judging one candidate graph, inside a worker (DESIGN.md mechanism 7).

A worker is the user's own program, paused at the first call of the failing graph
(see worker.py), so the candidate is compiled with exactly the state the failure had:
the same backend object, mode and options, inductor config, custom passes and
patched decompositions.  The verdict says whether the *same* failure shows.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from . import accuracy
from .signature import FailureKind, FailureSignature


@dataclasses.dataclass
class Target:
    """The failure being minified and how to compile candidates."""

    signature: FailureSignature
    stage: str
    accuracy: str  # off | loose | strict
    user_backend: Any = None
    mode: str | None = None
    options: dict[str, Any] | None = None
    dynamic: bool | None = None
    level: str = "dynamo"  # or "aot": candidates are AOT graphs, compiled by compile_fx_inner
    graph_kind: str = "forward"


class _PlainHooks:
    def compile(
        self, kind: str, gm: Any, example_inputs: Any, real_compile: Any, **kwargs: Any
    ) -> Any:
        return real_compile(gm, example_inputs, **kwargs)


def _fresh_graph(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A copy without the fake-tensor metadata of the original trace (it belongs to
    another fake mode); the compiler derives it again from the real inputs."""
    g = copy.deepcopy(gm)
    for n in g.graph.nodes:
        for key in ("example_value", "val", "tensor_meta", "grapharg"):
            n.meta.pop(key, None)
    g.recompile()
    return g


def accuracy_signature(
    stage: str, strict: bool, mismatch: accuracy.Mismatch, forward_kind: str
) -> FailureSignature:
    graph_kind = "backward" if mismatch.where.startswith("grad") else forward_kind
    return FailureSignature(
        stage=stage,
        kind=FailureKind.ACCURACY.value,
        exc_type="StrictAccuracyError" if strict else "AccuracyError",
        message=f"{graph_kind} {mismatch.where.split()[0]} differs from eager",
        frame="",
    )


def judge_aot(
    gm: torch.fx.GraphModule, inputs: list[Any], target: Target
) -> tuple[str, dict[str, Any] | None]:
    """An AOT-level candidate: ATen ops, compiled by inductor's compile_fx_inner (as
    inductor compiles the forward/backward/inference graphs it is handed)."""
    from torch._inductor.compile_fx import compile_fx_inner

    strict = target.accuracy == "strict"

    def clones(dtype: Any = None) -> list[Any]:
        return [accuracy.clone_input(x, dtype) for x in inputs]

    with torch.no_grad():
        try:
            ref = accuracy.Outcome(accuracy.flatten(gm(*clones())), [])
        except Exception:
            return "invalid", None
        try:
            compiled = compile_fx_inner(_fresh_graph(gm), clones())
        except Exception as exc:
            sig = FailureSignature.from_exception(target.stage, FailureKind.COMPILE, exc)
            return _verdict(sig, target), sig.to_json()
        try:
            res = accuracy.Outcome(accuracy.flatten(compiled(clones())), [])
            accuracy.cuda_sync(inputs)
        except Exception as exc:
            sig = FailureSignature.from_exception(target.stage, FailureKind.RUNTIME, exc)
            return _verdict(sig, target), sig.to_json()
        if target.accuracy != "off" or target.signature.kind == FailureKind.ACCURACY.value:
            fp64 = None
            if not strict:
                try:
                    fp64 = accuracy.Outcome(
                        accuracy.flatten(accuracy.to_float64(gm)(*clones(torch.float64))), []
                    )
                except Exception:
                    fp64 = None
            mismatch = accuracy.compare(ref, res, fp64, strict=strict)
            if mismatch is not None:
                if target.graph_kind == "backward":  # a backward graph's outputs are gradients
                    mismatch = accuracy.Mismatch(
                        "grad " + mismatch.where.split()[-1], mismatch.detail
                    )
                sig = accuracy_signature(target.stage, strict, mismatch, target.graph_kind)
                return _verdict(sig, target), sig.to_json()
    return "pass", None


def judge(
    gm: torch.fx.GraphModule, inputs: list[Any], target: Target
) -> tuple[str, dict[str, Any] | None]:
    """("same_failure" | "other_failure" | "pass" | "invalid", signature or None)."""
    if target.level == "aot":
        return judge_aot(gm, inputs, target)
    from .stages import backend_name, build_stage

    strict = target.accuracy == "strict"
    checking = target.accuracy != "off" or target.signature.kind == FailureKind.ACCURACY.value
    rng = accuracy.RngState()
    # the candidate must run eagerly: otherwise it is not a program, let alone a bug
    try:
        ref = accuracy.run_with_grads(gm, inputs)
    except Exception:
        return "invalid", None
    finally:
        rng.restore()
    wants_grad = bool(ref.grads)
    forward_kind = "forward" if wants_grad else "inference"
    options = dict(target.options or {})
    if checking and target.stage == "inductor" and accuracy.has_random_ops(gm):
        options.setdefault("fallback_random", True)
    candidate = _fresh_graph(gm)
    sig: FailureSignature | None = None
    compile_errors: list[BaseException] = []
    # the program's own backend only when the stage is that backend (--backend
    # overrides it, as in the run that found the failure)
    own = target.user_backend is not None and backend_name(target.user_backend) == target.stage
    compile_fn = build_stage(
        target.stage,
        _PlainHooks(),
        user_backend=target.user_backend if own else None,
        mode=target.mode,
        options=options or None,
        dynamic=target.dynamic,
    )

    def backend(g: Any, example_inputs: Any) -> Any:
        try:
            return compile_fn(g, example_inputs)
        except Exception as exc:
            compile_errors.append(exc)
            raise

    # Through Dynamo, as repro.py does it (symbolic sizes stay symbolic with
    # dynamic=True).  torch's own entry point: in a worker torch.compile is tcompile's.
    import torch._dynamo

    # the bound forward, not the module: GraphModule's call wrapper would be traced too
    compiled = torch._dynamo.optimize(backend, nopython=True, dynamic=target.dynamic)(
        candidate.forward
    )
    try:
        res = accuracy.run_with_grads(compiled, inputs)
        accuracy.cuda_sync(inputs)  # a kernel that faults shows here (a crash: see worker.serve)
    except Exception as exc:
        if compile_errors:
            sig = FailureSignature.from_exception(
                target.stage, FailureKind.COMPILE, compile_errors[0]
            )
        else:
            sig = FailureSignature.from_exception(target.stage, FailureKind.RUNTIME, exc)
        return _verdict(sig, target), sig.to_json()
    finally:
        rng.restore()
    if checking:
        fp64 = None
        if not strict:
            try:
                fp64 = accuracy.run_with_grads(accuracy.to_float64(gm), inputs, dtype=torch.float64)
            except Exception:
                fp64 = None
            finally:
                rng.restore()
        mismatch = accuracy.compare(ref, res, fp64, strict=strict)
        if mismatch is not None:
            sig = accuracy_signature(target.stage, strict, mismatch, forward_kind)
            return _verdict(sig, target), sig.to_json()
    return "pass", None


def _verdict(sig: FailureSignature, target: Target) -> str:
    return "same_failure" if sig.matches(target.signature) else "other_failure"

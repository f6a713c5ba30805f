"""Building the stages of the stack (compiler/stack.py) as backends, inside the program.

Each stage is built with *recording* AOT compilers so that tcompile sees every
forward, backward and inference graph: the builders take an :class:`AotHooks` whose
``compile`` wraps the real AOT-level compile (child/runners.py has tcompile's; the
minifier's judge uses plain ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..stack import Stage

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch
    from torch._inductor.utils import InputType

    # a compiled graph: what runs in the graph's place (boxed or not)
    CompiledFn = Callable[..., object]
    # a backend's compiler function: (graph, example inputs) -> the compiled graph
    CompilerFn = Callable[[torch.fx.GraphModule, Sequence[object]], CompiledFn]


class AotHooks(Protocol):
    def compile(
        self,
        kind: str,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[object],
        real_compile: Callable[..., CompiledFn],
        **kwargs: object,
    ) -> CompiledFn: ...


def _boxed_nop(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> CompiledFn:
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(gm.forward)


def _aot_stage(hooks: AotHooks, *, decomp_partition: bool) -> CompilerFn:
    from torch._dynamo.backends.common import aot_autograd

    def recording(kind: str) -> CompilerFn:
        def compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> CompiledFn:
            return hooks.compile(kind, gm, example_inputs, _boxed_nop)

        return compiler

    kwargs: dict[str, object] = dict(
        fw_compiler=recording("forward"),
        bw_compiler=recording("backward"),
        inference_compiler=recording("inference"),
    )
    if decomp_partition:
        import functools

        from torch._functorch.partitioners import min_cut_rematerialization_partition
        from torch._inductor.compile_fx import select_decomp_table

        kwargs["decompositions"] = select_decomp_table()
        kwargs["partition_fn"] = functools.partial(
            min_cut_rematerialization_partition, compiler="inductor"
        )
    backend = aot_autograd(**kwargs)

    def compile_stage(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> CompiledFn:
        if decomp_partition:
            import torch._functorch.config as functorch_config

            with functorch_config.patch(unlift_effect_tokens=True):
                return backend(gm, example_inputs)
        return backend(gm, example_inputs)

    return compile_stage


def _inductor_stage(
    hooks: AotHooks, mode: str | None, options: dict[str, object] | None, dynamic: bool | None
) -> CompilerFn:
    import torch
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner

    # torch's own wrapper turns mode/options into config patches (and validates them).
    wrapper = torch._TorchCompileInductorWrapper(mode, options, dynamic)  # type: ignore[attr-defined]
    patches = dict(wrapper.config)

    # loosely typed: compile_fx types inner_compile as returning an OutputCode, where
    # tcompile's hooks return other callables (a runner, a server, an eager fallback)
    def inner(gm: torch.fx.GraphModule, example_inputs: Sequence[object], **kwargs: object) -> Any:
        if kwargs.get("is_backward"):
            kind = "backward"
        elif kwargs.get("is_inference"):
            kind = "inference"
        else:
            kind = "forward"
        return hooks.compile(kind, gm, example_inputs, compile_fx_inner, **kwargs)

    def compile_stage(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> CompiledFn:
        # a callable here (compile_fx's str / list / Weights results are AOTInductor's);
        # the graph's inputs are what torch names InputType
        inputs = cast("Sequence[InputType]", example_inputs)
        return cast(
            "CompiledFn",
            compile_fx(gm, inputs, inner_compile=inner, config_patches=patches),
        )

    return compile_stage


def build_stage(
    stage: str,
    hooks: AotHooks,
    *,
    user_backend: str | Callable[..., object] | None = None,
    mode: str | None = None,
    options: dict[str, object] | None = None,
    dynamic: bool | None = None,
) -> CompilerFn:
    """A compiler function ``(gm, example_inputs) -> callable`` for ``stage``.

    ``stage`` is one of :class:`Stage` or the name of the user's backend, in which case
    ``user_backend`` (a name or callable) is compiled through torch's own wrapper with
    the user's ``mode``/``options``.
    """
    if stage == Stage.EAGER:
        return lambda gm, example_inputs: gm.forward
    if stage == Stage.AOT_EAGER:
        return _aot_stage(hooks, decomp_partition=False)
    if stage == Stage.AOT_EAGER_DECOMP_PARTITION:
        return _aot_stage(hooks, decomp_partition=True)
    if stage == Stage.INDUCTOR:
        return _inductor_stage(hooks, mode, options, dynamic)
    import torch

    target = user_backend if user_backend is not None else stage
    return torch._TorchCompileWrapper(target, mode, options, dynamic)  # type: ignore[attr-defined]


def aot_kind_of_failure(exc: BaseException, example_inputs: Sequence[object]) -> str:
    """The graph a stage's compile failed in when no AOT-level compile had begun.

    ``"dynamo"`` when the error was raised before AOTAutograd got the graph (inductor's
    pre-grad passes, the backend's own set-up); once AOTAutograd has it (tracing with
    decompositions, the joint graph's pattern passes, the partitioner), the graph being
    compiled is the joint graph of a training step (``"joint"``: there is no forward or
    backward graph yet) or the inference graph.  AOTAutograd's entry is recognised by
    its code object, not by file names (owners.py); training is AOTAutograd's own test:
    grad mode on and an input that requires grad.
    """
    import inspect
    import traceback

    from torch._functorch import aot_autograd

    entry = inspect.unwrap(aot_autograd.aot_module_simplified).__code__
    seen: set[int] = set()
    cur: BaseException | None = exc
    inside = False
    while cur is not None and id(cur) not in seen and not inside:
        seen.add(id(cur))
        inside = any(frame.f_code is entry for frame, _ in traceback.walk_tb(cur.__traceback__))
        cur = cur.__cause__ or cur.__context__
    if not inside:
        return "dynamo"
    import torch

    training = torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs
    )
    return "joint" if training else "inference"

"""Accuracy checking (DESIGN.md mechanism 8).

A compiled result is *wrong* when it is much further from a float64 reference than
eager, in the original dtype, is.  Forward outputs are compared and, where inputs
require grad, the gradients of a fixed random projection of the outputs.  Strict mode
compares compiled with eager directly, with the dtype's usual tolerances.

Random ops: the caller compiles with ``fallback_random=True`` and runs reference and
compiled code from the same RNG state, so that dropout draws the same mask in both.
A reference that differs between two eager runs from the same RNG state is
*nondeterministic*: it is reported, never judged.

This is the one accuracy check: the graph runner of ``tcompile run``, the minifier's
judges and the check of repro.py all judge with :func:`judge_outcomes`.  Part of the
contract both processes share, it imports torch only when a function runs.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

# the rule itself: compiler/accuracy_rule.py (portable: repro.py files carry its text)
from .accuracy_rule import compare_tensor as compare_tensor
from .signature import FailureKind, FailureSignature

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import torch

    from .snapshot import Snapshot

_T = TypeVar("_T")


class AccuracyMode(str, enum.Enum):
    """How compiled results are judged (``--accuracy`` / ``--strict-accuracy``): one
    vocabulary from the CLI through the hook config, the workers and the writers (a
    str enum: it travels in JSON as its value and compares equal to it)."""

    OFF = "off"  # failures that raise or crash only
    LOOSE = "loose"  # against eager and a float64 reference (--accuracy)
    STRICT = "strict"  # against eager directly, torch.testing's tolerances


@dataclasses.dataclass
class Outcome:
    outputs: list[object]
    grads: list[torch.Tensor | None]
    # input index -> (value before, value after) for each input the call updated in place
    mutated: dict[int, tuple[torch.Tensor, torch.Tensor]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Mismatch:
    where: str  # "output 0" / "grad 3"
    detail: str

    @property
    def category(self) -> str:
        """dtype | shape | values: a dtype or shape that differs is its own failure,
        never hidden behind a numeric comparison."""
        for cat in ("dtype", "shape"):
            if self.detail.startswith(cat + " "):
                return cat
        return "values"

    def __str__(self) -> str:
        return f"{self.where}: {self.detail}"


class RngState:
    """Save the CPU and CUDA RNG states once; restore them before each run."""

    def __init__(self) -> None:
        import torch

        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None

    def restore(self) -> None:
        import torch

        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            try:
                torch.cuda.set_rng_state_all(self.cuda)
            except Exception:
                # a kernel faulted and the CUDA context is dead: the failure being
                # handled is the one to report, not this
                pass


def cuda_sync(values: Sequence[object]) -> None:
    """Wait for the GPU the values live on: a kernel that faulted raises here, in the
    graph that launched it, not at some later synchronisation."""
    import torch

    for x in values:
        if isinstance(x, torch.Tensor) and x.is_cuda:
            torch.cuda.synchronize(x.device)
            return


def clone_input(x: _T, dtype: torch.dtype | None = None) -> _T:
    """An exact copy of one input (strides, storage offset, requires_grad kept: see
    snapshot.py), floating values cast to ``dtype`` when given."""
    import torch

    from .snapshot import Snapshot

    if not isinstance(x, torch.Tensor):
        return x
    y = Snapshot([x]).materialize(dtype, grads=False)[0][0]
    if x.requires_grad and (y.is_floating_point() or y.is_complex()):
        y.requires_grad_(True)
    return y


def flatten(value: object) -> list[object]:
    if isinstance(value, (list, tuple)):
        out: list[object] = []
        for v in value:
            out.extend(flatten(v))
        return out
    if isinstance(value, dict):
        return flatten(list(value.values()))
    return [value]


def run_with_grads(
    fn: Callable[..., object],
    inputs: Sequence[object] | Snapshot,
    dtype: torch.dtype | None = None,
    tangents: Sequence[Any] | None = None,
    forward_context: Callable[[], AbstractContextManager[object]] | None = None,
) -> Outcome:
    """Run ``fn`` on exact copies of ``inputs`` (a list or a snapshot.Snapshot); then
    backprop: the given ``tangents`` (one per output, None for an output that got no
    gradient), or else a fixed random projection of the outputs.

    An input that requires grad is passed as a non-leaf with the program's layout (an
    identity of the leaf the gradient is taken for), as activations are in the
    program: a graph may update one in place, which autograd refuses for a leaf.
    Inputs the call updated in place are kept in ``mutated``, before and after.
    ``tangents=[]``: no backward.  ``forward_context``: the state the forward runs in
    (the program's autocast), the backward running in the caller's."""
    import contextlib

    import torch

    from .snapshot import Snapshot, changed

    snap = inputs if isinstance(inputs, Snapshot) else Snapshot(inputs)
    args, leaves = snap.materialize(dtype)
    before = snap.materialize(dtype, grads=False)[0]
    with (forward_context or contextlib.nullcontext)():
        outputs = flatten(fn(*args))
    mutated = {
        i: (b, a.detach())
        for i, (b, a) in enumerate(zip(before, args))
        if isinstance(a, torch.Tensor) and changed(b, a)
    }
    diff_outs = [
        (i, o)
        for i, o in enumerate(outputs)
        if isinstance(o, torch.Tensor)
        and o.requires_grad
        and (o.is_floating_point() or o.is_complex())
    ]
    grads: list[torch.Tensor | None] = []
    if tangents is not None:
        pairs = [
            (o, tangents[i].to(device=o.device, dtype=o.dtype))
            for i, o in diff_outs
            if i < len(tangents) and tangents[i] is not None
        ]
        if leaves and pairs:
            grads = list(
                torch.autograd.grad(
                    [o for o, _ in pairs], leaves, [t for _, t in pairs], allow_unused=True
                )
            )
    elif leaves and diff_outs:
        gen = torch.Generator().manual_seed(1234)
        loss = 0
        for _, o in diff_outs:
            cot = torch.randn(o.shape, generator=gen, dtype=torch.float64).to(
                device=o.device, dtype=o.dtype
            )
            loss = loss + (o * cot).sum()
        grads = list(torch.autograd.grad(loss, leaves, allow_unused=True))
    outputs = [o.detach() if isinstance(o, torch.Tensor) else o for o in outputs]
    return Outcome(outputs, grads, mutated)


def compare(
    ref: Outcome,
    res: Outcome,
    fp64: Outcome | None,
    *,
    strict: bool,
    coarse: torch.dtype | None = None,
) -> Mismatch | None:
    if len(ref.outputs) != len(res.outputs):
        return Mismatch(
            "outputs", f"{len(res.outputs)} outputs where eager gives {len(ref.outputs)}"
        )
    for i, (a, b) in enumerate(zip(ref.outputs, res.outputs)):
        c = fp64.outputs[i] if fp64 is not None and i < len(fp64.outputs) else None
        why = compare_tensor(a, b, c, strict=strict, coarse=coarse)
        if why:
            return Mismatch(f"output {i}", why)
    for i in sorted(set(ref.mutated) | set(res.mutated)):
        a, b = ref.mutated.get(i), res.mutated.get(i)
        # an input only one side updated: the other side's value is the one it had
        a_after = a[1] if a is not None else b[0]
        b_after = b[1] if b is not None else a[0]
        c = fp64.mutated[i][1] if fp64 is not None and i in fp64.mutated else None
        why = compare_tensor(a_after, b_after, c, strict=strict, coarse=coarse)
        if why:
            side = (
                ""
                if a is not None and b is not None
                else (
                    " (updated in place by compiled only)"
                    if a is None
                    else " (updated in place by eager only)"
                )
            )
            return Mismatch(f"input {i}", why + side)
    for i, (a, b) in enumerate(zip(ref.grads, res.grads)):
        if a is None and b is None:
            continue
        if (a is None) != (b is None):
            return Mismatch(f"grad {i}", "gradient missing on one side")
        c = fp64.grads[i] if fp64 is not None and i < len(fp64.grads) else None
        why = compare_tensor(a, b, c, strict=strict, coarse=coarse)
        if why:
            return Mismatch(f"grad {i}", why)
    return None


def outcomes_identical(a: Outcome, b: Outcome) -> bool:
    """Two eager runs from the same RNG state: bitwise equal when deterministic."""
    import torch

    xs = a.outputs + a.grads + [v[1] for _, v in sorted(a.mutated.items())]
    ys = b.outputs + b.grads + [v[1] for _, v in sorted(b.mutated.items())]
    if len(xs) != len(ys):
        return False
    for x, y in zip(xs, ys):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.equal(
                x.detach().nan_to_num(0), y.detach().nan_to_num(0)
            ):
                return False
    return True


_RANDOM_NAMES = (
    "rand",
    "bernoulli",
    "multinomial",
    "normal",
    "uniform",
    "poisson",
    "exponential_",
    "geometric_",
    "cauchy_",
    "log_normal_",
)
# ops that draw only when asked to: (index of p, index of training, training's default)
# -- ``F.dropout(x, p, training)``, ``torch.dropout(x, p, train)``, aten's
# ``native_dropout(x, p, train)``; ``F.alpha_dropout`` and ``F.rrelu`` are off unless
# training=True is passed
_DRAWS_WHEN = {
    "alpha_dropout": (1, 2, False),
    "feature_alpha_dropout": (1, 2, False),
    "rrelu": (None, 3, False),
    "rrelu_": (None, 3, False),
}


def _arg(node: torch.fx.Node, index: int | None, names: tuple[str, ...], default: object) -> object:
    if index is not None and len(node.args) > index:
        return node.args[index]
    return next((node.kwargs[n] for n in names if n in node.kwargs), default)


def _draws(node: torch.fx.Node, name: str) -> bool:
    """Whether one call draws random numbers: a dropout at p=0 or not training draws
    none (nanoGPT's ``nn.Dropout(0.0)``, any model in eval mode)."""
    base = name.lower().rsplit(".", 1)[-1]
    if "dropout" in base or base in _DRAWS_WHEN:
        p_at, train_at, train_default = _DRAWS_WHEN.get(base, (1, 2, True))
        p = _arg(node, p_at, ("p",), 0.5) if p_at is not None else 1.0
        training = _arg(node, train_at, ("training", "train"), train_default)
        if isinstance(p, (int, float)) and not isinstance(p, bool) and p == 0:
            return False
        return training is not False
    return any(r in base for r in _RANDOM_NAMES) and "normalize" not in base


def has_random_ops(gm: torch.fx.GraphModule) -> bool:
    """Whether a graph draws random numbers (then compiled code must use eager's RNG
    path, inductor's ``fallback_random``, for its results to be comparable): read from
    the graph's calls and their arguments, not from names alone -- a dropout at p=0 or
    in eval mode draws nothing, and then the check changes nothing in the program."""

    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method"):
            name = (
                n.target
                if isinstance(n.target, str)
                else getattr(n.target, "__name__", str(n.target))
            )
            if _draws(n, str(name)):
                return True
        elif n.op == "call_module":
            mod = gm.get_submodule(n.target)
            kind = type(mod).__name__.lower()
            if "dropout" in kind and (getattr(mod, "p", 0.5) == 0 or not mod.training):
                continue
            if "dropout" in kind or ("rrelu" in kind and mod.training):
                return True
    return False


def graph_kind_of(mismatch: Mismatch, forward_kind: str) -> str:
    """The graph a mismatch belongs to: a gradient that differs is the backward's."""
    return "backward" if mismatch.where.startswith("grad") else forward_kind


def accuracy_signature(
    stage: str, strict: bool, mismatch: Mismatch, forward_kind: str
) -> FailureSignature:
    """The signature of an accuracy failure: which graph and which of its results,
    never the numbers."""
    graph_kind = graph_kind_of(mismatch, forward_kind)
    what = mismatch.where.split()[0]
    if mismatch.category != "values":  # DtypeMismatch / ShapeMismatch: said as such
        return FailureSignature(
            stage=stage,
            kind=FailureKind.ACCURACY.value,
            exc_type=f"{mismatch.category.capitalize()}Mismatch",
            message=f"{graph_kind} {what} {mismatch.category} differs from eager",
            frame="",
            result=what,
        )
    return FailureSignature(
        stage=stage,
        kind=FailureKind.ACCURACY.value,
        exc_type="StrictAccuracyError" if strict else "AccuracyError",
        message=f"{graph_kind} {what} differs from eager",
        frame="",
        result=what,
    )


def judge_outcomes(
    ref: Outcome,
    res: Outcome,
    fp64: Outcome | None,
    *,
    strict: bool,
    stage: str,
    forward_kind: str,
    coarse: torch.dtype | None = None,
) -> tuple[FailureSignature, Mismatch] | None:
    """The accuracy verdict on one compiled run: None when acceptable, else the
    failure's signature and what differs.  ``forward_kind`` "backward" means the graph
    *is* a backward graph (an AOT graph): its outputs are gradients.  ``coarse``: see
    :func:`compare_tensor`."""
    mismatch = compare(ref, res, fp64, strict=strict, coarse=coarse)
    if mismatch is None:
        return None
    if forward_kind == "backward" and not mismatch.where.startswith("grad"):
        mismatch = Mismatch("grad " + mismatch.where.split()[-1], mismatch.detail)
    return accuracy_signature(stage, strict, mismatch, forward_kind), mismatch


def with_fallback_random(
    options: Mapping[str, object] | None, *, checking: bool, stage: str, gm: torch.fx.GraphModule
) -> dict[str, object]:
    """The one rule for random ops: while accuracy is judged, inductor draws eager's
    random numbers (``fallback_random``), or a clean model with dropout looks broken."""
    out = dict(options or {})
    if checking and stage == "inductor" and has_random_ops(gm):
        out.setdefault("fallback_random", True)
    return out


def metadata_mismatch(
    expected: Sequence[tuple[torch.dtype, tuple[int, ...] | None] | None], outputs: object
) -> Mismatch | None:
    """Compiled outputs against the dtypes and shapes the graph promised (the fake
    values Dynamo traced with): checked on every first call, --accuracy or not."""
    import torch

    got = flatten(outputs)
    for i, (want, out) in enumerate(zip(expected, got)):
        if want is None or not isinstance(out, torch.Tensor):
            continue
        dtype, shape = want
        if out.dtype != dtype:
            return Mismatch(f"output {i}", f"dtype {out.dtype} where eager gives {dtype}")
        if shape is not None and tuple(out.shape) != shape:
            return Mismatch(f"output {i}", f"shape {tuple(out.shape)} where eager gives {shape}")
    return None

"""Shrinking a minimal graph's inputs, judged by the same workers and oracle as the graph.

After the graph is minimal, its inputs are often the program's: large, and real
values that would have to be embedded.  In order, each step kept only if the same
failure still shows:

1. seeded random values (inputs.py) instead of the real ones;
2. smaller shapes, every tensor at once: each distinct size is replaced everywhere it
   appears (tensors that broadcast together stay compatible) by 1, else halved while
   the failure still shows; then each dimension of each tensor on its own;
3. when random values do not reproduce, the real values are sliced to the smaller
   shapes, embedded when small (``INLINE_LIMIT`` elements), else kept in a sidecar.

Rank, dtype, device, layout (contiguous, channels-last, permuted, strided) and
requires_grad are kept; integer inputs draw from the range their real values had, so
indices stay valid; the sizes of a dynamic-shape graph (SymInt inputs) follow the
tensors they measure.  A budget of oracle calls bounds the extra time.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from ..minifier.interval import find_integer
from ..minifier.problem import Candidate, Problem, Stopped
from ..minifier.verdict import GraphOracle, Verdict
from .inputs import INLINE_LIMIT, InputSpec, build, spec_of, total_numel, with_values

if TYPE_CHECKING:
    import torch


@dataclasses.dataclass
class Shrunk:
    specs: list[InputSpec]
    sidecar: list[torch.Tensor]  # real values too large to embed, in the order specs name them
    calls: int
    numel_before: int
    numel_after: int
    values: str  # "random" | "inline" | "sidecar"
    steps: list[str]


class InputsFormat:
    """A graph's inputs as a case of the one search problem (minifier/problem.py):
    never cached (each step proposes inputs not tried before), every proposal judged
    (the steps below make them smaller), handed to the oracle as they are."""

    def key(self, case: list[object]) -> None:
        return None

    def size(self, case: list[object]) -> int:
        return 0  # each step is smaller by construction; the search keeps every one taken

    def admit(self, raw: list[object], best: list[object], grow: bool) -> list[object]:
        return raw

    def prepare(self, case: list[object]) -> None:
        pass

    def oracle_input(self, case: list[object]) -> list[object]:
        return case

    def step(
        self, pass_name: str, what: str, before: list[object], after: list[object], calls: int
    ) -> str:
        return what


class _Search(Problem[list[object]]):
    """The inputs' search: the one problem with its limits (a budget of calls, a
    deadline, the job's stop), one step at a time."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        oracle: GraphOracle,
        budget: int,
        stop: Callable[[], bool],
        deadline: float | None,
    ) -> None:
        def out_of_time() -> bool:
            return deadline is not None and time.monotonic() > deadline

        super().__init__(
            InputsFormat(),
            [],
            lambda inputs: oracle(gm, inputs),
            limits=lambda: stop() or out_of_time(),
            max_calls=budget,
            on_error=Verdict.OTHER_FAILURE,
            reraise=(),
        )

    @property
    def steps(self) -> list[str]:
        return self.history

    def fails(self, inputs: list[object], what: str) -> bool:
        """``inputs`` still fail the same way: taken (the step is in the history)."""
        self.pass_name = what.split(" ")[0]
        try:
            found = self.first_failing([Candidate(inputs, what)])
        except Stopped:
            return False
        if found is None:
            return False
        self.accept(found, what)
        return True


def shrink_inputs(
    gm: torch.fx.GraphModule,
    inputs: list[object],
    oracle: GraphOracle,
    *,
    budget: int = 40,
    stop: Callable[[], bool] = lambda: False,
    seconds: float | None = None,
) -> Shrunk:
    """Smaller inputs on which ``oracle`` still shows the failure (never larger).
    At most ``budget`` oracle calls, and no new call after ``seconds``."""
    import torch

    deadline = None if seconds is None else time.monotonic() + seconds
    search = _Search(gm, oracle, budget, stop, deadline)
    real = [x.detach() if isinstance(x, torch.Tensor) else x for x in inputs]
    specs = [spec_of(x, inputs, i) for i, x in enumerate(inputs)]
    before = total_numel(specs)
    if search.fails(build(specs), "seeded random values"):
        shapes = _shrink_shapes(
            search, [s.shape for s in specs], lambda sh: build(_reshape(specs, sh))
        )
        final = _reshape(specs, shapes)
        return Shrunk(final, [], search.calls, before, total_numel(final), "random", search.steps)

    def real_at(shapes: list[tuple[int, ...]]) -> list[object]:
        return [_slice(x, sh) if isinstance(x, torch.Tensor) else x for x, sh in zip(real, shapes)]

    def real_inputs(shapes: list[tuple[int, ...]]) -> list[object]:
        sliced = real_at(shapes)
        out = []
        for x, spec in zip(sliced, specs):
            if spec.kind == "size":  # a SymInt follows the tensor it measures
                i, d = spec.values
                out.append(shapes[i][d])
            else:
                out.append(x)
        return out

    shapes = _shrink_shapes(search, [s.shape for s in specs], real_inputs)
    small = real_at(shapes)
    final, sidecar = [], []
    for spec, x, sh in zip(specs, small, shapes):
        if spec.kind != "tensor":
            final.append(spec)
            continue
        x = cast("torch.Tensor", x)  # a tensor's spec: its input is a tensor
        spec = spec.with_shape(sh) if spec.layout != "strided" or sh != spec.shape else spec
        if x.numel() <= INLINE_LIMIT:
            final.append(with_values(spec, x))
        else:
            from .inputs import real_values

            sidecar.append(real_values(spec, x).clone())
            final.append(with_values(spec, x, sidecar_index=len(sidecar) - 1))
    return Shrunk(
        final,
        sidecar,
        search.calls,
        before,
        total_numel(final),
        "sidecar" if sidecar else "inline",
        search.steps,
    )


def _reshape(specs: list[InputSpec], shapes: list[tuple[int, ...]]) -> list[InputSpec]:
    return [
        s.with_shape(sh) if s.kind == "tensor" and sh != s.shape else s
        for s, sh in zip(specs, shapes)
    ]


def _slice(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The leading block of ``x`` with ``shape`` (its layout kept)."""
    if tuple(x.shape) == tuple(shape):
        return x
    return x[tuple(slice(0, n) for n in shape)]


def _shrink_shapes(
    search: _Search,
    shapes: list[tuple[int, ...]],
    make: Callable[[list[tuple[int, ...]]], list[object]],
) -> list[tuple[int, ...]]:
    """Smaller shapes on which the failure still shows: each distinct size everywhere
    at once (to 1, else halved while it fails), then each dimension on its own."""
    current = [tuple(s) for s in shapes]

    def attempt(candidate: list[tuple[int, ...]], what: str) -> bool:
        nonlocal current
        if candidate == current:
            return False
        try:
            inputs = make(candidate)
        except Exception:  # a shape the graph cannot take is not a candidate
            return False
        if search.fails(inputs, what):
            current = candidate
            return True
        return False

    def everywhere(old: int, new: int) -> list[tuple[int, ...]]:
        return [tuple(new if n == old else n for n in sh) for sh in current]

    for size in sorted({n for sh in current for n in sh if n > 1}, reverse=True):
        _halve(size, everywhere, attempt)
    for i, sh in enumerate(list(current)):
        for d in range(len(sh)):

            def one_dim(old: int, new: int, i: int = i, d: int = d) -> list[tuple[int, ...]]:
                out = list(current)
                dims = list(out[i])
                dims[d] = new
                out[i] = tuple(dims)
                return out

            _halve(current[i][d], one_dim, attempt)
    return current


def _halve(
    size: int,
    change: Callable[[int, int], list[tuple[int, ...]]],
    attempt: Callable[[list[tuple[int, ...]], str], bool],
) -> None:
    """Try ``size`` -> 1; else halve it as many times as the failure still shows (how
    many: the one interval search's ``find_integer``, an exponential probe then
    binary search).  A kept step is committed at once, and every later ask halves
    further, so each ask changes the size last kept."""
    if size <= 1:
        return
    if attempt(change(size, 1), f"size {size} -> 1"):
        return
    kept = size

    def holds(j: int) -> bool:
        nonlocal kept
        new = size >> j
        if attempt(change(kept, new), f"size {kept} -> {new}"):
            kept = new
            return True
        return False

    find_integer(holds, size.bit_length() - 2)  # size >> (bit_length - 1) is 1: tried

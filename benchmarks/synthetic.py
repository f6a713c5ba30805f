"""Synthetic FX graphs with planted bugs, and the oracle that finds them.

The "compiler" under test is an FX interpreter with planted bugs; the oracle runs
the graph both correctly and through the buggy interpreter and says whether the
outputs differ beyond tolerance, exactly as an accuracy oracle compares compiled
with eager.  Used by benchmarks/minifier_vs_torch.py and by tests.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

ATOL = 1e-3


def _amplify(x: torch.Tensor) -> torch.Tensor:  # named so the interpreter can spot it
    return x * 4


def _leaky(x: torch.Tensor, err: float) -> torch.Tensor:  # right in eager, err off "compiled"
    return x * 1.0


def _double(x: torch.Tensor) -> torch.Tensor:  # a gentler amplifier: 7 of them are needed
    return x * 2


def _soft(x: torch.Tensor) -> torch.Tensor:  # small outputs; "compiled", 1e-4 too large (relative)
    return 0.1 * torch.tanh(x)


class BuggyInterpreter(fx.Interpreter):
    """relu computes x + 1; exp of a neg computes 1.5x too much (a 'fusion' bug:
    only when the two nodes are adjacent); sigmoid is off by 1e-5 (tiny)."""

    def run_node(self, n: fx.Node) -> Any:
        result = super().run_node(n)
        if n.op == "call_function":
            if n.target is torch.relu:
                return self.env[n.args[0]] + 1  # type: ignore[index]
            if (
                n.target is torch.exp
                and isinstance(n.args[0], fx.Node)
                and n.args[0].target is torch.neg
            ):
                return result * 1.5
            if n.target is torch.sigmoid:
                return result + 1e-5
            if n.target is torch.negative:  # a small error: two of them show, one does not
                return result + 6e-4
            if n.target is _leaky:  # every application a little wrong: errors add up
                return result + n.args[1]
            if n.target is _soft:  # relative 1e-4 of at most 0.1: 7 doublings needed
                return result * (1 + 1e-4)
        return result


def _flat(v: Any) -> list[Any]:
    return [x for item in v for x in _flat(item)] if isinstance(v, (tuple, list)) else [v]


def oracle(gm: fx.GraphModule, inputs: list[Any]) -> bool:
    with torch.no_grad():
        ref = _flat(gm(*inputs))
        res = _flat(BuggyInterpreter(gm).run(*inputs))
    return any(
        isinstance(a, torch.Tensor) and not torch.allclose(a, b, rtol=0, atol=ATOL, equal_nan=True)
        for a, b in zip(ref, res)
    )


# ops that neither hide nor blow up a difference (no contraction like tanh's)
_SAFE = [
    (torch.add, (0.1,)),
    (torch.mul, (1.01,)),
    (torch.sub, (0.05,)),
    (torch.mul, (0.99,)),
    (torch.abs, ()),
]


def _op(g: fx.Graph, h: fx.Node, rng: random.Random) -> fx.Node:
    fn, extra = rng.choice(_SAFE)
    return g.call_function(fn, (h, *extra))


def chain(n: int, culprits: list[int], seed: int = 0, kind: str = "relu") -> fx.GraphModule:
    rng = random.Random(seed)
    g = fx.Graph()
    h = g.placeholder("x")
    i = 0
    while i < n:
        if i in culprits and kind == "relu":
            h = g.call_function(torch.relu, (h,))
        elif i in culprits and kind == "pair" and i + 2 < n:
            h = g.call_function(torch.sin, (h,))  # bounded, so exp(-h) stays visible
            h = g.call_function(torch.neg, (h,))
            i += 1
            h = g.call_function(torch.exp, (h,))
            i += 1
        elif i in culprits and kind == "tiny":
            h = g.call_function(torch.sigmoid, (h,))
            for _ in range(6):  # the error needs these to exceed tolerance
                i += 1
                h = g.call_function(_amplify, (h,))
            kind = "after-tiny"
        elif i in culprits and kind == "needs8":
            h = g.call_function(torch.sigmoid, (h,))  # 1e-5 * 2**7 > 1e-3: all 8 needed
            for _ in range(7):
                i += 1
                h = g.call_function(_double, (h,))
            kind = "after-tiny"
        elif i in culprits and kind == "doublings":
            # issue 51: one pointwise op 1e-4 wrong (relative; at most 1e-5 absolute)
            # that only the 7 ``x * 2`` right after it take past tolerance (6 do not);
            # ordinary ops before and after
            h = g.call_function(_soft, (h,))
            for _ in range(7):
                i += 1
                h = g.call_function(operator.mul, (h, 2))
        elif i in culprits and kind.startswith("surplus"):
            # issue 61: the doublings' run is longer than the repro needs (``surplus:K``:
            # K doublings, any 7 of them enough): the nodes in the middle of the run
            # must go, not only a prefix or a suffix of the graph
            h = g.call_function(torch.sigmoid, (h,))  # 1e-5 * 2**7 > 1e-3 > 1e-5 * 2**6
            for _ in range(int(kind.split(":")[1])):
                i += 1
                h = g.call_function(_double, (h,))
            kind = "after-tiny"
        elif i in culprits and kind.startswith("interleaved"):
            # issue 61: a 1e-4 error, then K doublings with ordinary ops between them
            # (``interleaved:K:G``: G ops after each), any 7 doublings enough: the
            # ordinary ops in the middle of the needed run must go
            _, k, gap = kind.split(":")
            h = g.call_function(_soft, (h,))
            for _ in range(int(k)):
                i += 1
                h = g.call_function(operator.mul, (h, 2))
                for _ in range(int(gap)):
                    i += 1
                    h = _op(g, h, rng)
            kind = "plain"
        elif i in culprits and kind.startswith("amplified"):
            # a tiny error (sigmoid, 1e-5) that exceeds tolerance only after all L
            # amplifying ops that follow it: 1e-5 * f**L > 1e-3 > 1e-5 * f**(L-1)
            length = int(kind.split(":")[1])
            factor = 100 ** (1 / (length - 0.5))
            h = g.call_function(torch.sigmoid, (h,))
            for _ in range(length):
                i += 1
                h = g.call_function(torch.mul, (h, factor))
            kind = "after-tiny"
        elif i in culprits and kind.startswith("spread"):
            # the same, with the L amplifying ops spread over the rest of the graph,
            # ordinary ops between them
            length = int(kind.split(":")[1])
            factor = 100 ** (1 / (length - 0.5))
            h = g.call_function(torch.sigmoid, (h,))
            gap = max(1, (n - i - 1) // (length + 1))
            placed = 0
            while i + 1 < n:
                i += 1
                if placed < length and (i - culprits[0]) % gap == 0:
                    h = g.call_function(torch.mul, (h, factor))
                    placed += 1
                else:
                    h = g.call_function(torch.add, (h, 0.1))
            assert placed == length, (placed, length, n)
            kind = "done"
        elif i in culprits and kind.startswith("grows"):
            # errors that grow along a long chain: a tiny error whose every later op
            # multiplies it a little, so that it exceeds tolerance only after a share
            # of the rest of the graph (``grows:F``: F of the ops after the culprit)
            share = float(kind.split(":")[1])
            length = max(2, int((n - i - 1) * share))
            factor = 100 ** (1 / (length - 0.5))
            h = g.call_function(torch.sigmoid, (h,))
            while i + 1 < n:
                i += 1
                h = g.call_function(torch.mul, (h, factor))
            kind = "done"
        elif kind.startswith("leaky"):
            # every op a little wrong (err each): errors add up along the chain, any
            # K of them fail and K - 1 do not (``leaky:F``: K is F of the graph);
            # there is no one culprit
            k = max(2, int(n * float(kind.split(":")[1])))
            h = g.call_function(_leaky, (h, ATOL / (k - 0.5)))
        elif i in culprits and kind == "interacting":
            h = g.call_function(torch.negative, (h,))  # 6e-4 each: both, or no failure
        elif kind == "after-tiny":
            h = g.call_function(torch.add, (h, 0.1))  # keeps the error as it is
        else:
            h = _op(g, h, rng)
        i += 1
    g.output((h,))
    return fx.GraphModule(torch.nn.Module(), g)


def residual(n: int, culprit: int, seed: int = 0, outputs: int = 4) -> fx.GraphModule:
    """Blocks h = h + 0.01 * f(h) (f: two ops); every n/outputs nodes an output is taken."""
    rng = random.Random(seed)
    g = fx.Graph()
    h = g.placeholder("x")
    outs: list[fx.Node] = []
    count = 0
    every = max(3, n // outputs)
    while count < n - 1:
        a = g.call_function(torch.relu, (h,)) if count <= culprit < count + 4 else _op(g, h, rng)
        b = _op(g, a, rng)
        c = g.call_function(torch.mul, (b, 0.01))
        h = g.call_function(torch.add, (h, c))
        count += 4
        if count // every != (count - 4) // every:
            outs.append(h)
    if not outs or outs[-1] is not h:
        outs.append(h)
    g.output(tuple(outs))
    return fx.GraphModule(torch.nn.Module(), g)


def far_producer(n: int, seed: int = 0) -> fx.GraphModule:
    """The culprit (relu), past the middle, reads a value made at the very start."""
    rng = random.Random(seed)
    g = fx.Graph()
    x = g.placeholder("x")
    early = g.call_function(torch.mul, (x, 1.5))
    h = early
    for i in range(n - 3):
        if i == int(n * 0.6):
            bad = g.call_function(torch.relu, (early,))
            h = g.call_function(torch.add, (h, bad))
        else:
            h = _op(g, h, rng)
    g.output((h,))
    return fx.GraphModule(torch.nn.Module(), g)


CASES: dict[str, Callable[[int], fx.GraphModule]] = {
    "chain, one culprit": lambda n: chain(n, [int(n * 0.6)]),
    "residual, several outputs": lambda n: residual(n, int(n * 0.45)),
    "two adjacent nodes": lambda n: chain(n, [int(n * 0.5)], kind="pair"),
    "tiny error, amplified": lambda n: chain(n, [int(n * 0.4)], kind="tiny"),
    "two culprits": lambda n: chain(n, [int(n * 0.3), int(n * 0.8)]),
    "8 ops all needed": lambda n: chain(n, [int(n * 0.4)], kind="needs8"),
    "producer far upstream": far_producer,
    "two culprits both needed": lambda n: chain(
        n, [int(n * 0.45), int(n * 0.55)], kind="interacting"
    ),
    # issue 36: errors that grow along a long chain -- a tiny error every later op
    # multiplies a little (the needed ops are a share of the graph), or every op a
    # little wrong and the errors adding up (any K of them)
    **{
        f"error grows over {int(share * 100)}% of the rest": (
            lambda n, share=share: chain(n, [int(n * 0.3)], kind=f"grows:{share}")
        )
        for share in (0.1, 0.5, 0.9)
    },
    **{
        f"errors add up, any {int(share * 100)}% of the ops": (
            lambda n, share=share: chain(n, [], kind=f"leaky:{share}")
        )
        for share in (0.05, 0.25)
    },
    # issue 51: a 1e-4 error in the middle of the chain, 7 doublings after it needed
    "amplified: 1e-4, 7 doublings": lambda n: chain(n, [n // 2], kind="doublings"),
    # issue 61: a run of K doublings where any 7 are enough (the middle must go)
    **{
        f"7 of {k} doublings needed": (lambda n, k=k: chain(n, [int(n * 0.3)], kind=f"surplus:{k}"))
        for k in (12, 24, 48)
    },
    **{
        f"7 of {k} doublings, {gap} ops between": (
            lambda n, k=k, gap=gap: chain(n, [int(n * 0.2)], kind=f"interleaved:{k}:{gap}")
        )
        for k, gap in ((9, 1), (12, 2), (16, 3))
    },
    # issue 26: a small error that a chain of L later ops must amplify past tolerance
    **{
        f"amplified by {length} ops": (
            lambda n, length=length: chain(n, [int(n * 0.3)], kind=f"amplified:{length}")
        )
        for length in (4, 8, 12, 16)
    },
    # ... the L amplifying ops spread over the rest of the graph, ordinary ops between
    **{
        f"amplified by {length} spread ops": (
            lambda n, length=length: chain(n, [int(n * 0.3)], kind=f"spread:{length}")
        )
        for length in (4, 8, 12, 16)
    },
}


def inputs() -> list[torch.Tensor]:
    return [torch.randn(8, generator=torch.Generator().manual_seed(0))]

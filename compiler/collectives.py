"""A graph's collectives: recorded on the rank that captures it, replayed in one process.

A graph that holds a collective (``all_reduce`` of a row-parallel layer, say) is
minified in one process, against a fake process group with the job's rank and world
size (configs.FAKE_PG).  The fake group answers from this rank's tensors alone: its
all_reduce returns the rank's own partial sum, its all_gather the rank's shard
repeated.  The values after the collective are then not the job's, and a failure
that needs them (a gate on the global sum, say) does not show.

So the rank that captures the graph (child/serve.py, ``capture_only``) runs it once
eagerly *in place of* the compiled call -- every other rank is making the same
collectives in its own compiled call of the same graph, in the same order -- and keeps
what each collective returned (:func:`record`).  In the single process, each recorded
collective is followed by one ``add`` of what the fake group did not know: the
recorded result minus the fake group's answer on the same inputs, a new graph input
named ``from_other_ranks_N`` (:func:`replay`).  At the captured inputs the graph then
computes exactly the job's values, the collective itself stays in the graph (inductor
still compiles it), and the minifier may cut, lift or shrink the added input like any
other.

Layer: the contract (imported by the child and by the parent; torch only inside
functions).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import torch

# the namespaces of collective ops (all_reduce, all_gather, ... as Dynamo traces them)
_COLLECTIVES = ("_c10d_functional.", "c10d_functional.", "c10d.", "_dtensor.")
# a collective's result becomes a real value at its wait (functional collectives)
_WAIT = "_c10d_functional.wait_tensor"
REPLAYED_PREFIX = "from_other_ranks_"


def has_collectives(gm: torch.fx.GraphModule) -> bool:
    """The graph communicates with other ranks (a traced all_reduce, say)."""
    return any(
        n.op == "call_function" and str(n.target).startswith(_COLLECTIVES) for n in gm.graph.nodes
    )


def _is_wait(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and str(node.target).startswith(_WAIT)


def record(
    gm: torch.fx.GraphModule, inputs: Sequence[object], timeout: float = 120.0
) -> dict[str, torch.Tensor] | None:
    """Run ``gm`` eagerly on ``inputs`` (the process group of the job answering) and
    return each wait node's value, by node name; None when the run did not finish
    within ``timeout`` seconds (the other ranks never made the same collectives) or
    raised.  Runs in the rank's own process, in place of the compiled call."""
    import torch

    out: dict[str, torch.Tensor] = {}
    done: list[bool] = []
    # thread-local state the program's call ran with: the current CUDA device
    device = torch.cuda.current_device() if torch.cuda.is_initialized() else None

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> object:
            value = super().run_node(n)
            if _is_wait(n) and torch.is_tensor(value):
                out[n.name] = value.detach().clone()
            return value

    def go() -> None:
        try:
            if device is not None:
                torch.cuda.set_device(device)
            with torch.no_grad():
                Recorder(gm).run(*inputs)
            done.append(True)
        except Exception:  # noqa: BLE001 - recorded nothing; the capture goes on without
            pass

    worker = threading.Thread(target=go, name="tcompile-record-collectives", daemon=True)
    worker.start()
    worker.join(timeout)
    return out if done else None


def _fake_values(
    gm: torch.fx.GraphModule, inputs: Sequence[object], names: set[str]
) -> dict[str, torch.Tensor]:
    """The wait nodes' values in this process (the fake group answering)."""
    import torch

    out: dict[str, torch.Tensor] = {}

    class Reader(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> object:
            value = super().run_node(n)
            if n.name in names and torch.is_tensor(value):
                out[n.name] = value.detach().clone()
            return value

    args = [x.detach().clone() if torch.is_tensor(x) else x for x in inputs]
    with torch.no_grad():
        Reader(gm).run(*args)
    return out


def replay(
    gm: torch.fx.GraphModule, inputs: list[object], recorded: Mapping[str, torch.Tensor]
) -> tuple[torch.fx.GraphModule, list[object], list[str]]:
    """``gm`` with each recorded collective's missing part added back as a new input
    (call under the fake process group); returns the graph, its inputs and the new
    inputs' names.  A collective whose fake answer already equals the record (every
    rank contributed the same, or a world of one) is left alone."""
    import torch

    waits = {n.name: n for n in gm.graph.nodes if _is_wait(n) and n.name in recorded}
    if not waits:
        return gm, inputs, []
    fake = _fake_values(gm, inputs, set(waits))
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    added: list[str] = []
    extra: list[torch.Tensor] = []
    for name, wait in waits.items():
        got, want = fake.get(name), recorded[name]
        if got is None or got.shape != want.shape or got.dtype != want.dtype:
            continue
        if want.dtype == torch.bool:  # nothing to add to
            continue
        want = want.to(got.device)
        if torch.equal(got, want):
            continue
        missing = want - got
        anchor = placeholders[-1] if placeholders else None
        with gm.graph.inserting_after(anchor) if anchor else gm.graph.inserting_before():
            ph = gm.graph.placeholder(f"{REPLAYED_PREFIX}{len(added)}")
        placeholders.append(ph)
        with gm.graph.inserting_after(wait):  # named for what it holds: the job's value
            total = gm.graph.create_node(
                "call_function", torch.ops.aten.add.Tensor, (wait, ph), name=f"{name}_in_job"
            )
        wait.replace_all_uses_with(total, delete_user_cb=lambda user, t=total: user is not t)
        added.append(ph.name)
        extra.append(missing)
    if not added:
        return gm, inputs, []
    gm.graph.lint()
    gm.recompile()
    return gm, [*inputs, *extra], added

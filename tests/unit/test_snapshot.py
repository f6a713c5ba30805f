"""Exact snapshots of a call's inputs (compiler/snapshot.py) and the outcome of a run
on them (accuracy.run_with_grads): no compiles, plain eager functions."""

from __future__ import annotations

import torch

from tcompile.compiler import accuracy
from tcompile.compiler.snapshot import Snapshot, changed


def test_layout_offset_alignment_and_aliasing_are_kept():
    base = torch.randn(6, 10)
    a, b = base[1:, ::2], base.t()[3:]
    copies, _ = Snapshot([a, b, 3]).materialize(grads=False)
    for x, y in zip((a, b), copies):
        assert (y.shape, y.stride(), y.storage_offset()) == (
            x.shape,
            x.stride(),
            x.storage_offset(),
        )
        assert torch.equal(x, y)
        assert y.data_ptr() % 64 == x.data_ptr() % 64
        assert not y._is_view()
    assert copies[0].untyped_storage().data_ptr() == copies[1].untyped_storage().data_ptr()
    assert copies[2] == 3
    copies[0].fill_(7.0)  # a copy is not the program's tensor
    assert not torch.equal(a, torch.full_like(a, 7.0))


def test_each_materialize_is_fresh_and_taken_before_the_call():
    x = torch.randn(4, 4)[:, 1:]
    snap = Snapshot([x])
    before = x.clone()
    x.mul_(2)  # the call updates its input
    first, _ = snap.materialize(grads=False)
    first[0].add_(1)
    second, _ = snap.materialize(grads=False)
    assert torch.equal(second[0], before)


def test_an_input_that_required_grad_can_be_updated_in_place():
    w = torch.randn(3, 8, requires_grad=True)
    act = (w * 1)[:, ::2]  # a non-leaf, non-contiguous activation
    snap = Snapshot([act])
    (arg,), (leaf,) = snap.materialize()
    assert arg.stride() == act.stride() and not arg.is_leaf
    arg.mul_(3)
    (g,) = torch.autograd.grad(arg.sum(), [leaf])
    assert torch.equal(g, torch.full_like(g, 3.0))
    assert snap.grad_inputs() == [0]


def test_run_with_grads_reports_inputs_updated_in_place():
    def f(x, y):
        x.add_(1)
        return (y * 2,)

    x, y = torch.zeros(2, 3).t(), torch.ones(3)
    out = accuracy.run_with_grads(f, [x, y])
    assert list(out.mutated) == [0]
    before, after = out.mutated[0]
    assert torch.equal(after, before + 1) and after.stride() == x.stride()
    assert torch.equal(x, torch.zeros(3, 2))  # the caller's tensor is untouched


def test_compare_names_a_mutation_only_one_side_made():
    def eager(x):
        x.add_(1)
        return (x.sum(),)

    def wrong(x):  # the same result, the update lost
        return (x.sum() + x.numel(),)

    x = torch.randn(4)
    ref, res = accuracy.run_with_grads(eager, [x]), accuracy.run_with_grads(wrong, [x])
    mismatch = accuracy.compare(ref, res, None, strict=True)
    assert mismatch is not None and mismatch.where == "input 0"
    assert "eager only" in mismatch.detail


def test_given_tangents_are_used():
    x = torch.randn(3, requires_grad=True)
    out = accuracy.run_with_grads(lambda t: (t * 2,), [x], tangents=[torch.tensor([1.0, 0.0, 2.0])])
    assert torch.equal(out.grads[0], torch.tensor([2.0, 0.0, 4.0]))
    assert accuracy.run_with_grads(lambda t: (t * 2,), [x], tangents=[]).grads == []


def test_changed_sees_bits():
    a = torch.tensor([0.0, float("nan")])
    assert not changed(a, a.clone())
    assert changed(a, torch.tensor([-0.0, float("nan")]))


def test_a_snapshot_taken_into_the_last_calls_memory_is_exact():
    """postmortem.py keeps each graph's last call: the next call's snapshot reuses the
    previous one's copies where the same storages come again (a training loop's
    parameters), one ``_foreach_copy_`` -- and is as exact as a fresh one, however the
    inputs changed in between (updated in place, a new batch, another view)."""
    w = torch.nn.Parameter(torch.randn(8, 4))
    base = torch.randn(6, 10)
    snap = Snapshot([w, torch.randn(3, 4), base[1:, ::2]])
    for step in range(4):
        with torch.no_grad():
            w.add_(1.0)  # an optimizer step: the same storage, new values
            base.mul_(2.0)
        view = base[1:, ::2] if step % 2 else base.t()[3:]  # another span, sometimes
        values = [w, torch.randn(3, 4), view, 7]
        snap = Snapshot(values, snap)
        copies, _ = snap.materialize(grads=False)
        for x, y in zip(values[:3], copies[:3]):
            assert torch.equal(x.detach(), y) and y.stride() == x.stride()
        assert copies[3] == 7
    assert snap.sources  # the parameter's storage, seen call after call, was reused


def test_a_graph_called_faster_than_its_copy_allows_keeps_a_recent_call():
    """postmortem.LastCalls: copying every call of a training step's graph cost 120-180
    us a step; a call kept a moment ago stands for the next ones until its copy's cost
    is TIME_SHARE of the time since -- then the newest call is kept again."""
    from types import SimpleNamespace

    from tcompile.compiler.child import postmortem

    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    runner = SimpleNamespace(index=0, collective=False, reference=gm)
    calls = postmortem.LastCalls(SimpleNamespace())
    calls.budget["cpu"] = 1 << 30
    first, second = torch.ones(4), torch.zeros(4)
    calls.keep(runner, [first])
    calls.keep(runner, [second])  # at once: the first stands for it
    (values, _) = calls.kept[0][1].materialize(grads=False)
    assert torch.equal(values[0], first)
    calls.next_at[0] = 0.0  # its time came
    calls.keep(runner, [second])
    (values, _) = calls.kept[0][1].materialize(grads=False)
    assert torch.equal(values[0], second)
    assert calls.next_at[0] > 0.0

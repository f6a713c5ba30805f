"""The process-wide autograd and functorch state a candidate may leave behind.

Graphs Dynamo captures under a functorch transform (``jacfwd``, ``vmap``, ``grad``,
``jvp``) push and pop that state themselves: ``_vmap_increment_nesting`` ...
``_vmap_decrement_nesting``, ``_enter_dual_level`` ... ``_exit_dual_level``,
``_set_fwd_grad_enabled``.  The graph is not guarded with try/finally (Dynamo's own
eval frame restores the layer stack after a call for the same reason), so a
candidate that fails half-way -- or one the minifier cut between a push and its pop --
leaves the worker inside a transform, and every later candidate fails with
"Nested forward mode AD is not supported" or an internal assert: the whole search reads
"invalid".  :func:`isolated` puts the state back after each candidate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def _dual_level_open() -> bool:
    """Whether a forward-AD level is open (only one can be: probing enters and exits)."""
    try:
        level = torch._C._enter_dual_level()
    except RuntimeError:
        return True
    torch._C._exit_dual_level(level=level)
    return False


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Run a candidate; afterwards the functorch layer stack, forward-AD level, forward
    and backward grad modes are as they were before it, whatever it did."""
    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    fwd_grad = torch._C._is_fwd_grad_enabled()
    grad = torch.is_grad_enabled()
    dual_open = _dual_level_open()
    try:
        yield
    finally:
        if torch._C._functorch.get_dynamic_layer_stack_depth() != depth:
            torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)
        if not dual_open:
            with contextlib.suppress(RuntimeError):
                torch._C._exit_dual_level(level=0)
        torch._C._set_fwd_grad_enabled(fwd_grad)
        torch.set_grad_enabled(grad)

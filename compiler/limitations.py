"""TorchDynamo's documented limitations: graph breaks its documentation names, which
``fullgraph=True`` turns into errors.  A capture failure that is one of them is still
reported (the program died of it), with what the documentation says to do: it is the
program asking for something Dynamo does not do, not a defect in Dynamo.

Data, one row per limitation: a phrase of Dynamo's error message, and the advice.
"""

from __future__ import annotations

LIMITATIONS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("Data-dependent branching", "generic_jump"),
        "data-dependent control flow (an `if` on a tensor's value) cannot be captured in "
        "one graph: use torch.cond, or fullgraph=False (a graph break)",
    ),
    (
        ("Failed to trace builtin operator", "Attempted to call function marked as skipped"),
        "a call Dynamo does not trace (print, a C builtin) breaks the graph; "
        "fullgraph=True makes the break an error",
    ),
    (
        ("Unsupported Tensor.item() call", "data dependent operator", "Tensor.tolist"),
        "a tensor's value read as a Python number (.item(), .tolist()) breaks the graph: "
        "torch._dynamo.config.capture_scalar_outputs = True keeps it",
    ),
    (
        ("dynamic shape operator",),
        "an op whose output shape depends on the data (nonzero, unique) breaks the graph: "
        "capture_dynamic_output_shape_ops = True keeps it",
    ),
)


def documented_limitation(message: str) -> str | None:
    """What the documentation says, when a capture failure's message is a documented
    limitation of Dynamo; None otherwise."""
    for phrases, advice in LIMITATIONS:
        if any(p in message for p in phrases):
            return advice
    return None

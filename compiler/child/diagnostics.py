"""What `tcompile explain` needs from inside the program: recompilations and the
recompile limit (from Dynamo's own hook points), ops per graph, compile metrics.

Graph breaks need nothing here: each graph Dynamo hands the backend after a break
carries the break's reason and user stack (``compile_subgraph_reason``), which is
what ``torch._dynamo.explain`` reports too.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from ..protocol import Event

if TYPE_CHECKING:
    import torch
    from torch._dynamo.types import DynamoFrameType

    from .recorder import Recorder


def compile_metrics() -> dict[str, float]:
    """Totals of torch's compile-time metrics (seconds per phase name)."""
    from torch._dynamo.utils import compilation_time_metrics

    return {k: float(sum(v)) for k, v in list(compilation_time_metrics.items())}


def ops_of(gm: torch.fx.GraphModule) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            t = n.target
            name = (
                t
                if isinstance(t, str)
                else (getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t))
            )
            mod = getattr(t, "__module__", None)
            if (
                n.op == "call_function"
                and mod
                and isinstance(mod, str)
                and not mod.startswith("_operator")
            ):
                name = f"{mod.replace('torch._C._nn', 'torch.nn.functional').replace('torch._C._VariableFunctions', 'torch')}.{name}"
            counts[f"{'.' if n.op == 'call_method' else ''}{name}"] += 1
    return dict(counts.most_common())


def install(recorder: Recorder) -> None:
    """Record recompilations (with the guard that failed) and recompile-limit hits."""
    import torch._dynamo.convert_frame as convert_frame

    original = getattr(convert_frame, "get_and_maybe_log_recompilation_reasons", None)
    if original is not None and not getattr(original, "_tcompile", False):

        def reasons_hook(
            cache_entry: object, frame: DynamoFrameType, *args: object, **kwargs: object
        ) -> list[str]:
            reasons = original(cache_entry, frame, *args, **kwargs)
            try:
                code = frame.f_code
                recorder.emit(
                    Event.RECOMPILE,
                    frame=code.co_name,
                    file=code.co_filename,
                    line=code.co_firstlineno,
                    reasons=[str(r)[:400] for r in (reasons or [])],
                )
            except Exception:
                pass
            return reasons

        reasons_hook._tcompile = True  # type: ignore[attr-defined]
        convert_frame.get_and_maybe_log_recompilation_reasons = reasons_hook

    class LimitHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                msg = record.getMessage()
            except Exception:
                return
            if "hit config." in msg:
                recorder.emit(
                    Event.RECOMPILE_LIMIT,
                    message=msg.splitlines()[0][:200],
                    function=next(
                        (
                            ln.split("function:", 1)[1].strip()
                            for ln in msg.splitlines()
                            if "function:" in ln
                        ),
                        "",
                    ),
                )

    logging.getLogger("torch._dynamo.convert_frame").addHandler(LimitHandler(logging.WARNING))

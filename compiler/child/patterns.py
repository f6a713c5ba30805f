"""Which pattern of inductor's pattern-matcher passes fired, and one pattern turned off.

torch's bisector counts a pattern-matcher pass (``post_grad_passes``' ``pass_pattern_1``)
as one application: it holds dozens of patterns, and the bisector can only turn all of
them off together.  A culprit ``pass_pattern_1`` says little, and as a switch it
joins unrelated bugs (issue 60: the three reports of ``pointless_cumsum_replacement``
read ``pass_pattern_1``).  This module wraps the ``apply`` of inductor's pattern entries
(``GraphPatternEntry``, ``LoweringPatternEntry``, ``ReplacementPatternEntry``), so that

* each pattern that fires is counted by name in ``counters["tcompile_patterns"]``
  (subsystems.py reads it as part of what an application did: ``pattern NAME``);
* an error raised while a pattern rewrites the graph carries that pattern's name
  (``pattern_of(exc)``), a field of the failure, not a word read back from its text;
* ``--without pattern:NAME`` turns that one pattern off (its match is left as it
  was) wherever it would fire -- the switch inductor has no config for.

A pattern's name is the one torch's telemetry uses where it has one (``pattern_name``:
``_sfdp_pattern_28_inference``), else its handler's module and function
(``post_grad.pointless_cumsum_replacement``), else its pattern's ops.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import torch
    from torch._inductor.pattern_matcher import Match, PatternEntry

ATTR = "_tcompile_pattern"  # on an exception raised inside a pattern's apply
COUNTERS = "tcompile_patterns"  # torch's counters key of the patterns that fired
_installed = False
_off: frozenset[str] = frozenset()  # patterns turned off now (subsystems.install sets it)


def turn_off(names: Iterable[str]) -> None:
    """The patterns that do not fire from now on (the run's or a worker judgement's
    ``--without pattern:NAME``; empty: none)."""
    global _off
    _off = frozenset(names)


def pattern_name(entry: object) -> str:
    """A pattern entry's name, stable across programs and processes."""
    name = getattr(entry, "pattern_name", None)
    if name:
        return str(name)
    handler = getattr(entry, "handler", None)
    if handler is not None:
        module = str(getattr(handler, "__module__", "") or "").rsplit(".", 1)[-1]
        qual = str(getattr(handler, "__qualname__", None) or getattr(handler, "__name__", "?"))
        qual = qual.replace(".<locals>", "")
        return f"{module}.{qual}" if module else qual
    pattern = getattr(entry, "pattern", None)
    try:
        ops = pattern.fns_repr()  # type: ignore[union-attr]
    except Exception:
        ops = type(pattern).__name__
    return f"{type(entry).__name__}({ops})"


def pattern_of(exc: BaseException | None) -> str | None:
    """The pattern that was rewriting the graph when ``exc`` (or an error it wraps) was
    raised; None: none was."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        name = getattr(exc, ATTR, None)
        if name:
            return str(name)
        exc = exc.__cause__ or exc.__context__
    return None


def install() -> None:
    """Wrap the pattern entries' ``apply`` once per process (idempotent)."""
    global _installed
    if _installed:
        return
    try:
        from torch._inductor import pattern_matcher as pm
    except Exception:  # inductor unavailable: nothing fires
        return
    for cls_name in ("GraphPatternEntry", "LoweringPatternEntry", "ReplacementPatternEntry"):
        cls = getattr(pm, cls_name, None)
        original = getattr(cls, "apply", None) if cls is not None else None
        if original is None or getattr(original, "_tcompile_wrapped", False):
            continue
        cls.apply = _wrapped(original)
    _installed = True


def _wrapped(original: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(original)
    def apply(
        self: PatternEntry, match: Match, graph: torch.fx.Graph, node: torch.fx.Node
    ) -> object:
        name = pattern_name(self)
        if name in _off:
            return None  # the match stays as it was: this pattern does not rewrite it
        from torch._dynamo.utils import counters

        counters[COUNTERS][name] += 1
        try:
            return original(self, match, graph, node)
        except BaseException as exc:
            if getattr(exc, ATTR, None) is None:
                try:
                    setattr(exc, ATTR, name)
                except (AttributeError, TypeError):  # an exception that takes no attribute
                    pass
            raise

    apply._tcompile_wrapped = True  # type: ignore[attr-defined]
    return apply

"""Inductor's bisection hook points, driven by tcompile's own state.

torch calls ``CompilerBisector.disable_subsystem(backend, subsystem, debug_info)`` at
each application of a pass, a decomposition or a lowering (see
torch/_inductor/compiler_bisector.py).  In a bisection run tcompile replaces that one
function: each subsystem's applications are counted (with their description: the
op or pass name) and the first ``limits[subsystem]`` of them are enabled, the rest
disabled.  The state comes from the hook config (JSON), not from torch's
``key=value`` files read back with ``eval``; several subsystems can be limited in one
run, which lets the parent search one flat ordered list with a single binary search.
The subsystems and toggles themselves are data: compiler/stack.py.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..stack import application_name as named
from .patterns import COUNTERS
from .patterns import install as install_patterns
from .patterns import turn_off as turn_patterns_off
from .torch_config import set_config

if TYPE_CHECKING:
    from collections.abc import Callable

    from torch._inductor.compiler_bisector import CompilerBisector


class Counter:
    """Each subsystem's applications, the limits and skips that disable some, and what
    each enabled application did: the change in inductor's own counters
    (``counters["inductor"]``: ``fuse_attention``, ``pattern_matcher_count``, ...)
    between its hook call and the next one -- a pattern pass's application is then
    named by what it fused, not by its index alone."""

    def __init__(
        self,
        limits: dict[str, int],
        skip: dict[str, list[int]] | None = None,
        graph: int | None = None,
        off: dict[str, list[str]] | None = None,
    ) -> None:
        self.limits = limits
        # applications disabled by name wherever they happen (``tcompile run --without
        # lowerings:sum``): a culprit another script's bisect named (triage)
        self.off = {k: set(v) for k, v in (off or {}).items()}
        # limits and skips about one Dynamo graph's compile alone, its applications
        # numbered from 0 as in a compile of that graph alone (capture_bisect.py's
        # whole-program confirmation); the other graphs' are enabled and not counted
        self.graph = graph
        self.current: int | None = None  # the Dynamo graph being compiled (compiling())
        self.tags: dict[str, list[int | None]] = defaultdict(list)  # each application's graph
        # applications disabled one by one, everything else enabled (guided.py)
        self.skip = {k: set(v) for k, v in (skip or {}).items()}
        self.seen: dict[str, list[str]] = defaultdict(list)
        self.did: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
        self._last: tuple[str, int] | None = None  # the enabled application running
        self._before: dict[str, int] = {}

    paused = False  # compiles that are not the program's (localize.py): not counted

    def disable(
        self, backend: str, subsystem: str, debug_info: Callable[[], str] | None = None
    ) -> bool:
        if self.paused:
            return False
        if self.graph is not None and self.current != self.graph:
            return False
        self._settle()
        self.tags[subsystem].append(self.current)
        apps = self.seen[subsystem]
        index = len(apps)
        try:
            apps.append(op_name(str(debug_info())) if callable(debug_info) else "")
        except Exception:
            apps.append("")
        limit = self.limits.get(subsystem)
        off = index in self.skip.get(subsystem, ()) or (limit is not None and index >= limit)
        off = off or (bool(self.off) and named(subsystem, apps[-1]) in self.off.get(subsystem, ()))
        self._last = None if off else (subsystem, index)
        return off

    def _settle(self) -> None:
        """What the application running since the last hook call did (its counters)."""
        now = _inductor_counters()
        if self._last is not None:
            delta = {k: v - self._before.get(k, 0) for k, v in now.items()}
            delta = {k: v for k, v in delta.items() if v > 0}
            if delta:
                sub, index = self._last
                self.did[sub][str(index)] = delta
        self._before = now

    def effects(self) -> dict[str, dict[str, dict[str, int]]]:
        self._settle()
        self._last = None
        return {k: dict(v) for k, v in self.did.items() if v}

    def snapshot(self) -> dict[str, list[str]]:
        return {k: list(v)[:5000] for k, v in self.seen.items()}

    def graphs(self) -> dict[str, list[int | None]]:
        """The Dynamo graph each application of ``snapshot()`` belongs to."""
        return {k: list(v)[:5000] for k, v in self.tags.items()}


# torch counts each pattern-matcher pattern by name (``_sfdp_pattern_28_inference``)
# while this variable is set; a value no node is named keeps its debug log quiet
PER_PATTERN_ENV = "TORCHINDUCTOR_PATTERN_MATCH_DEBUG"
_PER_PATTERN_VALUE = "__tcompile_per_pattern__"


def _inductor_counters() -> dict[str, int]:
    """inductor's counters, and each pattern's applications as ``pattern NAME`` (which
    SDPA pattern a ``pass_pattern_0`` application applied: issue 52)."""
    try:
        from torch._dynamo.utils import counters

        out = {k: int(v) for k, v in counters["inductor"].items()}
        # the patterns that fired, by name (patterns.py); torch's own per-pattern
        # telemetry where the wrapper is not installed (it names some by ops alone)
        named = counters.get(COUNTERS) or counters.get("inductor_pattern_matcher_per_pattern", {})
        for name, n in named.items():
            out[f"pattern {name}"] = int(n)
        return out
    except Exception:  # torch's counters moved: nothing said, nothing broken
        return {}


_counter: Counter | None = None


def install(bisect: dict[str, Any]) -> Counter:
    """Take over CompilerBisector.disable_subsystem for this process."""
    global _counter
    from torch._inductor.compiler_bisector import CompilerBisector

    os.environ.setdefault(PER_PATTERN_ENV, _PER_PATTERN_VALUE)
    install_patterns()

    _counter = Counter(
        {k: int(v) for k, v in (bisect.get("limits") or {}).items()},
        {k: [int(i) for i in v] for k, v in (bisect.get("skip") or {}).items()},
        graph=bisect.get("graph"),
        off=bisect.get("off"),
    )
    counter = _counter
    turn_patterns_off(counter.off.get("pattern", ()))

    def disable_subsystem(
        cls: type[CompilerBisector],
        backend: str,
        subsystem: str,
        debug_info: Callable[[], str] | None = None,
    ) -> bool:
        return counter.disable(backend, subsystem, debug_info)

    CompilerBisector.disable_subsystem = classmethod(disable_subsystem)  # type: ignore[method-assign]
    for key, value in (bisect.get("toggles") or {}).items():
        set_config(key, value)
    return counter


def counter() -> Counter | None:
    return _counter


def uninstall(previous: Any) -> None:
    """Give CompilerBisector.disable_subsystem back (a worker judging one configuration
    at a time: capture_bisect.py); ``previous`` is what ``install`` replaced."""
    global _counter
    from torch._inductor.compiler_bisector import CompilerBisector

    os.environ.setdefault(PER_PATTERN_ENV, _PER_PATTERN_VALUE)

    CompilerBisector.disable_subsystem = previous  # type: ignore[method-assign]
    turn_patterns_off(())
    _counter = None


@contextlib.contextmanager
def compiling(index: int) -> Iterator[None]:
    """Applications from here on belong to Dynamo graph ``index`` (its compile, or its
    backward's, compiled later at the first backward)."""
    c = _counter
    if c is None:
        yield
        return
    before, c.current = c.current, index
    try:
        yield
    finally:
        c.current = before


@contextlib.contextmanager
def not_counted() -> Iterator[None]:
    """Compiles tcompile makes in the program's process (a localization's prefixes):
    every application enabled and none counted, so the program's own are numbered as
    in a run without them."""
    c = _counter
    if c is None:
        yield
        return
    c.paused = True
    try:
        yield
    finally:
        c.paused = False


@contextlib.contextmanager
def counting(bisect: dict[str, Any] | None) -> Iterator[Counter | None]:
    """One judgement under a bisection configuration (a worker judging a captured graph
    for capture_bisect.py): applications counted, limited and skipped as ``bisect``
    says, its toggles set, inductor's caches off (a cached graph runs no pass); all of
    it undone afterwards.  None: no configuration, nothing changed."""
    if bisect is None:
        yield None
        return
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.compiler_bisector import CompilerBisector

    previous = CompilerBisector.__dict__["disable_subsystem"]
    toggles = dict(bisect.get("toggles") or {})
    inductor = {k: v for k, v in toggles.items() if not k.startswith("functorch.")}
    functorch = {k.split(".", 1)[1]: v for k, v in toggles.items() if k.startswith("functorch.")}
    isa_probe_in_normal_cache()
    # the graph-level caches off (a graph they serve runs no pass); the kernels' (a C++
    # or Triton source's build, its autotuning) stay: one source builds one kernel, and
    # the program's own run left them -- a judgement that compiles what the baseline
    # compiled builds nothing (inductor's force_disable_caches rebuilt each, 0.6 s a C++
    # kernel here), and a max-autotune choice is the one the program made
    off = {"fx_graph_cache": False, "fx_graph_remote_cache": False}
    with inductor_config.patch({**inductor, **off}):
        with functorch_config.patch({**_GRAPH_CACHES_OFF, **functorch}):
            c = install({**bisect, "toggles": {}})
            try:
                yield c
            finally:
                c.effects()
                uninstall(previous)


_GRAPH_CACHES_OFF = {"enable_autograd_cache": False, "enable_remote_autograd_cache": False}


def isa_probe_in_normal_cache() -> None:
    """Inductor's probe of the CPU's vector instructions (a C++ test build and a load of
    each ISA: 7.5 s on the 2-core CI machine) runs at a process's first CPU compile, in
    the inductor cache in force.  Under ``force_disable_caches`` that is each compile's
    fresh folder, so every worker paid it at its first judgement (a triage membership
    check: 11 s of its 16).  What it finds is the machine's, not a compile's: made in
    the normal cache, where the program's own run left it (once per process; nothing
    changes where the torch has no such probe)."""
    try:
        import torch._inductor.cpu_vec_isa as isa
        from torch._inductor.runtime.cache_dir_utils import cache_dir
    except ImportError:
        return
    probe = getattr(isa, "valid_vec_isa_list", None)
    if probe is None or getattr(probe, "tcompile_normal_cache", False):
        return
    if not callable(getattr(probe, "cache_info", None)):
        return  # not the functools.cache'd probe this was written for
    normal = cache_dir()

    def valid_vec_isa_list() -> Any:
        if probe.cache_info().currsize:
            return probe()
        saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = normal
        try:
            return probe()
        finally:
            if saved is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved

    valid_vec_isa_list.tcompile_normal_cache = True  # type: ignore[attr-defined]
    isa.valid_vec_isa_list = valid_vec_isa_list  # type: ignore[assignment]


def op_name(info: str) -> str:
    """An application's detail as people write it: torch's ``<OpOverload(op='aten.
    unfold_backward', overload='default')>`` -> ``aten.unfold_backward.default``."""
    import re

    m = re.fullmatch(r"<OpOverload\(op='([\w.]+)', overload='(\w+)'\)>", info.strip())
    return f"{m.group(1)}.{m.group(2)}" if m else info

"""The torch.compile stack as data: its stages, inductor's subsystems and toggles.

=============================  ============================================================
``eager``                      Dynamo's graph runs as captured (capture bugs show here)
``aot_eager``                  + AOTAutograd forward/backward tracing, run eagerly
``aot_eager_decomp_partition`` + inductor's decompositions and min-cut partitioner
``inductor``                   + lowering, scheduling and codegen (C++ on CPU, Triton on GPU)
anything else                  the user's own backend (a registered name or a callable)
=============================  ============================================================

How each stage is *built* (with recording AOT compilers) is child/build.py; this
module imports no torch at import time.

``SUBSYSTEMS`` are the counted hook points of torch's ``CompilerBisector``, per stage,
in the order things happen; ``TOGGLES`` are the config changes torch's bisector tries
("does turning this off fix it?").  bisection.py searches them; child/subsystems.py
counts and limits them inside the program.
"""

from __future__ import annotations

import enum


class Stage(str, enum.Enum):
    EAGER = "eager"
    AOT_EAGER = "aot_eager"
    AOT_EAGER_DECOMP_PARTITION = "aot_eager_decomp_partition"
    INDUCTOR = "inductor"


# What a culprit stage means, in words: the first stage a failure shows at is the part
# of the stack to blame -- with backend=eager that is Dynamo's capture, not eager
# (``eager`` read as "eager is the culprit"; issue 60).  The JSON keeps the stage's name.
_STAGE_WORDS = {
    "eager": "dynamo (it shows with backend=eager: Dynamo's capture or guards)",
    "aot_eager": "aot_autograd (it shows with backend=aot_eager)",
    "aot_eager_decomp_partition": "decompositions or the partitioner (aot_eager_decomp_partition)",
}


def stage_words(stage: str | None) -> str | None:
    """A culprit stage as people read it: ``eager`` -> ``dynamo (...)``; inductor and a
    user's own backend as named."""
    return None if stage is None else _STAGE_WORDS.get(str(stage), str(stage))


def in_words(stage: str | None) -> str:
    """`` = dynamo (...)`` after a stage whose name misleads (eager), else nothing."""
    return f" = {stage_words(stage)}" if stage == "eager" else ""


#: The stages in the order the stack runs them (the backend ladder of the seeds).
LADDER: tuple[str, ...] = tuple(s.value for s in Stage)

SUBSYSTEMS: dict[str, list[str]] = {
    "aot_eager_decomp_partition": ["decomposition"],
    "inductor": [
        "pre_grad_passes",
        "joint_graph_passes",
        "post_grad_passes",
        "cudagraphs",
        "lowerings",
    ],
}
TOGGLES: dict[str, dict[str, bool]] = {
    "aot_eager_decomp_partition": {"functorch.cse": False},
    "inductor": {
        "fallback_random": True,
        "emulate_precision_casts": True,
        "layout_optimization": False,
        "comprehensive_padding": False,
    },
}
# Whole optimizations one config entry turns off.  Not in the search's list (torch's
# bisector does not try them): tried where the culprit the search ended at, alone off,
# makes the graph fail another way (capture_bisect.toggle_instead) -- #193061's
# gradients, wrong since mix-order reduction, whose ``cat`` lowering off raises.
OPTIMIZATIONS: dict[str, dict[str, bool]] = {
    "inductor": {"triton.mix_order_reduction": False, "split_reductions": False},
}


def without(items: list[str]) -> dict[str, object]:
    """``--without SUBSYSTEM:NAME`` (repeatable) as a run's bisection configuration:
    every application of that subsystem with that name off wherever it happens
    (``lowerings:sum``, ``post_grad_passes:normalization_aten_pass``,
    ``decomposition:aten.silu.default``), one pattern of inductor's pattern passes
    (``pattern:post_grad.pointless_cumsum_replacement``), or ``config:TOGGLE`` changed as torch's
    bisector changes it (``config:fallback_random``).  ValueError: not one of these."""
    subsystems = {s for subs in SUBSYSTEMS.values() for s in subs}
    toggles = {k: v for t in (*TOGGLES.values(), *OPTIMIZATIONS.values()) for k, v in t.items()}
    off: dict[str, list[str]] = {}
    changed: dict[str, bool] = {}
    for item in items:
        sub, sep, name = item.partition(":")
        if not sep or not name:
            raise ValueError(f"--without {item!r}: expected SUBSYSTEM:NAME (lowerings:sum)")
        if sub == "config":
            if name not in toggles:
                raise ValueError(
                    f"--without {item!r}: config is one of {', '.join(sorted(toggles))}"
                )
            changed[name] = toggles[name]
        elif sub == "pattern":  # one pattern of inductor's pattern passes (child/patterns.py)
            off.setdefault("pattern", []).append(name)
        elif sub in subsystems:  # named as the hooks name what runs (lowerings:sum_default = sum)
            off.setdefault(sub, []).append(application_name(sub, name))
        else:
            known = ", ".join(sorted(subsystems | {"config", "pattern"}))
            raise ValueError(f"--without {item!r}: the subsystem is one of {known}")
    return {"limits": {}, "toggles": changed, "off": off}


def application_name(subsystem: str, detail: str) -> str:
    """An application's name across programs: a lowering by its op (``sum_3`` -> ``sum``:
    the node's number is the program's; ``slice_scatter_default`` -> ``slice_scatter``:
    opname.op_base), anything else as it is described."""
    from .opname import op_base

    return op_base(detail) if subsystem == "lowerings" else detail


def without_of(subsystem: str | None, detail: str | None) -> str | None:
    """A bisect culprit as ``--without``'s argument (None: bisect named no subsystem, or
    a toggle it cannot name): ``lowerings`` ``sum_3`` -> ``lowerings:sum``."""
    if not subsystem or not detail:
        return None
    if subsystem == "config":
        name = detail.split("=", 1)[0].strip()
        return f"config:{name}" if name else None
    return f"{subsystem}:{application_name(subsystem, detail)}"


#: torch releases (major.minor) this repository's suite has been run against (docs/layout.md
#: "Versions"); others run, with one warning line.
TESTED_TORCH: tuple[str, ...] = ("2.11", "2.13", "2.14")


def torch_version_warning() -> str | None:
    """One line when the installed torch is not one tcompile was tested with (read
    from the package metadata: torch is not imported)."""
    from importlib import metadata

    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None  # said where torch is needed
    release = ".".join(version.split("+")[0].split(".")[:2])
    if release in TESTED_TORCH:
        return None
    return (
        f"torch {version} is not a release tcompile was tested with "
        f"({', '.join(TESTED_TORCH)}): if tcompile fails on it, that is tcompile's failure"
    )


def known_backend_names() -> list[str]:
    """Every backend name torch knows (including debug ones), plus the stages."""
    from torch._dynamo.backends.registry import list_backends

    return sorted(set(list_backends(exclude_tags=())) | set(LADDER))


def backend_name(backend: object) -> str:
    """The stage name tcompile reports for a backend given to ``torch.compile``."""
    if backend is None:
        return Stage.INDUCTOR.value
    if isinstance(backend, str):
        return backend
    return (
        getattr(backend, "compiler_name", None)
        or getattr(backend, "__name__", None)
        or type(backend).__name__
    )

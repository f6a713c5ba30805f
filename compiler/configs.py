"""The compiler configuration as data: restating it in a repro, setting one entry.

child/torch_config.py reads the configuration in force inside the program; this
module (no torch import) turns it into Python lines for repro.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .literals import py_literal


def set_dotted(root: object, key: str, value: object) -> None:
    """The one config setter: ``set_dotted(inductor_config, "triton.cudagraphs", True)``."""
    obj = root
    parts = key.split(".")
    for part in parts[:-1]:
        obj = getattr(obj, part)
    setattr(obj, parts[-1], value)


MISSING = object()  # get_dotted: this torch lacks the entry


def get_dotted(root: object, key: str) -> object:
    """The one config getter: ``get_dotted(inductor_config, "triton.cudagraphs")``;
    ``MISSING`` where this torch lacks the entry."""
    obj = root
    for part in key.split("."):
        if not hasattr(obj, part):
            return MISSING
        obj = getattr(obj, part)
    return obj


def _table_source(table: dict[str, Any], lines: list[str], extra: list[str]) -> None:
    """The program's decomposition table: torch's, with its own entries."""
    entries = []
    for op_name, fn in sorted((table.get("changed") or {}).items()):
        if fn.get("source"):
            extra.append(fn["source"])
            entries.append(f"    table[torch.ops.{op_name}] = {fn['function']}")
    removed = [f"torch.ops.{n}" for n in table.get("removed") or []]
    if removed:
        entries.append(f"    for op in ({', '.join(removed)},):\n        table.pop(op, None)")
    extra.append(
        "import torch._inductor.compile_fx as compile_fx\n"
        "_torch_table = compile_fx.select_decomp_table\n\n\n"
        "def program_table():  # the decomposition table the program used\n"
        "    table = dict(_torch_table())\n" + "\n".join(entries) + "\n    return table"
    )
    lines.append("compile_fx.select_decomp_table = program_table")


# a graph holding collectives (all_reduce, ...) replays in one process: a fake process
# group with the rank and world size the job had answers them (as torch's own runnable
# graph dumps do)
FAKE_PG = (
    "import torch.distributed as dist\n"
    "from torch.testing._internal.distributed.fake_pg import FakeStore\n"
    "\n"
    "# the job's collectives, answered in one process by a fake process group\n"
    'dist.init_process_group("fake", rank={rank}, world_size={world_size}, store=FakeStore())\n'
)


@contextlib.contextmanager
def fake_process_group(rank: int, world_size: int) -> Iterator[None]:
    """FAKE_PG in this process, for as long as the block runs (none already there): the
    minifier computes a collective graph's intermediate values eagerly, in tcompile's
    own process, against the same fake group its workers and repro.py use."""
    import torch.distributed as dist

    if not dist.is_available() or dist.is_initialized():
        yield
        return
    exec(FAKE_PG.format(rank=rank, world_size=world_size), {})  # noqa: S102
    try:
        yield
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# how a repro.py compiles an AOT-level graph: as inductor compiles the graphs AOTAutograd
# hands it (torch's own after-aot repros do the same)
AOT_COMPILE_SOURCE = "from torch._inductor.compile_fx import compile_fx_inner"


def config_source(config: dict[str, Any]) -> tuple[str, str]:
    """Python lines restating :func:`config_diffs` output in a repro (and the source of
    the functions they need, to be placed before them)."""
    lines = ["import torch._inductor.config as inductor_config"] if config else []
    extra: list[str] = []
    for key, value in sorted(config.items()):
        if key == "decomposition_table":  # the program patched select_decomp_table
            _table_source(value, lines, extra)
            continue
        if key == "select_algorithm":  # autotuning's checks: a failing choice is pinned
            said = [f"VERIFY={value['VERIFY']!r}"] if value.get("VERIFY") else []
            if own := (value.get("lookup") or {}).get("function"):
                said.append(f"lookup={own}")
            lines.append(
                f"# the program set select_algorithm's {', '.join(said)} (not restated: "
                "the repro pins the failing choice, compiler/autotune.py)"
            )
            continue
        if isinstance(value, dict) and "object" in value:  # a pass object
            if not value.get("source"):
                lines.append(f"# {key} = <{value['object']} object> (source not available)")
                continue
            extra.extend(value.get("bases") or [])
            extra.append(value["source"])
            name = value["object"]
            lines.append(f"_{name.lower()} = {name}.__new__({name})")
            lines.append(f"_{name.lower()}.__dict__.update({py_literal(value.get('state') or {})})")
            lines.append(f"inductor_config.{key} = _{name.lower()}")
            continue
        if key == "decompositions":  # the program's own entries in inductor's table
            for op_name, fn in sorted(value.items()):
                if not fn.get("source"):
                    lines.append(
                        f"# decomposition of {op_name}: <function {fn['function']}> (source not available)"
                    )
                    continue
                extra.append(fn["source"])
                lines.append("import torch._inductor.decomposition as inductor_decomp")
                lines.append(
                    f"inductor_decomp.decompositions[torch.ops.{op_name}] = {fn['function']}"
                )
            continue
        if isinstance(value, dict) and "function" in value:
            if not value.get("source"):
                lines.append(f"# {key} = <function {value['function']}> (source not available)")
                continue
            extra.append(value["source"])
            lines.append(f"inductor_config.{key} = {value['function']}")
        else:
            lines.append(f"inductor_config.{key} = {py_literal(value)}")
    if extra:
        # functions are defined after the module-level names they commonly use
        pre = "aten = torch.ops.aten\n\n"
        return "\n".join(lines[:1]), pre + "\n\n".join(extra) + "\n\n" + "\n".join(lines[1:])
    return "\n".join(lines) + ("\n" if lines else ""), ""

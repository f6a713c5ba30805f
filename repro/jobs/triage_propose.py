"""Which representatives a waiting script is checked against, and which scripts may be
one bug (triage_loop.py's scheduler asks these): pure functions of what the scripts'
runs and the reports' bisects said.

Proposals only order the checks: a representative on the same device with a switch
(never a whole pattern-matcher pass nor a stage: they hold many bugs,
triage_switch._whole_pass), most alike first -- the same stage, the same failure kind,
the switch's op named in the script or as its wrong node, the same exception type.  A
pattern's switch is proposed whatever the failure where the script's run failed inside
that pattern or its wrong node is the op the pattern is named after.
"""

from __future__ import annotations

import re
from typing import Any

from tcompile.compiler.opname import op_base
from tcompile.repro.triage_records import ScriptResult

from .triage_switch import _whole_pass, without_of


def _switch_op(off: str) -> str:
    """``lowerings:convert_element_type`` -> ``convert_element_type``;
    ``decomposition:aten.native_group_norm.default`` -> ``native_group_norm``; a lowering
    of one overload ``lowerings:slice_scatter_default`` -> ``slice_scatter`` (``copy__default``
    -> ``copy_``): opname.op_base."""
    return op_base(off.split(":", 1)[-1])


# how a program names an aten op a lowering switch turns off (a cast is ``.to``/``.float``)
_SPELLED = {
    "convert_element_type": ("to", "float", "half", "bfloat16", "double", "type_as", "_to_copy"),
    "_to_copy": ("to", "float", "half", "bfloat16", "double", "type_as"),
}


# lowerings checked as one (off together).  None: argmax and argmin are one arg-reduction
# in inductor (one make_reduction lowering, one codegen path; the tracker fixed its
# #193661 family for both, PR #195063), and checking them as one joined the dupes
# corpus's weak argmin member -- but on the main corpus it joined the int8 vectorized
# argmin bug (#191499, two scripts) to the transposed-argmax one (#193492): a lowering
# switch turns off the op's code generation too, so it cannot tell two bugs of one op
# apart.  Precision first: a member joins by the switch bisect found, not a wider one.
FAMILIES: list[tuple[str, ...]] = []


def family(off: str) -> str:
    """The switch a membership check turns off: the culprit's, and its family's where
    FAMILIES lists one (``lowerings:argmax`` -> ``lowerings:argmax lowerings:argmin``
    were that pair listed), space-separated."""
    sub, _, name = off.partition(":")
    for fam in FAMILIES if sub == "lowerings" else []:
        if name in fam:
            return " ".join(f"{sub}:{n}" for n in fam)
    return off


def _named(op: str, r: ScriptResult, text: str) -> bool:
    """The script names ``op`` (or one of its family): its wrong node's op, or a word of
    its source; a decomposition's op as a module is spelled too (``native_group_norm``:
    ``nn.GroupNorm``)."""
    fam = next((f for f in FAMILIES if op in f), (op,))
    names = tuple(n for o in fam for n in (o, *_SPELLED.get(o, ())))
    if r.wrong_op in names:
        return True
    if any(re.search(rf"\b{re.escape(n)}\b", text) for n in names if n):
        return True
    squeezed = re.sub(r"^_*(native_)?|_", "", op.lower())  # native_group_norm -> groupnorm
    return len(squeezed) > 4 and squeezed in text.lower().replace("_", "")


def _similar(r: ScriptResult) -> tuple[Any, ...]:
    """What two scripts that may be one bug share: a report under way for one makes the
    other wait for it (then it is checked against that report's culprit)."""
    return (r.device, r.stage, r.kind, r.exc_type)


def _in_pattern(op: str | None, pattern: str | None) -> bool:
    """``op`` is a word of the pattern's name (``cumsum``:
    ``post_grad.pointless_cumsum_replacement``): inductor names a rewrite after the op
    it rewrites."""
    return bool(op and pattern and op in re.split(r"[._]", pattern))


def _one_pattern(r: ScriptResult, g: ScriptResult) -> bool:
    """Two scripts a pattern ties, whatever each failed: both runs' compiles failed
    inside it, or one did and the other's wrong node is that pattern's op.  On
    fixtures/families, pointless_cumsum_replacement's reports crash with an IndexError,
    a TypeError (both inside the pattern) and compute a wrong dtype of ``cumsum``."""
    if r.device != g.device:
        return False
    if r.pattern and r.pattern == g.pattern:
        return True
    return _in_pattern(r.wrong_op, g.pattern) or _in_pattern(g.wrong_op, r.pattern)


def _may_be_one(r: ScriptResult, g: ScriptResult) -> bool:
    return _similar(r) == _similar(g) or _one_pattern(r, g)


def _twin(r: ScriptResult, g: ScriptResult) -> bool:
    """The same failure, word for word, at the same wrong op: a report under way for one
    is the other's best proposal, before any other representative's switch (argreduce
    #193751 was checked against argmin's and the round trip's first, #193492's report
    under way)."""
    return _similar(r) == _similar(g) and (r.wrong_op, r.signature) == (g.wrong_op, g.signature)


def switch_stage(rep: ScriptResult) -> str | None:
    """The stage a representative's switch is checked at: its culprit's, where that is
    below inductor (None: inductor, the scripts' own)."""
    stage = (((rep.raw_bug or {}).get("bisect") or {}).get("stage")) or None
    return stage if stage and stage != "inductor" else None


def proposals(r: ScriptResult, reps: list[ScriptResult], text: str = "") -> list[str]:
    """The representatives (paths) to check ``r`` against, most alike first: only those
    that failed the same kind with the same exception, and a lowering switch only where
    the script names the op -- every lowering of ``add`` or ``sum`` off makes unrelated
    programs pass (an argmax bug of the dupes corpus; two bugs of the main corpus).
    A representative whose switch is one pattern (``pattern:NAME``) is proposed whatever
    the failure where the script's own bisect named that pattern, or its run's compile
    failed inside it: one pattern's reports crash one way and compute a wrong dtype
    another (fixtures/families/cumsum_*)."""
    scored = []
    for rep in reps:
        off = without_of(rep)
        if not off or _whole_pass(off) or rep.device != r.device:
            continue
        if rep.path == r.path:
            continue
        named = _named(_switch_op(off), r, text)
        alike = rep.kind == r.kind and rep.exc_type == r.exc_type
        mine = {without_of(r), f"pattern:{r.pattern}" if r.pattern else None}
        its = off.startswith("pattern:") and _in_pattern(r.wrong_op, off.split(":", 1)[1])
        alike = alike or (off.startswith("pattern:") and off in mine) or its
        if not alike or (off.startswith("lowerings:") and not named):
            # another failure, or nothing ties the script to this lowering: on the main
            # corpus, every lowering of ``sum`` off made a C++ compile error and a uint8
            # wrong value pass, both bugs of their own (the switch breaks a fusion)
            continue
        scored.append((rep.stage != r.stage, rep.kind != r.kind, not named,
                       rep.exc_type != r.exc_type, rep.path))  # fmt: skip
    scored.sort()
    return [s[-1] for s in scored]

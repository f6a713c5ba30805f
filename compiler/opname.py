"""An op's name, however a tool or a torch module wrote it -- the one function for it.

Bisect reads a lowering as ``slice_scatter_default`` or ``sum_3`` (inductor's node
names), a decomposition as ``<OpOverload(op='aten.silu', overload='default')>``, the
minifier's divergence as ``aten.relu.default``, a program as ``torch.relu``; triage and
the guided bisect compare them.  Each once computed its own base name with its own
suffix list, and one failure got two culprits (``slice_scatter_default`` and
``slice_scatter``).  Pure: no torch import.
"""

from __future__ import annotations

import re

# an overload as inductor's node names spell it after the op (``copy__default``,
# ``slice_scatter_Tensor``): the common overloads only -- an op's own name may end in a
# word (``index_put``), so only these are taken for an overload
_OVERLOAD = r"(default|tensor|scalar|int|dim|dim_int|self|out|tensor_tensor|scalar_tensor)"


def op_base(name: object) -> str:
    """``aten.relu.default``, ``torch.ops.aten.relu.default``, ``torch.relu``,
    ``F.relu``, ``relu_3``, ``<OpOverload(op='aten.relu', overload='default')>`` ->
    ``relu``; ``slice_scatter_default`` -> ``slice_scatter``; an in-place op keeps its
    underscore (``copy__default`` -> ``copy_``)."""
    text = str(name or "").strip()
    m = re.search(r"op='([\w.]+)'", text)
    if m:
        text = m.group(1)
    dotted = re.match(r"^(?:torch\.ops\.)?(?:aten|prims|quantized|_c10d_functional)\.(.+)$", text)
    if dotted:  # aten.OP.overload: the op is the first name after the namespace
        text = dotted.group(1).split(".")[0]
    else:  # torch.relu, torch.nn.functional.gelu, F.gelu, Tensor.add: the last name
        text = text.rsplit(".", 1)[-1]
    text = re.sub(r"_\d+$", "", text)  # a node's number in its graph: sum_3
    return re.sub(rf"(?<=\w)_{_OVERLOAD}$", "", text, flags=re.IGNORECASE) or text

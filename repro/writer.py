"""repro.py, the short form: what a maintainer reads in ten seconds.

A header (the failure, the versions: no paths, no user or host names), the
configuration that differs from torch's defaults, the user's backend or pass when the
failure needs one, the minimal module, its inputs (inputs.py), and a check made of
only the pieces this failure needs (snippets.py).  It prints ``REPRODUCED:
<signature>`` and exits 1, or ``NOT REPRODUCED`` and exits 0; ``--backend eager``
runs the same check with another backend.

A Dynamo-level graph is compiled by ``torch.compile``; an AOT-level graph (``--after
aot``, or a graph that runs a functorch transform) by inductor's ``compile_fx_inner``,
as inductor compiles the graphs AOTAutograd hands it.  An accuracy failure in an AOT
graph, or a short repro that does not reproduce, falls back to the long form
(writer_full.py).
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from tcompile.compiler import accuracy as _acc
from tcompile.compiler import layout
from tcompile.compiler import signature as _sig
from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.collectives import has_collectives
from tcompile.compiler.configs import AOT_COMPILE_SOURCE, FAKE_PG, config_source
from tcompile.compiler.crash import _DYING_WORDS
from tcompile.compiler.literals import py_literal
from tcompile.compiler.signature import FailureKind, FailureSignature

from . import snippets
from .inputs import InputSpec, compact_source
from .module import module_source

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    import torch

    from .environment import Environment

SIDECAR_SUFFIX = layout.SIDECAR_SUFFIX


class CaptureMeta(TypedDict, total=False):
    """capture.json: what a worker saved beside a failing graph (compiler/child/serve.py),
    as the writers read it (a launcher's ``meta`` too)."""

    graph: int
    stage: str
    forward_kind: str
    config: dict[str, object]  # config_diffs(): inductor's entries off their defaults
    user_backend: str | None
    backend_source: str | None
    mode: str | None
    options: dict[str, object]
    dynamic: bool | None
    grad_enabled: bool
    autocast: list[list[str]]  # [[device, dtype], ...] (observe.Ambient.to_json)
    collectives: bool
    rank: int
    world_size: int
    level: str  # dynamo | aot
    torch: str
    signature: dict[str, object]  # FailureSignature.to_json
    graph_kind: str | None
    message: str
    recorded_collectives: list[str] | None  # None: none recorded
    replayed_collectives: list[str]  # added by dist_minify.py


def _header(env: Environment, signature: FailureSignature) -> str:
    git = str(env.get("torch_git") or "?")[:10]
    return (
        "#!/usr/bin/env python3\n"
        f"# A torch.compile failure, minimized by tcompile {env['tcompile']} on "
        f"{datetime.date.today().isoformat()}:\n"
        f"#   {signature}\n"
        f"# torch {env['torch']} (git {git}), CUDA {env['cuda'] or 'none'}, GPU {env['gpu'] or 'none'}, "
        f"Python {env['python']}, {env['os']}\n"
        "# python repro.py [--backend eager]: exit 1 + REPRODUCED: <failure>, or 0 + NOT REPRODUCED\n"
    )


def _scrubs() -> str:
    items = ", ".join(f"({p.pattern!r}, {r!r})" for p, r in _sig.SCRUBS)
    return f"SCRUBS = [{items}]"


def short_repro(
    *,
    gm: torch.fx.GraphModule,
    specs: list[InputSpec],
    sidecar: list[torch.Tensor],
    signature: FailureSignature,
    accuracy: str,
    meta: CaptureMeta,
    env: Environment,
) -> str | None:
    """The text of a short repro.py, or None when this failure needs the long form."""
    stage, kind = signature.stage, signature.kind
    if kind == FailureKind.MISSING_ERROR:
        return None  # eager must raise and the compiled graph return: the long form's check
    checking = kind == FailureKind.ACCURACY
    aot = meta.get("level", "dynamo") == "aot"
    if aot and (checking or stage != "inductor"):
        return None
    cuda = any(s.device.startswith("cuda") for s in specs if s.kind == "tensor")
    random_ops = checking and _acc.has_random_ops(gm)
    module_src, imports = module_source(gm, real=bool(sidecar) or _real(specs), sidecar=sidecar)
    config_lines, extra = config_source(meta.get("config") or {})
    own = meta.get("backend_source") if stage == meta.get("user_backend") else None
    kwargs = compile_kwargs_of(meta, accuracy, stage, gm, specs)
    uses_signature = not checking and kind != FailureKind.CRASH

    autocast = [] if aot else [(d, t) for d, t in meta.get("autocast") or []]
    rounded = _rounded(module_src, imports, specs, sidecar, autocast) if checking else {}
    out = [_header(env, signature)]
    std = (
        ["sys"]
        + (["contextlib"] if autocast else [])
        + ["os"]
        + (["re"] if uses_signature or kind == FailureKind.CRASH else [])
        + (["math"] if checking and accuracy != AccuracyMode.STRICT else [])
    )
    std += ["signal", "subprocess"] if kind == FailureKind.CRASH else []
    out.append("".join(f"import {m}\n" for m in sorted(std)) + "\nimport torch\n")
    out.append("".join(f"{i}\n" for i in imports))
    if aot:
        out.append(AOT_COMPILE_SOURCE + "\n")
    out.append(f"\nSTAGE = {stage!r}\n")
    out.append(
        'BACKEND = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else '
        'os.environ.get("TORCH_COMPILE_BACKEND", STAGE)\n'
    )
    if kwargs:
        out.append(f"KWARGS = {py_literal(kwargs)} if BACKEND == STAGE else {{}}\n")
    if uses_signature or kind == FailureKind.CRASH:
        out.append(_scrubs() + "\n")
    if uses_signature:
        out.append('WRAPPERS = ("BackendCompilerFailed", "InductorError")\n')
    if kind == FailureKind.CRASH:
        out.append(f"DYING = {_DYING_WORDS!r}\n")
    if sidecar:
        out.append(
            "SIDECAR = torch.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "
            f"{'repro' + SIDECAR_SUFFIX!r}), weights_only=True)\n"
        )
    if meta.get("grad_enabled", True) is False:
        out.append("torch.set_grad_enabled(False)  # as in the program when the graph ran\n")
    if meta.get("collectives") and has_collectives(gm):  # the minimal graph's
        out.append(
            "\n" + FAKE_PG.format(rank=meta.get("rank", 0), world_size=meta.get("world_size", 2))
        )
    if config_lines.strip():
        out.append(config_lines.rstrip() + "\n")
    for src in (extra, own):
        if src:
            out.append("\n\n" + src.strip() + "\n")
    out.append("\n\n" + module_src.rstrip() + "\n")
    out.append("\n\n" + compact_source(specs))
    check = (
        _aot_check(kind, cuda)
        if aot
        else _check(kind, accuracy, cuda, random_ops, bool(kwargs), own, meta, signature)
    )
    out.append("\n\n" + check)
    helpers = []
    if uses_signature:
        helpers.append(snippets.SIGNATURE)
    if kind == FailureKind.CRASH:
        helpers.append(snippets.SCRUB)
    if not checking and meta.get("graph_kind") == "backward" and not aot:
        helpers.append(snippets.GRADS)
    if checking:
        if signature.exc_type not in ("DtypeMismatch", "ShapeMismatch"):
            helpers.append(snippets.STRICT if accuracy == AccuracyMode.STRICT else snippets.LOOSE)
        helpers.append(snippets.GRADS if _backward(signature) else snippets.NO_GRADS)
    helpers, check = _with_autocast(helpers, check, autocast, rounded, checking, accuracy, gm)
    out[-1] = "\n\n" + check
    for h in helpers:
        out.append(h)
    out.append(snippets.CRASH_MAIN if kind == FailureKind.CRASH else snippets.MAIN)
    return re.sub(r"\n{3,}", "\n\n", "".join(out))  # one blank line between definitions


_CASTS = {"float", "half", "double", "bfloat16", "to", "type", "type_as"}


def _casts(gm: torch.fx.GraphModule) -> bool:
    """The graph casts values itself (``h.float()``): ``Repro().to(torch.float64)`` is not
    a float64 reference then."""
    return any(n.op == "call_method" and n.target in _CASTS for n in gm.graph.nodes)


def _with_autocast(
    helpers: list[str],
    check: str,
    autocast: list[tuple[str, str]],
    rounded: dict[int, str],
    checking: bool,
    accuracy: str,
    gm: torch.fx.GraphModule,
) -> tuple[list[str], str]:
    """The check's pieces when the program called the graph under torch.autocast (the
    forward under it, the backward outside) or when the graph casts values itself (a
    float64 reference that follows the program's own precision)."""
    if autocast:
        pairs = ", ".join(f"({d!r}, {t})" for d, t in autocast)
        helpers = [h.replace("fn(*args)", "forward(fn, args)") for h in helpers]
        helpers.append(snippets.AUTOCAST.replace("{autocast}", f"[{pairs}]"))
        check = check.replace(f"{_call_of(check)}(*inputs)", f"forward({_call_of(check)}, inputs)")
        if rounded and snippets.LOOSE in helpers:  # the autocast's precision as the floor
            coarse = autocast[0][1]
            check = check.replace("differs_loose(a, b, c)", f"differs_loose(a, b, c, {coarse})")
    if checking and accuracy != AccuracyMode.STRICT and (rounded or autocast or _casts(gm)):
        # the float64 reference as tcompile computes it: every value taken to float64
        # (a cast in the graph cannot pull it back), autocast's roundings kept
        text = ", ".join(f"{k!r}: {v}" for k, v in sorted(rounded.items()))
        helpers.append(snippets.F64_AUTOCAST.replace("{rounded}", "{" + text + "}"))
        check = check.replace("Repro().to(torch.float64)", "F64(Repro())")
    return helpers, check


def _call_of(check: str) -> str:
    """The compile call a check makes (``torch.compile(mod, ...)``)."""
    m = re.search(r"torch\.compile\(mod[^)]*\)", check)
    return m.group(0) if m else "\0"


def _rounded(
    module_src: str,
    imports: list[str],
    specs: list[InputSpec],
    sidecar: list[torch.Tensor],
    autocast: list[tuple[str, str]],
) -> dict[int, str]:
    """The torch calls of ``Repro().forward`` (numbered in order, as the repro's F64 mode
    numbers them) whose results the program's autocast makes lower-precision: each call's
    result dtype under the autocast, against autocast off (float64.py's rule)."""
    if not autocast:
        return {}
    import contextlib

    import torch

    from .inputs import build

    class Record(torch.overrides.TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.dtypes: list[torch.dtype | None] = []

        def __torch_function__(
            self,
            func: Callable[..., object],
            types: Collection[type],
            args: Sequence[object] = (),
            kwargs: Mapping[str, object] | None = None,
        ) -> object:
            out = func(*args, **(kwargs or {}))
            self.dtypes.append(out.dtype if isinstance(out, torch.Tensor) else None)
            return out

    def dtypes(on: bool) -> list[torch.dtype | None]:
        namespace: dict[str, Any] = {"torch": torch, "SIDECAR": sidecar}
        exec("\n".join(imports) + "\n" + module_src, namespace)  # noqa: S102 -- our own source
        with contextlib.ExitStack() as stack:
            for device, dtype in autocast:
                t = eval(dtype, {"torch": torch})  # noqa: S307 -- "torch.bfloat16"
                stack.enter_context(torch.autocast(device, dtype=t, enabled=on))
            mod, inputs = namespace["Repro"](), build(specs, sidecar)
            with torch.no_grad(), Record() as rec:
                mod(*inputs)
        return rec.dtypes

    try:
        low, plain = dtypes(True), dtypes(False)
    except Exception:
        return {}
    return {
        i: str(a)
        for i, (a, b) in enumerate(zip(low, plain))
        if a is not None and b is not None and a.is_floating_point and a.itemsize < b.itemsize
    }


def _backward(signature: FailureSignature) -> bool:
    """An accuracy failure in a gradient: the check computes gradients too."""
    return signature.result == "grad"


def _real(specs: list[InputSpec]) -> bool:
    return any(s.kind == "tensor" and s.fill in ("values", "sidecar") for s in specs)


def compile_kwargs_of(
    meta: CaptureMeta, accuracy: str, stage: str, gm: torch.fx.GraphModule, specs: list[InputSpec]
) -> dict[str, object]:
    kwargs: dict[str, object] = {}
    dynamic = meta.get("dynamic")
    if dynamic is None and any(s.kind == "size" for s in specs):
        dynamic = True  # the graph had symbolic sizes: keep them symbolic
    if dynamic is not None:
        kwargs["dynamic"] = dynamic
    if meta.get("mode") and meta["mode"] != "default":
        kwargs["mode"] = meta["mode"]
    options = _acc.with_fallback_random(
        meta.get("options"), checking=accuracy != AccuracyMode.OFF, stage=stage, gm=gm
    )
    if options and "mode" not in kwargs:
        kwargs["options"] = options
    return kwargs


def _aot_check(kind: str, cuda: bool) -> str:
    """An AOT graph (ATen ops): compile_fx_inner on its trace, then a call (boxed)."""
    sync = "        torch.cuda.synchronize()  # a kernel that faults shows here\n" if cuda else ""
    body = (
        "    if BACKEND != STAGE:\n"
        "        return torch.compile(mod, backend=BACKEND)(*inputs)\n"
        "    with torch.no_grad():  # an AOT graph, compiled as inductor compiles those it is handed\n"
        "        compiled = compile_fx_inner(torch.fx.symbolic_trace(mod), inputs)\n"
        '        STEP[0] = "runtime"\n'
        "        return compiled(list(inputs))\n"
    )
    if kind == FailureKind.CRASH:
        return (
            'STEP = ["compile"]\n\n\n'
            "def compiled_call(mod, inputs):\n" + body + "\n\n"
            "def check():\n"
            "    compiled_call(Repro(), make_inputs())\n"
            f"{sync.replace('        ', '    ')}"
            "    return None\n"
        )
    return (
        'STEP = ["compile"]\n\n\n'
        "def compiled_call(mod, inputs):\n" + body + "\n\n"
        "def check():\n"
        "    try:\n"
        "        compiled_call(Repro(), make_inputs())\n"
        f"{sync}"
        "    except Exception as exc:\n"
        "        return signature(STEP[0], exc)\n"
        "    return None\n"
    )


def _check(
    kind: str,
    accuracy: str,
    cuda: bool,
    random_ops: bool,
    kwargs: bool,
    own: str | None,
    meta: CaptureMeta,
    signature: FailureSignature,
) -> str:
    backend = "BACKEND"
    if own:
        fn = meta.get("user_backend")
        backend = f"{fn} if BACKEND == STAGE else BACKEND"
    call = f"torch.compile(mod, backend={backend}{', **KWARGS' if kwargs else ''})"
    sync = "        torch.cuda.synchronize()  # a kernel that faults shows here\n" if cuda else ""
    if kind == FailureKind.CRASH:  # the check dies of the bug (a C++ throw aborts); main tells
        return (
            "def check():\n"
            "    mod, inputs = Repro(), make_inputs()\n"
            "    try:\n"
            f"        {call}(*inputs)\n"
            f"{sync}"
            "    except Exception:  # an error raised (eager may raise one too) is no crash\n"
            "        pass\n"
            "    return None\n"
        )
    if kind != FailureKind.ACCURACY:
        backward = meta.get("graph_kind") == "backward"
        first = (
            f"run({call}, inputs)  # the failure is in the backward"
            if backward
            else f"{call}(*inputs)"
        )
        return (
            "def check():\n"
            "    mod, inputs = Repro(), make_inputs()\n"
            "    try:\n"
            f"        {first}\n"
            f"{sync}"
            "    except Exception as exc:  # compile errors surface at the first call\n"
            "        wrapped = type(exc).__name__ in WRAPPERS or hasattr(exc, 'inner_exception')\n"
            '        return signature("compile" if wrapped else "runtime", exc)\n'
            "    return None\n"
        )
    strict = accuracy == AccuracyMode.STRICT
    seed = (
        "    torch.manual_seed(0)  # random ops draw the same numbers (fallback_random)\n"
        if random_ops
        else ""
    )
    # "inference output differs from eager", ...
    what = signature.message or str(signature)
    for cat in ("dtype", "shape"):
        # compiled returns another dtype/shape
        if signature.exc_type == f"{cat.capitalize()}Mismatch":
            return (
                "def check():\n"
                "    mod, inputs = Repro(), make_inputs()\n"
                "    ref = run(mod, inputs)[0]\n"
                f"    res = run({call}, inputs)[0]\n"
                f"    if any(a.{cat} != b.{cat} for a, b in zip(ref, res)):\n"
                f'        return f"{{STAGE}}/accuracy: {cat.capitalize()}Mismatch: {what}"\n'
                "    return None\n"
            )
    pick = "grads" if _backward(signature) else "outs"
    exact = (
        "ref"
        if strict
        else f"run(Repro().to(torch.float64), inputs, torch.float64)[{int(pick == 'grads')}]"
    )
    return (
        "def check():\n"
        "    mod, inputs = Repro(), make_inputs()\n"
        f"{seed}"
        f"    ref = run(mod, inputs)[{int(pick == 'grads')}]\n"
        f"{seed}"
        f"    res = run({call}, inputs)[{int(pick == 'grads')}]\n"
        f"{sync.replace('        ', '    ')}"
        f"    exact = {exact}\n"
        f"    if any(differs_{'strict' if strict else 'loose'}(a, b, c) for a, b, c in zip(ref, res, exact)):\n"
        f'        return f"{{STAGE}}/accuracy: {"StrictAccuracyError" if strict else "AccuracyError"}: {what}"\n'
        "    return None\n"
    )


def write_text(path: Path, text: str, sidecar: list[torch.Tensor] | None = None) -> Path:
    """Atomically, after checking it parses; the sidecar (if any) beside it."""
    import torch

    compile(text, str(path), "exec")  # never write a script that does not parse
    if sidecar:
        torch.save(sidecar, path.with_name(path.stem + SIDECAR_SUFFIX))
    return layout.write_file(path, text, mode=0o755)

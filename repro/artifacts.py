"""Writing the minimized graph as repro.py, smallest form first, and verifying it.

Candidates, in order, until one is verified (verify.py): the short form with the
shrunk inputs (shrink.py), the long form with the same inputs, the long form with the
program's real inputs.  The generated code of the verified run (kernel.py) goes beside
it.  An interrupt while verifying keeps what is written and says it is not verified.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

from .inputs import INLINE_LIMIT, InputSpec, real_values, spec_of, with_values
from .verify import check_repro, repro_reproduces
from .writer import SIDECAR_SUFFIX, short_repro, write_text
from .writer_full import full_repro


@dataclasses.dataclass
class Artifacts:
    repro: Path
    verified: bool = False
    eager_passes: bool | None = None
    form: str = "short"  # short | long
    real_inputs: bool = False
    sidecar: bool = False
    lines: int = 0
    bytes: int = 0
    kernel: str | None = None  # the generated code beside the repro
    interrupted: bool = False
    output: str = ""  # what the verified repro printed
    device: str = "cpu"
    # the long form with the program's real inputs (what tcompile wrote before short
    # repros and input shrinking): lines, bytes, sidecar, input elements
    before: dict[str, Any] = dataclasses.field(default_factory=dict)


def real_specs(inputs: list[Any]) -> tuple[list[InputSpec], list[Any]]:
    """Specs with the program's own values: inline when small, else in a sidecar."""
    import torch

    specs, sidecar = [], []
    for i, x in enumerate(inputs):
        spec = spec_of(x, inputs, i)
        if isinstance(x, torch.Tensor) and spec.kind == "tensor":
            if x.numel() <= INLINE_LIMIT:
                spec = with_values(spec, x)
            else:
                sidecar.append(real_values(spec, x).clone())
                spec = with_values(spec, x, sidecar_index=len(sidecar) - 1)
        specs.append(spec)
    return specs, sidecar


def write_verified(
    run_dir: Path,
    *,
    gm: Any,
    inputs: list[Any],
    shrunk: Any,
    signature: str,
    accuracy: str,
    meta: dict[str, Any],
    real_only: bool = False,
) -> Artifacts:
    from .environment import environment
    from .kernel import collect, graph_ops

    env = environment()
    repro = run_dir / "repro.py"
    candidates: list[tuple[str, list[InputSpec], list[Any]]] = []
    if shrunk is not None and not real_only:
        candidates += [
            ("short", shrunk.specs, shrunk.sidecar),
            ("long", shrunk.specs, shrunk.sidecar),
        ]
    specs, sidecar = real_specs(inputs)
    candidates += [("short", specs, sidecar), ("long", specs, sidecar)]
    long_text = full_repro(
        stage=meta["stage"],
        gm=gm,
        specs=specs,
        sidecar=list(sidecar),
        signature=signature,
        accuracy=accuracy,
        meta=meta,
        env=env,
    )
    before = {
        "lines": long_text.count("\n"),
        "bytes": len(long_text.encode()),
        "sidecar": bool(sidecar),
        "numel": sum(s.numel for s in specs),
    }
    art = Artifacts(repro)
    cache = run_dir / "verify-cache"
    written = False
    try:
        for form, specs, sidecar in candidates:
            side = list(sidecar)
            kw = dict(
                gm=gm,
                specs=specs,
                sidecar=side,
                signature=signature,
                accuracy=accuracy,
                meta=meta,
                env=env,
            )
            if form == "short":
                text = short_repro(**kw)
            else:
                text = full_repro(stage=meta["stage"], **kw)
            if text is None:
                continue
            _clear(repro)
            write_text(repro, text, side)
            written = True
            art = Artifacts(
                repro,
                form=form,
                real_inputs=any(s.fill in ("values", "sidecar") for s in specs),
                sidecar=bool(side),
                lines=text.count("\n"),
                bytes=len(text.encode()),
                before=before,
            )
            shutil.rmtree(cache, ignore_errors=True)
            ok, art.output = check_repro(repro, signature, cache_dir=cache)
            art.device = next((s.device for s in specs if s.kind == "tensor"), "cpu")
            if ok:
                art.eager_passes = not repro_reproduces(repro, backend="eager")
                art.verified = bool(art.eager_passes)
                if art.verified:
                    break
        if art.verified and meta.get("stage") == "inductor":
            for name, code in collect(cache, graph_ops(gm)).items():
                (run_dir / name).write_text(code)
                art.kernel = str(run_dir / name)
                break
    except KeyboardInterrupt:
        art.verified, art.interrupted = False, True
        if not written:  # a repro exists before anything can stop its check
            text = full_repro(
                stage=meta["stage"],
                gm=gm,
                specs=specs,
                sidecar=list(sidecar),
                signature=signature,
                accuracy=accuracy,
                meta=meta,
                env=env,
            )
            write_text(repro, text, sidecar)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return art


def _clear(repro: Path) -> None:
    repro.with_name(repro.stem + SIDECAR_SUFFIX).unlink(missing_ok=True)

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
from typing import TYPE_CHECKING, Any, TypedDict

from tcompile.compiler import layout
from tcompile.compiler.signature import FailureSignature

from .inputs import INLINE_LIMIT, InputSpec, real_values, spec_of, with_values
from .verify import check_repro, repro_reproduces
from .writer import SIDECAR_SUFFIX, short_repro, write_text
from .writer_full import full_repro

if TYPE_CHECKING:
    import torch

    from .environment import Environment
    from .shrink import Shrunk
    from .writer import CaptureMeta


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
    pinned: str | None = None  # the autotune choice the repro compiles with alone
    # the long form with the program's real inputs (what tcompile wrote before short
    # repros and input shrinking): lines, bytes, sidecar, input elements
    before: dict[str, int | bool] = dataclasses.field(default_factory=dict)


def real_specs(inputs: list[object]) -> tuple[list[InputSpec], list[torch.Tensor]]:
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


class _WriterArgs(TypedDict):
    """The keywords both writers take (writer.short_repro, writer_full.full_repro)."""

    gm: torch.fx.GraphModule
    specs: list[InputSpec]
    sidecar: list[torch.Tensor]
    signature: FailureSignature
    accuracy: str
    meta: CaptureMeta
    env: Environment


@dataclasses.dataclass
class _Writer:
    """What every candidate repro is written from."""

    gm: torch.fx.GraphModule
    signature: FailureSignature
    accuracy: str
    meta: CaptureMeta
    env: Environment

    def text(self, form: str, specs: list[InputSpec], sidecar: list[torch.Tensor]) -> str | None:
        kw: _WriterArgs = dict(
            gm=self.gm,
            specs=specs,
            sidecar=sidecar,
            signature=self.signature,
            accuracy=self.accuracy,
            meta=self.meta,
            env=self.env,
        )
        if form == "short":
            return short_repro(**kw)
        return full_repro(stage=self.meta["stage"], **kw)


def write_verified(
    run_dir: Path,
    *,
    gm: torch.fx.GraphModule,
    inputs: list[object],
    shrunk: Shrunk | None,
    signature: FailureSignature,
    accuracy: str,
    meta: CaptureMeta,
    real_only: bool = False,
    pin: dict[str, Any] | None = None,
) -> Artifacts:
    """``pin``: the autotune choice a verification failure named (compiler/autotune.py):
    the repro compiles with it alone and shows its wrong values, tried first; the
    repro of the failure as it was follows, in case the pinned one does not verify."""
    from .environment import environment

    writer = _Writer(gm, signature, accuracy, meta, environment())
    repro = run_dir / layout.REPRO
    candidates: list[tuple[str, list[InputSpec], list[torch.Tensor]]] = []
    if shrunk is not None and not real_only:
        candidates += [
            ("short", shrunk.specs, shrunk.sidecar),
            ("long", shrunk.specs, shrunk.sidecar),
        ]
    specs, sidecar = real_specs(inputs)
    candidates += [("short", specs, sidecar), ("long", specs, sidecar)]
    writers = [(writer, signature, None)] * len(candidates)
    if pin is not None:
        config = {**(meta.get("config") or {}), **pin["config"]}
        pinned = _Writer(gm, pin["signature"], "loose", {**meta, "config": config}, writer.env)
        first = [c for c in candidates if c[0] == "short"]
        candidates = first + candidates
        writers = [(pinned, pin["signature"], pin["choice"])] * len(first) + writers
    long_text = writer.text("long", specs, list(sidecar)) or ""
    before = {
        "lines": long_text.count("\n"),
        "bytes": len(long_text.encode()),
        "sidecar": bool(sidecar),
        "numel": sum(s.numel for s in specs),
    }
    art = Artifacts(repro)
    cache = run_dir / "verify-cache"
    try:
        for (form, cand_specs, cand_sidecar), (w, want, choice) in zip(candidates, writers):
            side = list(cand_sidecar)
            text = w.text(form, cand_specs, side)
            if text is None:
                continue
            _clear(repro)
            write_text(repro, text, side)
            art = Artifacts(
                repro,
                form=form,
                real_inputs=any(s.fill in ("values", "sidecar") for s in cand_specs),
                sidecar=bool(side),
                lines=text.count("\n"),
                bytes=len(text.encode()),
                before=before,
                device=next((s.device for s in cand_specs if s.kind == "tensor"), "cpu"),
                pinned=choice,
            )
            if _verify(art, want, cache):
                break
        if art.verified and meta.get("stage") == "inductor":
            _kernel(art, cache, gm, run_dir)
    except KeyboardInterrupt:
        art.verified, art.interrupted = False, True
        if not repro.exists():  # a repro exists before anything can stop its check
            write_text(repro, long_text, list(sidecar))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return art


def _verify(art: Artifacts, signature: FailureSignature, cache: Path) -> bool:
    """Run it as a stranger would (private inductor cache); with eager it must pass."""
    from concurrent.futures import ThreadPoolExecutor

    shutil.rmtree(cache, ignore_errors=True)
    # both runs at once (two processes; the eager one is wasted only where the repro
    # does not reproduce, and a report's fixed cost is mostly these runs: issue 61)
    with ThreadPoolExecutor(2) as pool:
        eager = pool.submit(repro_reproduces, art.repro, "eager")
        ok, art.output = check_repro(art.repro, signature, cache_dir=cache)
        eager_fails = eager.result()
    if ok:
        art.eager_passes = not eager_fails
        art.verified = bool(art.eager_passes)
    return art.verified


def _kernel(art: Artifacts, cache: Path, gm: torch.fx.GraphModule, run_dir: Path) -> None:
    """The generated code of the verified run, beside the repro."""
    from .kernel import collect, graph_ops

    for name, code in collect(cache, graph_ops(gm)).items():
        layout.write_file(run_dir / name, code)
        art.kernel = str(run_dir / name)
        return


def _clear(repro: Path) -> None:
    repro.with_name(repro.stem + SIDECAR_SUFFIX).unlink(missing_ok=True)

"""The graph search of a minify job, from a worker that already serves the graph (or
a pool about to start one): read the capture, write minifier_launcher.py, shrink the
graph and its inputs (minify_search.py), write repro.py and verify it
(artifacts.py), and say what came of it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from tcompile.compiler import layout
from tcompile.compiler.accuracy import AccuracyMode
from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.runner import write_json
from tcompile.compiler.signature import FailureKind
from tcompile.minifier.verdict import Verdict

from .minify_search import Interrupts, inputs_json, read_capture, search_graph, shrink_minimal
from .minify_types import GraphMinifyReport, Job

if TYPE_CHECKING:
    from collections.abc import Mapping

    import torch

    from tcompile.compiler.pool import WorkerPool
    from tcompile.minifier.engine import MinifyResult
    from tcompile.repro.artifacts import Artifacts
    from tcompile.repro.kernel_repro import KernelRepro
    from tcompile.repro.shrink import Shrunk
    from tcompile.repro.writer import CaptureMeta

    from .minify_types import Numerics, Seeds


T = TypeVar("T")


def _why_alone(exc: Exception, job: Job) -> str:
    """Why a graph that failed in the program passes on its own, said plainly."""
    if getattr(exc, "verdict", None) is not Verdict.PASS:
        return ""
    return (
        f" -- graph {job.graph} failed in the program, but compiled alone in a worker (the"
        " program again, paused at that graph's first call, with its inputs and compiler"
        " config) it does not: the failure needs something that ran before in the"
        " program's process (an earlier compile of the same code: a recompilation or a"
        " cached artifact; or state the program set). minifier_launcher.py holds the graph;"
        " `tcompile explain` lists the recompilations"
    )


def minify_captured(job: Job) -> GraphMinifyReport:
    from tcompile.compiler.pool import WorkerPool
    from tcompile.minifier import MinifyError

    pool = job.pool or WorkerPool(
        job.command,
        job.config,
        jobs=job.jobs,
        work_dir=str(job.run_dir / "workers"),
        target=job.signature,
        startup_timeout=job.timeout or 900.0,
    )
    launcher = None
    try:
        if job.pool is None:
            job.observer.status(
                "starting a worker (the saved graph and its inputs: the program does not run)"
                if job.from_capture
                else "starting a worker (the program again, paused at the failing graph)"
            )
            pool.start()  # interrupted here: nothing found yet (exit 130)
        gm, inputs, meta = read_capture(Path(job.config.serve.capture_dir))  # type: ignore[union-attr]
        if job.write_launcher:
            launcher = _write_launcher(job, gm, inputs, meta)
        with Interrupts() as interrupts:
            t = time.monotonic()
            try:
                result = search_graph(job, pool, gm, inputs, meta, interrupts.event)
            except MinifyError as exc:
                alone = _why_alone(exc, job)
                return job.report(
                    ExitCode.COMPILER_FAILURE,
                    f"could not minify: {exc}{alone}",
                    stage=meta["stage"],
                    launcher=launcher,
                    alone_passes=bool(alone),
                )
            phases = {"search": time.monotonic() - t}
            shrunk, t = None, time.monotonic()
            if not result.stopped and not job.real_inputs:
                shrunk = shrink_minimal(job, pool, result, meta, interrupts.event)
            phases["inputs"] = time.monotonic() - t
        # an accuracy failure's numerics (in the worker) beside repro.py's verification
        # (fresh interpreters): neither uses the other's answer, and on the GPU each
        # took 10-20 s of a minify's fixed cost one after the other (issue 61 item 3)
        numerics: Future[Numerics] | None = None
        if job.signature.kind == FailureKind.ACCURACY and not result.stopped:
            side = ThreadPoolExecutor(1)
            numerics = side.submit(
                _timed, phases, "numerics", numerics_of, job, pool, (gm, inputs),
                (result.gm, result.inputs),
            )  # fmt: skip
            side.shutdown(wait=False)
        job.observer.status(
            f"minified {result.nodes_before} -> {result.nodes_after} nodes in {result.calls} "
            "calls; writing and verifying repro.py"
        )
        art = _timed(phases, "verify", _write, job, result, shrunk, meta)
        found: Mapping[str, object] = {}
        if numerics is not None and not art.interrupted:  # Ctrl-C: the worker goes now
            found = numerics.result()
    finally:
        pool.close()
    from tcompile.repro.kernel import graph_ops

    from .source_level import user_lines

    repro, verified, cut = art.repro, art.verified, art.interrupted
    kernel_repro = None
    if verified and not cut:
        kernel_repro = _timed(phases, "kernel_repro", _kernel_repro, job, repro, art.device, meta)
    report = job.report(
        ExitCode.INTERRUPTED if result.stopped or cut else ExitCode.COMPILER_FAILURE,
        _message(verified, result.stopped, cut, repro),
        launcher=launcher,
        nodes_before=result.nodes_before,
        nodes_after=result.nodes_after,
        calls=result.calls,
        inputs=inputs_json(shrunk),
        ops=graph_ops(result.gm),
        graph_kind=job.graph_kind,
        stage=meta["stage"],
        after=job.config.serve.level,  # type: ignore[union-attr]  # the form minified
        interrupted=result.stopped or cut,
        worker_restarts=pool.restarts,
        history=[dataclasses.asdict(h) for h in result.history],
        passes=result.passes,
        kernel_repro=kernel_repro,
        source_lines=user_lines(result.gm),
        phases={k: round(v, 2) for k, v in phases.items()},
        **artifact_fields(art),
        **found,
    )
    doc = report.to_json()
    write_json(job.run_dir / layout.MINIFY, {k: doc[k] for k in MINIFY_JSON_FIELDS})
    return report


def _timed(phases: dict[str, float], name: str, fn: Callable[..., T], *args: object) -> T:
    t = time.monotonic()
    try:
        return fn(*args)
    finally:
        phases[name] = time.monotonic() - t


def _write(job: Job, result: MinifyResult, shrunk: Shrunk | None, meta: CaptureMeta) -> Artifacts:
    """repro.py written and verified (artifacts.write_verified)."""
    from tcompile.compiler.autotune import pinned_choice
    from tcompile.repro.artifacts import write_verified

    return write_verified(
        job.run_dir,
        gm=result.gm,
        inputs=result.inputs,
        shrunk=shrunk,
        signature=job.signature,
        accuracy=job.accuracy,
        meta={**meta, "graph_kind": job.graph_kind},
        real_only=job.real_inputs,
        pin=pinned_choice(job.message or meta.get("message") or "", job.signature.stage),
    )


def artifact_fields(art: Artifacts) -> dict[str, object]:
    """The report's fields that say what repro.py is (artifacts.write_verified)."""
    from tcompile.repro.verify import why_not_verified

    return {
        "repro": str(art.repro),
        "verified": art.verified,
        "eager_passes": art.eager_passes,
        "real_inputs": art.real_inputs,
        "repro_form": art.form,
        "repro_lines": art.lines,
        "repro_bytes": art.bytes,
        "sidecar": art.sidecar,
        "kernel": art.kernel,
        "repro_before": art.before,
        "device": art.device,
        "repro_output": art.output.strip() or None,
        "pinned_choice": art.pinned,
        "not_verified": None if art.verified else why_not_verified(art.output),
    }


def _kernel_repro(
    job: Job, repro: Path, device: str | None, meta: CaptureMeta
) -> KernelRepro | None:
    """kernel_repro.py beside repro.py: the Triton kernel that writes the wrong value,
    or whose compile fails, alone (repro/kernel_repro.py); on CUDA (tritonparse
    installed, for a wrong value)."""
    from tcompile.repro.kernel_repro import available, write_kernel_repro

    kind = job.signature.kind
    if kind not in ("accuracy", "compile") or meta["stage"] != "inductor":
        return None
    if not (device or "").startswith("cuda"):
        return None
    compile_failure = kind == FailureKind.COMPILE
    if compile_failure:
        job.observer.status("compiling the repro's Triton kernels: writing kernel_repro.py")
        return write_kernel_repro(repro, compile_failure=True)
    if not available():
        return {"error": "tritonparse is not installed (pip install tritonparse)"}
    job.observer.status("tracing the repro's Triton kernels: writing kernel_repro.py")
    return write_kernel_repro(repro)


# what minify.json (beside repro.py) keeps of the report
MINIFY_JSON_FIELDS = (
    "signature",
    "nodes_before",
    "nodes_after",
    "calls",
    "verified",
    "interrupted",
    "repro",
    "repro_form",
    "repro_lines",
    "repro_bytes",
    "sidecar",
    "kernel",
    "inputs",
    "repro_before",
)


def numerics_of(
    job: Job,
    pool: WorkerPool,
    full: tuple[torch.fx.GraphModule, list[object]],
    minimal: tuple[torch.fx.GraphModule, list[object]],
) -> Numerics:
    """An accuracy failure: where the values first go wrong (in the full graph and the
    minimal one), in which kernel, and which numerics switch makes the minimal graph
    pass -- each switch judged by a worker, in parallel (child/numerics.py)."""
    from concurrent.futures import ThreadPoolExecutor

    from tcompile.minifier.verdict import Verdict

    job.observer.status("accuracy: where the values first go wrong, and which switch fixes them")
    low = pool.analyze(*minimal)
    # the full graph's: the baseline localized that very call already (issue 61: a
    # bisection over the graph's prefixes, a compile each, of a GPU minify's fixed cost)
    high = {**job.known_full, "from_baseline": True} if job.known_full else pool.analyze(*full)
    switches = [tuple(s) for s in low.pop("switches", [])]
    high.pop("switches", None)

    def passes(switch: tuple[str, object, str]) -> bool:
        verdict, _ = pool.evaluate(*minimal, patch={switch[0]: switch[1]})
        return verdict is Verdict.PASS

    # every switch at once first: the graph still failing so, no set of them makes it
    # pass and the verdict is a miscompile's in one compile -- not one a switch (issue
    # 61: ten compiles, 55 s of a GPU minify's fixed cost); the switches all turn a
    # policy toward eager's, so one passing alone while all at once fail is not expected
    at_once = None
    if len(switches) > 1:
        at_once = pool.evaluate(*minimal, patch={k: v for k, v, _ in switches})[0]
    if at_once is Verdict.SAME_FAILURE:
        results = [False] * len(switches)
    else:
        with ThreadPoolExecutor(max(1, job.jobs)) as ex:
            results = list(ex.map(passes, switches))
    fixed = [
        {"switch": f"{k}={v!r}", "means": why} for (k, v, why), ok in zip(switches, results) if ok
    ]
    smallest = smallest_set(pool, minimal, switches, results, at_once)
    seeds = seeds_agree(pool, minimal, smallest) if smallest else None
    if smallest and (len(smallest) > 1 or not fixed):
        names = " + ".join(f"{k}={v!r}" for k, v, _ in smallest)
        verdict = f"passes with {names} together (no one of them alone does)"
    elif fixed:
        verdict = f"passes with {fixed[0]['switch']}: {fixed[0]['means']}"
    elif not low.get("node") and low.get("right_alone") and job.accuracy == AccuracyMode.STRICT:
        verdict = (
            "passes with no numerics switch, but compiled is as close to float64 as eager: "
            "a difference of rounding or reduction order (--strict-accuracy), not a miscompile"
        )
    elif at_once is Verdict.SAME_FAILURE:
        verdict = "passes with no numerics switch, nor with all of them at once: a miscompile"
    elif switches:
        verdict = "passes with no numerics switch: a miscompile"
    else:
        verdict = "no numerics switch to try on this torch"
    if seeds is not None:
        verdict += f"; {seeds['said']}"
    return {
        "divergence": {"minimal": low, "full": high},
        "switches": {
            "tried": [f"{k}={v!r}" for k, v, _ in switches],
            "at_once": at_once.value if at_once is not None else None,
            "passes_with": fixed,
            "smallest": [f"{k}={v!r}" for k, v, _ in smallest],
            "seeds": seeds,
            "verdict": verdict,
        },
    }


def smallest_set(
    pool: WorkerPool,
    minimal: tuple[torch.fx.GraphModule, list[object]],
    switches: list[tuple[str, object, str]],
    alone: list[bool],
    at_once: Verdict | None = None,
) -> list[tuple[str, object, str]]:
    """The smallest set of switches that makes the minimal graph pass: one switch where
    one does (the first); else all of them at once (``at_once``: already judged) and,
    where that passes, each left out in turn while the rest still pass (a 1-minimal
    set); [] where none does."""
    from tcompile.minifier.verdict import Verdict

    singles = [s for s, ok in zip(switches, alone) if ok]
    if singles:
        return singles[:1]
    if len(switches) < 2:
        return []

    def passes(subset: list[tuple[str, object, str]]) -> bool:
        patch = {k: v for k, v, _ in subset}
        return pool.evaluate(*minimal, patch=patch)[0] is Verdict.PASS

    chosen = list(switches)
    together = passes(chosen) if at_once is None else at_once is Verdict.PASS
    if not together:
        return []
    for s in list(chosen):
        rest = [x for x in chosen if x is not s]
        if rest and passes(rest):
            chosen = rest
    return chosen


def seeds_agree(
    pool: WorkerPool,
    minimal: tuple[torch.fx.GraphModule, list[object]],
    chosen: list[tuple[str, object, str]],
) -> Seeds:
    """The switches checked on two other draws of the inputs (each input's values
    permuted with seed 1, then 2: the same values, ranges and special values, in other
    places): on each, the graph must fail without them and pass with them."""
    from tcompile.minifier.verdict import Verdict

    gm, inputs = minimal
    patch = {k: v for k, v, _ in chosen}
    agree = shows = 0
    for seed in (1, 2):
        drawn = permuted(inputs, seed)
        if pool.evaluate(gm, drawn)[0] is not Verdict.SAME_FAILURE:
            continue  # the failure does not show on this draw: no evidence either way
        shows += 1
        agree += pool.evaluate(gm, drawn, patch=patch)[0] is Verdict.PASS
    said = (
        f"verified on {agree} of 2 other input draws"
        if shows == 2
        else f"checked on {shows} of 2 other input draws (the failure did not show on the "
        f"other), passing on {agree}"
    )
    return {"draws": 2, "failure_shows": shows, "fixed": agree, "said": said}


def permuted(inputs: list[object], seed: int) -> list[object]:
    """Each tensor input's values in another order (seeded): ``requires_grad`` kept."""
    import torch

    g = torch.Generator().manual_seed(seed)
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.numel() > 1 and not x.is_sparse:
            flat = x.detach().reshape(-1)
            perm = torch.randperm(flat.numel(), generator=g).to(flat.device)
            y = flat[perm].reshape(x.shape)
            try:  # the input's own strides (a layout bug may need them)
                y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device).copy_(
                    y
                )
            except RuntimeError:  # overlapping (expanded) strides: contiguous, then
                y = y.contiguous()
            x = y.requires_grad_(x.requires_grad) if y.is_floating_point() else y
        out.append(x)
    return out


def _message(verified: bool, stopped: bool, cut: bool, repro: Path) -> str:
    if cut:
        return f"interrupted while verifying: {repro} is NOT verified (the search had finished)"
    if stopped:
        state = "verified" if verified else "NOT verified"
        return f"interrupted: {repro} holds the smallest graph found so far ({state})"
    if verified:
        return "verified"
    return "NOT verified: the repro did not reproduce the failure in a fresh process"


def _write_launcher(
    job: Job, gm: torch.fx.GraphModule, inputs: list[object], meta: CaptureMeta
) -> str:
    from tcompile.repro.launcher import write_launcher

    path, _ = write_launcher(
        job.run_dir / layout.LAUNCHER,
        gm=gm,
        inputs=inputs,
        meta=meta,
        signature=job.signature,
        accuracy=job.accuracy,
        command=job.command,
    )
    return str(path)

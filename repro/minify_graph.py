"""The graph search of a minify job, from a worker that already serves the graph (or
a pool about to start one): read the capture, write minifier_launcher.py, shrink the
graph and its inputs (minify_search.py), write repro.py and verify it
(artifacts.py), and say what came of it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tcompile.compiler.exitcodes import ExitCode
from tcompile.compiler.runner import write_json

from .minify_search import Interrupts, inputs_json, read_capture, search_graph, shrink_minimal
from .minify_types import Job, MinifyReport


def _why_alone(exc: Exception, job: Job) -> str:
    """Why a graph that failed in the program passes on its own, said plainly."""
    if getattr(getattr(exc, "verdict", None), "value", None) != "pass":
        return ""
    return (
        f" -- graph {job.graph} failed in the program, but compiled alone in a worker (the"
        " program again, paused at that graph's first call, with its inputs and compiler"
        " config) it does not: the failure needs something that ran before in the"
        " program's process (an earlier compile of the same code: a recompilation or a"
        " cached artifact; or state the program set). minifier_launcher.py holds the graph;"
        " `tcompile explain` lists the recompilations"
    )


def minify_captured(job: Job) -> MinifyReport:
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
                "starting a worker (the program again, paused at the failing graph)"
            )
            pool.start()  # interrupted here: nothing found yet (exit 130)
        gm, inputs, meta = read_capture(Path(job.config.serve["capture_dir"]))  # type: ignore[index]
        if job.write_launcher:
            launcher = _write_launcher(job, gm, inputs, meta)
        with Interrupts() as interrupts:
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
            shrunk = None
            if not result.stopped and not job.real_inputs:
                shrunk = shrink_minimal(job, pool, result, meta, interrupts.event)
            numerics = None
            if job.signature.kind == "accuracy" and not result.stopped:
                numerics = numerics_of(job, pool, (gm, inputs), (result.gm, result.inputs))
    finally:
        pool.close()
    job.observer.status(
        f"minified {result.nodes_before} -> {result.nodes_after} nodes in {result.calls} "
        "calls; writing and verifying repro.py"
    )
    from tcompile.compiler.autotune import pinned_choice

    from .artifacts import write_verified
    from .kernel import graph_ops
    from .source_level import user_lines

    art = write_verified(
        job.run_dir,
        gm=result.gm,
        inputs=result.inputs,
        shrunk=shrunk,
        signature=str(job.signature),
        accuracy=job.accuracy,
        meta={**meta, "graph_kind": job.graph_kind},
        real_only=job.real_inputs,
        pin=pinned_choice(job.message or meta.get("message") or "", job.signature.stage),
    )
    repro, verified, cut = art.repro, art.verified, art.interrupted
    kernel_repro = _kernel_repro(job, repro, art.device, meta) if verified and not cut else None
    report = job.report(
        ExitCode.INTERRUPTED if result.stopped or cut else ExitCode.COMPILER_FAILURE,
        _message(verified, result.stopped, cut, repro),
        repro=str(repro),
        launcher=launcher,
        nodes_before=result.nodes_before,
        nodes_after=result.nodes_after,
        calls=result.calls,
        verified=verified,
        eager_passes=art.eager_passes,
        real_inputs=art.real_inputs,
        repro_form=art.form,
        repro_lines=art.lines,
        repro_bytes=art.bytes,
        sidecar=art.sidecar,
        kernel=art.kernel,
        inputs=inputs_json(shrunk),
        repro_before=art.before,
        ops=graph_ops(result.gm),
        device=art.device,
        repro_output=art.output.strip() or None,
        pinned_choice=art.pinned,
        graph_kind=job.graph_kind,
        stage=meta["stage"],
        interrupted=result.stopped or cut,
        worker_restarts=pool.restarts,
        history=[dataclasses.asdict(h) for h in result.history],
        kernel_repro=kernel_repro,
        source_lines=user_lines(result.gm),
        **(numerics or {}),
    )
    doc = report.to_json()
    write_json(job.run_dir / "minify.json", {k: doc[k] for k in MINIFY_JSON_FIELDS})
    return report


def _kernel_repro(
    job: Any, repro: Any, device: str | None, meta: dict[str, Any]
) -> dict[str, Any] | None:
    """kernel_repro.py beside repro.py: the Triton kernel that writes the wrong value,
    or whose compile fails, alone (repro/kernel_repro.py); on CUDA (tritonparse
    installed, for a wrong value)."""
    from .kernel_repro import available, write_kernel_repro

    kind = job.signature.kind
    if kind not in ("accuracy", "compile") or meta["stage"] != "inductor":
        return None
    if not (device or "").startswith("cuda"):
        return None
    compile_failure = kind == "compile"
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
    job: Job, pool: Any, full: tuple[Any, Any], minimal: tuple[Any, Any]
) -> dict[str, Any]:
    """An accuracy failure: where the values first go wrong (in the full graph and the
    minimal one), in which kernel, and which numerics switch makes the minimal graph
    pass -- each switch judged by a worker, in parallel (child/numerics.py)."""
    from concurrent.futures import ThreadPoolExecutor

    from tcompile.minifier.verdict import Verdict

    job.observer.status("accuracy: where the values first go wrong, and which switch fixes them")
    low = pool.analyze(*minimal)
    high = pool.analyze(*full)
    switches = [tuple(s) for s in low.pop("switches", [])]
    high.pop("switches", None)

    def passes(switch: tuple[Any, ...]) -> bool:
        verdict, _ = pool.evaluate(*minimal, patch={switch[0]: switch[1]})
        return verdict is Verdict.PASS

    with ThreadPoolExecutor(max(1, job.jobs)) as ex:
        results = list(ex.map(passes, switches))
    fixed = [
        {"switch": f"{k}={v!r}", "means": why} for (k, v, why), ok in zip(switches, results) if ok
    ]
    if fixed:
        verdict = f"passes with {fixed[0]['switch']}: {fixed[0]['means']}"
    elif (
        not low.get("node")
        and "right on its own" in str(low.get("why"))
        and job.accuracy == "strict"
    ):
        verdict = (
            "passes with no numerics switch, but compiled is as close to float64 as eager: "
            "a difference of rounding or reduction order (--strict-accuracy), not a miscompile"
        )
    elif switches:
        verdict = "passes with no numerics switch: a miscompile"
    else:
        verdict = "no numerics switch to try on this torch"
    return {
        "divergence": {"minimal": low, "full": high},
        "switches": {
            "tried": [f"{k}={v!r}" for k, v, _ in switches],
            "passes_with": fixed,
            "verdict": verdict,
        },
    }


def _message(verified: bool, stopped: bool, cut: bool, repro: Path) -> str:
    if cut:
        return f"interrupted while verifying: {repro} is NOT verified (the search had finished)"
    if stopped:
        state = "verified" if verified else "NOT verified"
        return f"interrupted: {repro} holds the smallest graph found so far ({state})"
    if verified:
        return "verified"
    return "NOT verified: the repro did not reproduce the failure in a fresh process"


def _write_launcher(job: Job, gm: Any, inputs: list[Any], meta: dict[str, Any]) -> str:
    from .launcher import write_launcher

    path = write_launcher(
        job.run_dir / "minifier_launcher.py",
        gm=gm,
        inputs=inputs,
        meta=meta,
        signature=job.signature,
        accuracy=job.accuracy,
        command=job.command,
    )
    return str(path)

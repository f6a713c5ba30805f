"""A minifier worker's serve loop (DESIGN.md mechanism 7).

A worker is the user's command run once more under the hooks, told to stop at the
first call of graph N (or, for a minifier_launcher.py, the launcher's graph).  There
it saves the graph, its real inputs and the configuration in force (the capture,
file names in protocol.py), then answers requests on two pipes: load a candidate,
judge it (judge.py), reply.  It never continues the user's program.  The parent
side is compiler/pool.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from ..collectives import record
from ..graph_io import load_graph, save_graph
from ..protocol import (
    CAPTURE_COLLECTIVES,
    CAPTURE_GRAPH,
    CAPTURE_INPUTS,
    CAPTURE_META,
    HookConfig,
)
from ..signature import FailureKind, FailureSignature
from .global_state import isolated
from .graphs import has_collectives, holds_transform
from .judge import CompileSpec, Target, judge
from .numerics import patched
from .subsystems import counting
from .torch_config import config_diffs, source_of

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypedDict

    import torch

    from tcompile.minifier.verdict import Verdict

    from .numerics import Divergence
    from .observe import Ambient
    from .recorder import Recorder

    class AnalyzeRequest(TypedDict):
        """The parent's request for a graph's analysis (pool.py; its other keys unread)."""

        graph: str  # the candidate graph's file
        inputs: str  # its inputs' file


def serve(
    config: HookConfig,
    graph: torch.fx.GraphModule,
    args: list[object],
    *,
    index: int,
    stage: str,
    forward_kind: str,
    spec: CompileSpec,
    level: str = "dynamo",
    meta_extra: dict[str, object] | None = None,
    signature: FailureSignature | None = None,
    graph_kind: str | None = None,
    recorder: Recorder | None = None,
) -> NoReturn:
    """Capture ``graph`` (the reference, before compilation) and its inputs, then judge
    candidates until told to stop; the process then exits.  ``signature``: the failure
    this very process just saw (a worker serving the first failure it meets); else
    the one in the serve spec.  With ``capture_only`` (one rank of a distributed job)
    it stops after the capture, and says so through ``recorder``."""
    from ..snapshot import Snapshot

    serve_spec = config.serve
    assert serve_spec is not None, "only a worker serves"
    inputs = Snapshot(args).values()  # exact: strides, offsets, aliasing kept
    cap = Path(serve_spec.capture_dir)
    if not (cap / CAPTURE_META).exists():
        meta = _capture_meta(graph, index, stage, forward_kind, spec, level)
        meta.update(meta_extra or {})
        recorded = None
        if serve_spec.capture_only and meta["collectives"] and _real_group():
            # the job's collective results, for the single process that replays them
            # (collectives.py); this eager call stands in for the compiled one
            recorded = record(graph, Snapshot(args).values())
            meta["recorded_collectives"] = sorted(recorded) if recorded is not None else None
        _write_capture(cap, graph, inputs, meta, recorded)
    if serve_spec.capture_only:
        # one rank of a distributed job: the capture is all the parent needs (workers
        # then serve it in single processes); it stops every process of the run
        from ..protocol import Event

        if recorder is not None:
            recorder.emit(Event.STOPPED, graph=index)
        os._exit(0)
    from .observe import Ambient

    target = Target(
        ambient=Ambient(),  # the state the program's call runs in
        signature=signature or FailureSignature.from_json(serve_spec.signature or {}),
        stage=stage,
        accuracy=config.accuracy,
        spec=spec,
        level=level,
        graph_kind=forward_kind,
    )
    ready = {
        "graph": index,
        "transform": holds_transform(graph),  # minify_job may prefer its AOT graph
        "signature": target.signature.to_json(),
        "graph_kind": graph_kind or forward_kind,
        "stage": stage,
    }
    _answer(serve_spec.fds or [], target, ready)
    os._exit(0)


def capture_graph(
    capture_dir: str,
    graph: torch.fx.GraphModule,
    args: list[object],
    *,
    index: int,
    stage: str,
    forward_kind: str,
    spec: CompileSpec,
    signature: FailureSignature,
    graph_kind: str,
    message: str = "",
    ambient: Ambient | None = None,
) -> None:
    """A run that saves its failing graphs (HookConfig.capture): the graph, the inputs
    of this call and capture.json under ``capture_dir/graph-N``, then the program goes
    on.  bisect judges its configurations on it (capture_bisect.py), minify shrinks it:
    neither runs the program again to get there.  A capture that cannot be written
    is said in capture.json's absence, never as a failure of the program."""
    from ..snapshot import Snapshot

    cap = Path(capture_dir) / f"graph-{index}"
    try:
        inputs = Snapshot(args).values()
        meta = _capture_meta(graph, index, stage, forward_kind, spec, "dynamo")
        meta.update(signature=signature.to_json(), graph_kind=graph_kind, message=message)
        if ambient is not None:  # the call's own state (observe.Ambient), not the hook's
            meta.update(grad_enabled=ambient.grad, autocast=ambient.to_json())
        _write_capture(cap, graph, inputs, meta)
    except Exception as exc:  # an input torch cannot save: bisect reruns the program
        cap.mkdir(parents=True, exist_ok=True)
        (cap / "not-saved.txt").write_text(f"{type(exc).__name__}: {exc}"[:500])


def _capture_meta(
    graph: torch.fx.GraphModule,
    index: int,
    stage: str,
    forward_kind: str,
    spec: CompileSpec,
    level: str,
) -> dict[str, object]:
    import torch

    from .observe import Ambient

    return {
        "graph": index,
        "stage": stage,
        "forward_kind": forward_kind,
        "config": config_diffs(),
        "user_backend": _describe_backend(spec.user_backend),
        "backend_source": source_of(spec.user_backend),
        "mode": spec.mode,
        "options": {k: v for k, v in (spec.options or {}).items() if _plain(v)},
        "dynamic": spec.dynamic,
        "grad_enabled": torch.is_grad_enabled(),  # the program's grad mode at the call
        "autocast": Ambient().to_json(),  # an outer torch.autocast the call ran under
        # a graph that talks to other ranks replays in one process against a fake process
        # group with the job's rank and world size (configs.FAKE_PG)
        "collectives": has_collectives(graph),
        "rank": _env_int("RANK", 0),
        "world_size": _env_int("WORLD_SIZE", 1),
        "level": level,
        "torch": torch.__version__,
    }


def _write_capture(
    cap: Path,
    graph: torch.fx.GraphModule,
    inputs: list[object],
    meta: dict[str, object],
    recorded: dict[str, torch.Tensor] | None = None,
) -> None:
    """Atomically: the parent reads the capture once capture.json exists."""
    import torch

    cap.mkdir(parents=True, exist_ok=True)
    names = [CAPTURE_GRAPH, CAPTURE_INPUTS]
    save_graph(graph, cap / (CAPTURE_GRAPH + ".tmp"))
    torch.save(inputs, cap / (CAPTURE_INPUTS + ".tmp"))
    if recorded:
        torch.save({k: v.cpu() for k, v in recorded.items()}, cap / (CAPTURE_COLLECTIVES + ".tmp"))
        names.append(CAPTURE_COLLECTIVES)
    (cap / (CAPTURE_META + ".tmp")).write_text(json.dumps(meta, indent=2, default=str))
    for name in (*names, CAPTURE_META):
        os.replace(cap / (name + ".tmp"), cap / name)


def _real_group() -> bool:
    """A process group of the job's own (not the fake one of a single process)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_backend() != "fake"


def _answer(fds: list[int], target: Target, ready: dict[str, object]) -> None:
    import torch

    rfd, wfd = fds
    with os.fdopen(rfd, "r") as requests, os.fdopen(wfd, "w", buffering=1) as replies:
        replies.write(json.dumps({"ready": True, "pid": os.getpid(), **ready}) + "\n")
        for line in requests:
            req = json.loads(line)
            if req.get("stop"):
                break
            if req.get("analyze"):  # where the values first go wrong (numerics.py)
                replies.write(
                    json.dumps({"id": req["id"], "analysis": _analyze(req, target)}) + "\n"
                )
                continue
            if req.get("retarget"):  # another capture's failure, from now on
                target = _retarget(target, cast("dict[str, Any]", req["retarget"]))
            extra: dict[str, object] = {}
            try:
                gm = load_graph(req["graph"])  # written by our parent
                cand_inputs = torch.load(req["inputs"], weights_only=False)
                # a bisect judging the captured graph (capture_bisect.py): another stage,
                # a configuration of inductor's subsystems, their applications counted
                judged = target
                if req.get("stage"):
                    judged = dataclasses.replace(target, stage=req["stage"], any_stage=True)
                with isolated(), patched(req.get("patch")), counting(req.get("bisect")) as c:
                    verdict, sig = judge(gm, cand_inputs, judged)
                    if c is not None:
                        extra = {"counts": c.snapshot(), "effects": c.effects()}
            except Exception as exc:  # a broken candidate, not a broken worker
                verdict, sig = judge_error(exc)
            # a sticky CUDA error (a kernel faulted) leaves this process's CUDA context
            # unusable: answer, then retire, so that the next candidate runs in a
            # fresh worker with a healthy context
            retire = bool(sig) and sig.get("exc_type") == "CUDAError"
            reply = {
                "id": req["id"], "verdict": verdict.value, "signature": sig, "retire": retire,
                **extra,
            }  # fmt: skip
            replies.write(json.dumps(reply) + "\n")
            if retire:
                break


def _retarget(target: Target, meta: dict[str, Any]) -> Target:
    """Judge another capture's graph from now on (a triage's membership checks: one
    worker serves the captures of several scripts, repro/jobs/capture_check.py): its
    failure, stage, compile call and grad mode, as serve_launcher set them for the
    first.  The parent sends only captures whose worker would have nothing else of
    its own: no configuration, backend source, autocast or collectives."""
    import torch

    from .observe import Ambient

    torch.set_grad_enabled(bool(meta.get("grad_enabled", True)))
    backend = meta.get("user_backend") or meta["stage"]
    return dataclasses.replace(
        target,
        signature=FailureSignature.from_json(meta["signature"]),
        stage=meta["stage"],
        accuracy=meta.get("accuracy", target.accuracy),
        spec=CompileSpec(backend, meta.get("mode"), meta.get("options"), meta.get("dynamic")),
        graph_kind=meta.get("forward_kind", "forward"),
        ambient=Ambient(),
        any_stage=False,
    )


def _analyze(req: AnalyzeRequest, target: Target) -> Divergence:
    """First divergence and its kernel for the graph of ``req``; the switches this torch
    has (the parent judges the graph under each)."""
    import torch

    from .judge import compiler_for
    from .numerics import available_switches, first_divergence, first_grad_divergence, kernel_of

    try:
        gm = load_graph(req["graph"])
        inputs = torch.load(req["inputs"], weights_only=False)
        compile_fn = compiler_for(target)
        with isolated():
            found = first_divergence(gm, inputs, compile_fn)
            snap = None
            if not found.get("node") and _wrong_gradient(target, inputs):
                # the forward is right: the node whose backward goes wrong first
                from ..snapshot import Snapshot

                snap = Snapshot(inputs)
                found = {**first_grad_divergence(gm, snap, compile_fn), "grads": True}
            if found.get("node"):  # (so found["node"] is a node's name)
                found["kernel"] = kernel_of(gm, cast(str, found["node"]), compile_fn, inputs, snap)
        cuda = any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs)
        found["switches"] = [[k, v, why] for k, v, why in available_switches(cuda)]
        return found
    except Exception as exc:
        return {"node": None, "why": f"{type(exc).__name__}: {exc}"[:300], "switches": []}


def _wrong_gradient(target: Target, inputs: list[object]) -> bool:
    """A Dynamo-level graph whose failure is a gradient (its forward is right)."""
    import torch

    sig = target.signature
    grads = "grad" in (sig.message or "") or target.graph_kind == "backward"
    needs = any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs)
    return target.level != "aot" and sig.kind == FailureKind.ACCURACY and grads and needs


def judge_error(exc: BaseException) -> tuple[Verdict, dict[str, object]]:
    from tcompile.minifier.verdict import Verdict

    return Verdict.INVALID, {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _plain(v: object) -> bool:
    return isinstance(v, (str, int, float, bool, type(None)))


def _describe_backend(b: str | Callable[..., object] | None) -> str:
    if isinstance(b, str):
        return b
    return getattr(b, "__name__", None) or type(b).__name__


# ---- a worker for a minifier_launcher.py -------------------------------------------


def serve_launcher() -> NoReturn:
    """A worker for a minifier_launcher.py (protocol.LAUNCHER_WORKER, run under the
    hooks; the parent read and checked the launcher and put its data in the serve
    spec): restore the config and the program's backend, load the graph, serve."""
    import torch

    from ..configs import FAKE_PG
    from ..protocol import CONFIG_ENV
    from .torch_config import apply_config

    config = HookConfig.from_env(os.environ[CONFIG_ENV])
    assert config.serve is not None and config.serve.launcher is not None
    launcher = config.serve.launcher
    here = Path(launcher["dir"])
    data = launcher["data"]
    meta = data["meta"]
    namespace: dict[str, Any] = {"torch": torch, "aten": torch.ops.aten}
    if meta.get("collectives"):  # the job's collectives, answered by a fake process group
        exec(
            FAKE_PG.format(rank=meta.get("rank", 0), world_size=meta.get("world_size", 2)),
            namespace,
        )  # noqa: S102
    apply_config(meta.get("config") or {}, namespace)
    user_backend: str | Callable[..., object] = meta.get("user_backend") or meta.get("stage")
    if meta.get("backend_source"):
        exec(compile(meta["backend_source"], "<launcher backend>", "exec"), namespace)  # noqa: S102
        user_backend = namespace.get(meta["user_backend"], user_backend)
    gm = load_graph(here / data["graph_file"])  # written by tcompile
    inputs = torch.load(here / data["inputs_file"], weights_only=False)
    # the state the program's call ran in (serve's Ambient reads it): an inference
    # graph judged with grad on would be compiled as a training graph, another compile
    torch.set_grad_enabled(bool(meta.get("grad_enabled", True)))
    for dev, dtype in meta.get("autocast") or []:
        torch.autocast(dev, dtype=getattr(torch, str(dtype).replace("torch.", ""))).__enter__()
    serve(
        config,
        gm,
        inputs,
        index=0,
        stage=meta["stage"],
        forward_kind=meta.get("forward_kind", "forward"),
        spec=CompileSpec(user_backend, meta.get("mode"), meta.get("options"), meta.get("dynamic")),
        meta_extra={
            k: meta[k]
            for k in ("backend_source", "user_backend", "collectives", "rank", "world_size")
            if k in meta
        },
    )

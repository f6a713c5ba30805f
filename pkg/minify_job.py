"""``tcompile minify``: from a failing program to a verified standalone repro.py.

Steps: (1) run the program once under the hooks and pick the failure to minify;
(2) start workers -- the program again, paused at the first call of the failing graph
(compiler/worker.py) -- the first of which saves the graph, its real inputs and the
configuration in force; (3) write minifier_launcher.py; (4) shrink the graph with the
minifier engine, each candidate judged by a worker; (5) write repro.py and verify it
in a fresh process that cannot import tcompile, and check that the eager backend
passes on it.  Everything goes under one run directory.

This module is the glue between compiler/ (running, workers, judging), minifier/
(search) and repro/ (artifacts); it prints nothing and reports to an observer.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tcompile.compiler.observer import NullObserver, Observer
from tcompile.compiler.protocol import HookConfig
from tcompile.compiler.runner import (
    EXIT_COMPILER_FAILURE,
    EXIT_NOT_COMPILER,
    EXIT_OK,
    UsageError,
    new_run_dir,
    run_and_classify,
)
from tcompile.compiler.signature import FailureSignature


@dataclasses.dataclass
class MinifyReport:
    exit_code: int
    message: str
    repro: str | None = None
    launcher: str | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    calls: int | None = None
    seconds: float = 0.0
    signature: str | None = None
    verified: bool = False
    eager_passes: bool | None = None
    real_inputs: bool = False
    graph: int | None = None
    graph_kind: str | None = None
    stage: str | None = None
    after: str = "dynamo"
    run_dir: str | None = None
    interrupted: bool = False
    worker_restarts: int = 0
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    record: str | None = None  # a capture failure's frame, for `tcompile replay`

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _pick_failure(
    failures: list[dict[str, Any]], graph: int | None, match: str | None
) -> dict[str, Any] | None:
    for f in failures:
        if graph is not None and f.get("graph") != graph:
            continue
        if match is not None and not re.search(match, f.get("signature", "")):
            continue
        return f
    return None


def run_minify(
    command: list[str],
    *,
    after: str = "auto",
    accuracy: str = "off",
    backend: str | None = None,
    graph: int | None = None,
    match: str | None = None,
    jobs: int = 1,
    timeout: float | None = None,
    real_inputs: bool = False,
    out: str | None = None,
    observer: Observer | None = None,
    stdout: Any = None,
    stderr: Any = None,
) -> MinifyReport:
    observer = observer or NullObserver()
    t0 = time.monotonic()
    if match is not None:
        try:
            re.compile(match)
        except re.error as exc:
            raise UsageError(f"--match is not a valid regular expression: {exc}") from None
    run_dir = Path(new_run_dir(out, "minify"))

    def discard() -> None:  # nothing to report: leave no files behind
        shutil.rmtree(run_dir, ignore_errors=True)

    observer.status(f"running the program once to find the failing graph ({run_dir})")
    report = run_and_classify(
        command,
        out=str(run_dir),
        stage=backend,
        accuracy=accuracy,
        timeout=timeout,
        observer=observer,
        stdout=stdout,
        stderr=stderr,
    )
    if report.exit_code == EXIT_NOT_COMPILER:
        discard()
        return MinifyReport(EXIT_NOT_COMPILER, report.explanation, seconds=time.monotonic() - t0)
    dynamo_graphs = [g for g in report.graphs if g.get("level") == "dynamo"]
    if graph is not None and graph >= len(dynamo_graphs):
        discard()
        raise UsageError(
            f"--graph {graph}: the program compiled {len(dynamo_graphs)} graph(s) "
            f"(0..{len(dynamo_graphs) - 1})"
        )
    if not report.failures:
        discard()
        return MinifyReport(
            EXIT_OK, "no compiler failure: nothing to minify", seconds=time.monotonic() - t0
        )
    target = _pick_failure(report.failures, graph, match)
    if target is None:
        discard()
        what = []
        if graph is not None:
            what.append(f"in graph {graph}")
        if match is not None:
            what.append(f"matching {match!r}")
        found = "; ".join(f["signature"] for f in report.failures)
        raise UsageError(f"no failure {' and '.join(what)} (found: {found})")
    if target.get("graph") is None:
        record = target.get("record")
        return MinifyReport(
            EXIT_COMPILER_FAILURE,
            "the failure is in TorchDynamo's capture, before any graph exists: nothing to minify "
            f"({target['signature']})"
            + (f"; the failing frame is recorded: tcompile replay {record}" if record else ""),
            signature=target["signature"],
            record=record,
            run_dir=str(run_dir),
            seconds=time.monotonic() - t0,
        )
    sig = FailureSignature.from_json(target["signature_fields"])
    index = int(target["graph"])
    # auto: the Dynamo graph, where every failure shows (a decomposition bug is
    # already inside the AOT graph, DESIGN.md mechanism 5)
    level = "aot" if after == "aot" else "dynamo"
    if level == "aot" and (
        target.get("stage") != "inductor"
        or target.get("graph_kind") not in ("forward", "backward", "inference")
    ):
        discard()
        raise UsageError(
            f"--after aot needs a failure in an AOT graph compiled by inductor; this one is "
            f"in the {target.get('graph_kind')} graph of stage {target.get('stage')} "
            "(use --after dynamo)"
        )
    observer.status(f"minifying graph {index} ({target.get('graph_kind')}): {sig}")
    capture_dir = run_dir / "capture"
    config = HookConfig(
        dir=str(run_dir / "workers" / "events"),
        stage=backend,
        accuracy=accuracy,
        serve={
            "graph": index,
            "capture_dir": str(capture_dir),
            "signature": sig.to_json(),
            "level": level,
            "graph_kind": target.get("graph_kind"),
        },
    )
    return _minify_captured(
        command,
        config,
        sig,
        target,
        index,
        run_dir,
        jobs=jobs,
        timeout=timeout,
        real_inputs=real_inputs,
        accuracy=accuracy,
        observer=observer,
        t0=t0,
    )


def _minify_captured(
    command: list[str],
    config: HookConfig,
    sig: FailureSignature,
    target: dict[str, Any],
    index: int,
    run_dir: Path,
    *,
    jobs: int,
    timeout: float | None,
    real_inputs: bool,
    accuracy: str,
    observer: Observer,
    t0: float,
    launcher_cmd: list[str] | None = None,
    command_for_repro: list[str] | None = None,
) -> MinifyReport:
    import torch

    from tcompile.compiler.runner import write_json
    from tcompile.compiler.worker import CAPTURE_GRAPH, CAPTURE_INPUTS, CAPTURE_META, WorkerPool
    from tcompile.minifier import MinifyError, Verdict, minify
    from tcompile.repro.launcher import write_launcher

    capture_dir = Path(config.serve["capture_dir"])  # type: ignore[index]
    pool = WorkerPool(
        command,
        config,
        jobs=jobs,
        work_dir=str(run_dir / "workers"),
        target=sig,
        startup_timeout=timeout or 900.0,
    )
    interrupted = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda *a: interrupted.set())
    try:
        observer.status("starting a worker (the program again, paused at the failing graph)")
        pool.start()
        gm = torch.load(capture_dir / CAPTURE_GRAPH, weights_only=False)  # written by our worker
        inputs = torch.load(capture_dir / CAPTURE_INPUTS, weights_only=False)
        meta = __import__("json").loads((capture_dir / CAPTURE_META).read_text())
        stage = meta["stage"]
        launcher = launcher_cmd is None and write_launcher(
            run_dir / "minifier_launcher.py",
            gm=gm,
            inputs=inputs,
            meta=meta,
            signature=sig,
            accuracy=accuracy,
            command=command,
        )

        def oracle(g: Any, i: list[Any]) -> Verdict:
            verdict, _ = pool.evaluate(g, i)
            return Verdict(verdict)

        def progress(p: Any) -> None:
            observer.event(
                {
                    "event": "minify_progress",
                    "nodes": p.nodes,
                    "calls": p.calls,
                    "pass": p.pass_name,
                }
            )

        try:
            # intermediate values lifted to inputs are computed in the program's grad mode
            with torch.set_grad_enabled(meta.get("grad_enabled", True)):
                result = minify(
                    gm,
                    inputs,
                    oracle,
                    jobs=jobs,
                    stop=interrupted.is_set,
                    checkpoint=run_dir / "checkpoint",
                    on_progress=progress,
                )
        except MinifyError as exc:
            return MinifyReport(
                EXIT_COMPILER_FAILURE,
                f"could not minify: {exc}",
                signature=str(sig),
                run_dir=str(run_dir),
                graph=index,
                stage=stage,
                launcher=str(launcher) if launcher else None,
                seconds=time.monotonic() - t0,
            )
    finally:
        pool.close()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    observer.status(
        f"minified {result.nodes_before} -> {result.nodes_after} nodes in {result.calls} "
        "calls; writing and verifying repro.py"
    )
    repro = run_dir / "repro.py"
    use_real = real_inputs
    verified = False
    for attempt in (False, True) if not real_inputs else (True,):
        use_real = attempt
        write_repro_for(
            repro, result, str(sig), stage, accuracy, meta, command_for_repro or command, use_real
        )
        verified = verify_repro(repro, str(sig))
        if verified:
            break
    eager_ok = None
    if verified:
        eager_ok = not repro_reproduces(repro, backend="eager")
        verified = bool(eager_ok)
    write_json(
        run_dir / "minify.json",
        {
            "signature": str(sig),
            "nodes_before": result.nodes_before,
            "nodes_after": result.nodes_after,
            "calls": result.calls,
            "verified": verified,
        },
    )
    msg = (
        "verified"
        if verified
        else "NOT verified: the repro did not reproduce the failure in a fresh process"
    )
    return MinifyReport(
        EXIT_COMPILER_FAILURE,
        msg,
        repro=str(repro),
        launcher=str(launcher) if launcher else None,
        nodes_before=result.nodes_before,
        nodes_after=result.nodes_after,
        calls=result.calls,
        seconds=time.monotonic() - t0,
        signature=str(sig),
        verified=verified,
        eager_passes=eager_ok,
        real_inputs=use_real,
        graph=index,
        graph_kind=target.get("graph_kind"),
        stage=stage,
        run_dir=str(run_dir),
        interrupted=result.stopped,
        worker_restarts=pool.restarts,
        history=[dataclasses.asdict(h) for h in result.history],
    )


def write_repro_for(
    repro: Path,
    result: Any,
    sig: str,
    stage: str,
    accuracy: str,
    meta: dict[str, Any],
    command: list[str],
    real: bool,
) -> None:
    from tcompile.repro.writer import write_repro

    write_repro(
        repro,
        gm=result.gm,
        inputs=result.inputs,
        signature=sig,
        stage=stage,
        accuracy=accuracy,
        meta=meta,
        command=command,
        real_inputs=real,
    )


# A fresh interpreter that cannot import tcompile runs the repro (DESIGN.md mechanism 9).
_NO_TCOMPILE = (
    "import sys, runpy\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'tcompile' or name.startswith('tcompile.'):\n"
    "            raise ImportError('tcompile is not available to repro.py')\n"
    "sys.meta_path.insert(0, _Block())\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def repro_output(
    repro: Path, backend: str | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TCOMPILE", "TORCHINDUCTOR_", "TORCH_COMPILE"))
    }
    env.pop("PYTHONPATH", None)
    args = [sys.executable, "-c", _NO_TCOMPILE, str(repro)] + (
        ["--backend", backend] if backend else []
    )
    with_tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    return subprocess.run(
        args, capture_output=True, text=True, env=env, timeout=timeout, cwd=str(with_tmp)
    )


def verify_repro(repro: Path, signature: str) -> bool:
    proc = repro_output(repro)
    want = f"REPRODUCED: {signature}"
    return proc.returncode == 1 and any(line.strip() == want for line in proc.stdout.splitlines())


def repro_reproduces(repro: Path, backend: str | None = None) -> bool:
    proc = repro_output(repro, backend)
    return proc.returncode == 1


# ---- minifier_launcher.py --------------------------------------------------------
def launch(
    path: str,
    argv: list[str] | None = None,
    *,
    jobs: int = 1,
    out: str | None = None,
    real_inputs: bool = False,
    observer: Observer | None = None,
) -> MinifyReport:
    """Minify again from a launcher (``run``: only check that the failure reproduces)."""
    from tcompile.repro.launcher import read_launcher

    argv = argv or []
    try:
        data = read_launcher(path)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    here = Path(path).resolve().parent
    for key in ("graph_file", "inputs_file"):
        if not (here / data[key]).is_file():
            raise UsageError(f"{path}: {data[key]} is missing beside it")
    t0 = time.monotonic()
    observer = observer or NullObserver()
    sig = FailureSignature.from_json(data["signature"])
    run_dir = Path(new_run_dir(out or str(here), "launcher"))
    command = [sys.executable, str(Path(path).resolve()), "--serve"]
    config = HookConfig(
        dir=str(run_dir / "events"),
        accuracy=data["accuracy"],
        serve={"graph": 0, "capture_dir": str(run_dir / "capture"), "signature": sig.to_json()},
    )
    if argv and argv[0] == "run":
        import torch

        from tcompile.compiler.worker import WorkerPool

        pool = WorkerPool(command, config, jobs=1, work_dir=str(run_dir / "workers"), target=sig)
        try:
            pool.start()
            gm = torch.load(here / data["graph_file"], weights_only=False)  # our own file
            inputs = torch.load(here / data["inputs_file"], weights_only=False)
            verdict, got = pool.evaluate(gm, inputs)
        finally:
            pool.close()
        same = verdict == "same_failure"
        got_text = str(FailureSignature.from_json(got)) if got and "stage" in got else "no failure"
        return MinifyReport(
            EXIT_COMPILER_FAILURE if same else EXIT_OK,
            f"REPRODUCED: {sig}" if same else f"NOT REPRODUCED (got: {got_text})",
            signature=str(sig),
            verified=same,
            run_dir=str(run_dir),
            seconds=time.monotonic() - t0,
        )
    target = {"graph": 0, "graph_kind": data["meta"].get("forward_kind")}
    return _minify_captured(
        command,
        config,
        sig,
        target,
        0,
        run_dir,
        jobs=jobs,
        timeout=None,
        real_inputs=real_inputs,
        accuracy=data["accuracy"],
        observer=observer,
        t0=t0,
        launcher_cmd=command,
        command_for_repro=data.get("command"),
    )


def serve_launcher(path: str, data: dict[str, Any]) -> None:
    """A worker for a launcher: restore the config, load the graph, serve."""
    import json
    import types

    import torch

    from tcompile.compiler.protocol import CONFIG_ENV
    from tcompile.compiler.worker import serve

    here = Path(path).resolve().parent
    meta = data["meta"]
    namespace: dict[str, Any] = {"torch": torch, "aten": torch.ops.aten}
    from tcompile.compiler.configs import apply_config

    apply_config(meta.get("config") or {}, namespace)
    user_backend: Any = meta.get("user_backend") or meta.get("stage")
    if meta.get("backend_source"):
        exec(compile(meta["backend_source"], "<launcher backend>", "exec"), namespace)  # noqa: S102
        user_backend = namespace.get(meta["user_backend"], user_backend)
    gm = torch.load(here / data["graph_file"], weights_only=False)  # written by tcompile
    inputs = torch.load(here / data["inputs_file"], weights_only=False)
    config = HookConfig.from_env(os.environ[CONFIG_ENV])
    backend = types.SimpleNamespace(
        user_backend=user_backend,
        mode=meta.get("mode"),
        options=meta.get("options"),
        dynamic=meta.get("dynamic"),
    )
    runner = types.SimpleNamespace(
        reference=gm,
        index=0,
        stage=meta["stage"],
        forward_kind=meta.get("forward_kind", "forward"),
        backend=backend,
    )
    session = types.SimpleNamespace(config=config)
    serve(
        session,
        runner,
        inputs,
        meta_override={k: meta[k] for k in ("backend_source", "user_backend") if k in meta},
    )
    del json

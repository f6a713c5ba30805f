"""Triage's pieces as Ray tasks, on one machine or a cluster (issue 62 item 5).

A cluster is started as Ray starts one (``ray start --head`` on one machine, ``ray
start --address HEAD:6379`` on the others); ``tcompile triage --ray HEAD:6379`` then
runs each piece of a script's triage (its runs, its report, a membership check) as a
task of one CPU, and of one GPU where the script mentions CUDA and the cluster has GPUs.

* **A shared filesystem.** The pieces read the scripts and write under ``--out`` by
  path, as the local engine's do: every node must see both where the driver does (an
  NFS home, a cluster's shared disk).  Each alive node is asked first; one that cannot
  see ``--out`` is a usage error naming it, before any work.
* **A node lost mid-triage.** A task whose worker or node died is run again elsewhere
  (``max_retries``; an error the piece raised itself is not retried).  A finished
  piece's result is small, so Ray keeps it with the driver, not on the node that made
  it: a node lost after a piece finished loses nothing and runs nothing twice.  The
  driver writes each result to the triage cache as it arrives (triage.py ``done``), so
  a rerun after the driver itself died starts from what finished.
* Each attempt is logged (``ray-attempts/``): a result that needed more than one says on
  which nodes it ran (``ray_attempts``), so the pages show what a lost node cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tcompile.compiler.exitcodes import UsageError
from tcompile.repro.triage_records import Check, ScriptResult, Step
from tcompile.repro.triage_verdict import TriageVerdict as Verdict

RETRIES = 3  # a piece whose node died, run again elsewhere at most this often
ATTEMPTS = "ray-attempts"


def _sees(path: str) -> dict[str, Any]:
    import ray

    return {"node": ray.get_runtime_context().get_node_id(), "sees": os.path.isdir(path)}


def _attempt(fn: Any, log: str, task: dict[str, Any], *args: Any) -> Any:
    """One attempt of a piece on whatever node Ray chose: logged, then run."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    with open(log, "a") as f:
        f.write(json.dumps({"node": node[:12], "time": time.time()}) + "\n")
    return fn(task, *args)


def attempts(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@contextlib.contextmanager
def ray_engine(address: str, base: Path) -> Iterator[tuple[Any, int]]:
    """``(submit, slots)`` on the Ray cluster at ``address`` (see the module's notes)."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'ray>=2.9'") from None
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    except Exception as exc:  # noqa: BLE001 -- any way of not reaching the cluster
        raise UsageError(f"--ray {address}: cannot connect: {str(exc).splitlines()[0]}") from None
    refs: list[Any] = []
    waiter = ThreadPoolExecutor(max_workers=64)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        probe = ray.remote(num_cpus=0)(_sees)
        seen = ray.get(
            [
                probe.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
                ).remote(str(base))
                for n in nodes
            ],
            timeout=120,
        )
        blind = [s["node"][:12] for s in seen if not s["sees"]]
        if blind:
            raise UsageError(
                f"--ray {address}: node(s) {', '.join(blind)} cannot see --out {base}: "
                "triage over Ray needs the scripts and --out on a filesystem every node shares"
            )
        log_dir = base / ATTEMPTS
        log_dir.mkdir(parents=True, exist_ok=True)
        has_gpu = ray.cluster_resources().get("GPU", 0) > 0
        slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        remote = ray.remote(max_retries=RETRIES, retry_exceptions=False)(_attempt)

        def submit(fn: Any, task: dict[str, Any], *args: Any) -> Future[Any]:
            gpu = 1 if has_gpu and task["gpu"] else 0
            log = log_dir / f"{task['key']}-{fn.__name__}-{len(refs)}.jsonl"
            # a Ray worker may run another interpreter: the task runs tcompile with its own
            ref = remote.options(num_cpus=1, num_gpus=gpu).remote(
                fn, str(log), {**task, "python": None}, *args
            )
            refs.append(ref)
            return waiter.submit(_result, ray, ref, log, fn.__name__, args)

        yield submit, slots
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref, force=True)
        raise
    finally:
        waiter.shutdown(wait=False, cancel_futures=True)
        ray.shutdown()


def _result(ray: Any, ref: Any, log: Path, piece: str, args: tuple[Any, ...]) -> Any:
    try:
        res = ray.get(ref)
        tries = attempts(log)
    except ray.exceptions.RayTaskError:
        raise  # the piece's own error: as the local engine raises it
    except ray.exceptions.RayError as exc:  # its node or worker lost, every retry spent
        tries = attempts(log)
        res = _lost(piece, args, f"{type(exc).__name__} after {len(tries)} attempt(s)")
    if len(tries) > 1 and isinstance(res, ScriptResult):
        # run again after its node was lost: where each attempt ran
        res = dataclasses.replace(res, ray_attempts=[t["node"] for t in tries])
    return res


def _lost(piece: str, args: tuple[Any, ...], why: str) -> Any:
    """A piece Ray could not finish, in the shape of its result: an answer that says
    which step could not finish, never a pass or a fail (issue 64)."""
    said = f"lost with its Ray node ({why})"
    step = Step(f"{piece} on Ray", None, 0.0)
    if piece == "report_one":  # the classification stands; its report is what was lost
        res: ScriptResult = dataclasses.replace(args[0])
        res.message = f"{res.message}; its report was {said}".lstrip("; ")
        res.add_steps([step])
        return res
    if piece == "check_one":  # unknown: neither a member nor not one (not cached)
        return Check(without=args[0], passes=False, steps=[step], extra={"lost": said})
    if piece == "capture_checks_many":  # the first switch asked: unknown, as above
        rep, off, backend = args[1][0]
        lost = Check(off, backend, passes=False, steps=[step], extra={"lost": said})
        return [(rep, lost)]
    return ScriptResult(verdict=Verdict.ERROR, message=f"its runs were {said}", steps=[step])

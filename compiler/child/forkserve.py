"""The fork server's own side (compiler/forkserver.py is the parent's): import torch,
TorchDynamo and inductor once, then fork one candidate per request -- JSON lines on
stdin (script, argv, cwd, env, stderr) and stdout (its pid, then its exit status).
The fork becomes the candidate's process: the run's environment, a session of its own,
stdin and stdout on /dev/null, stderr to the run's file, tcompile's hooks installed as
the start-up hook would (bootstrap/sitecustomize.py), the script run as ``__main__``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypedDict

    class ForkRequest(TypedDict):
        """One candidate to run (compiler/forkserver.py writes it, a JSON line)."""

        script: str
        argv: list[str]
        cwd: str
        env: dict[str, str]
        stderr: str  # the file its stderr goes to


PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.codecache")


def _child(req: ForkRequest) -> None:
    """In the fork: become the candidate's process (never returns)."""
    code = 1
    try:
        os.setsid()
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        script = req["script"]
        extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [os.path.dirname(os.path.abspath(script)), *extra]
        sys.argv = [script, *req["argv"]]
        from .hooks import install_from_environment

        install_from_environment()
        # a fresh process draws its own seeds (torch's and Python's): a fork would
        # otherwise start every candidate from the server's one state -- a failure that
        # shows for some random inputs only would show always, or never
        import random

        import torch

        random.seed()
        torch.seed()
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                sys.stderr.write(f"{exc.code}\n")
                code = 1
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> int:
    import importlib

    # Importing inductor asks torch.cuda.is_available(), which initialises the CUDA
    # driver (cuInit) unless the check goes through NVML; a fork of a process whose
    # driver is initialised cannot use CUDA ("Cannot re-initialize CUDA in forked
    # subprocess"; seen on an H200: every forked candidate of a CUDA program failed so).
    # The server asks NVML; each fork gets the run's own environment back.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    for name in PRELOAD:
        importlib.import_module(name)
    import torch

    if torch.cuda.is_initialized():  # CUDA in use already: a fork could not use it
        print(json.dumps({"ready": False, "why": "cuda"}), flush=True)
        return 1
    if threading.active_count() != 1:  # a fork would copy locks other threads hold
        print(json.dumps({"ready": False, "why": "threads"}), flush=True)
        return 1
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "status": os.waitstatus_to_exitcode(status)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve())

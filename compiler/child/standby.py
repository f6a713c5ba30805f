"""A worker started before it is needed (compiler/standby.py is the parent's side).

It starts while the program's baseline runs, pays for ``import torch`` and inductor's
modules there, says so on its pipe, and waits.  Told to become a worker, it takes the
environment a fresh worker would have had (the hooks' config with these very pipes),
installs the hooks as the start-up hook would have, and runs the worker's entry point.
Told to stop, or when tcompile is gone, it exits.
"""

from __future__ import annotations

import json
import os
import sys
from typing import NoReturn

FDS_ENV = "TCOMPILE_STANDBY_FDS"  # compiler/standby.FDS_ENV


def _read_line(fd: int) -> bytes:
    """One line from the pipe, a byte at a time: nothing past it is read, so the
    worker that follows reads its requests from the same descriptor intact."""
    out = bytearray()
    while True:
        b = os.read(fd, 1)
        if not b or b == b"\n":
            return bytes(out)
        out += b


def standby() -> NoReturn:
    from .hooks import watch_parent

    watch_parent()
    rfd, wfd = (int(x) for x in os.environ[FDS_ENV].split(","))
    import torch
    import torch._dynamo  # noqa: F401  (the seconds a worker's start spends importing)
    import torch._inductor.compile_fx  # noqa: F401

    if torch.cuda.is_available():
        try:
            import triton  # noqa: F401
        except ImportError:
            pass
    os.write(wfd, (json.dumps({"standby": True, "fds": [rfd, wfd]}) + "\n").encode())
    line = _read_line(rfd)
    msg: dict[str, str | dict[str, str]] = json.loads(line) if line.strip() else {}
    env, code = msg.get("env"), msg.get("code")
    if not isinstance(env, dict) or not isinstance(code, str):  # told to stop
        os._exit(0)
    os.environ.clear()
    os.environ.update(env)  # with the hooks' config naming these pipes
    from .hooks import install_from_environment

    install_from_environment()  # torch is imported: it patches it now
    sys.argv = ["-c"]
    exec(compile(code, "<worker>", "exec"), {"__name__": "__main__"})  # noqa: S102
    os._exit(0)

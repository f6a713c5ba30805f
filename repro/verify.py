"""Verifying a repro.py (DESIGN.md mechanism 9): run it in a fresh interpreter that
cannot import tcompile, from another directory, with none of tcompile's or torch's
debug environment; it must print ``REPRODUCED: <the same signature>`` and exit 1, and
with ``--backend eager`` it must not reproduce."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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
    args = [sys.executable, "-c", _NO_TCOMPILE, str(Path(repro).resolve())] + (
        ["--backend", backend] if backend else []
    )
    with_tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(with_tmp),
        start_new_session=True,  # the repro's own check process dies with it
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:  # a timeout, Ctrl-C, SIGTERM: nothing is left running
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def verify_repro(repro: Path, signature: str) -> bool:
    proc = repro_output(repro)
    want = f"REPRODUCED: {signature}"
    return proc.returncode == 1 and any(line.strip() == want for line in proc.stdout.splitlines())


def repro_reproduces(repro: Path, backend: str | None = None) -> bool:
    return repro_output(repro, backend).returncode == 1

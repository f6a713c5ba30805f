import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def tcompile_cmd() -> list[str]:
    exe = shutil.which("tcompile")
    return [exe] if exe else [sys.executable, "-m", "tcompile.cli.main"]


def run_tcompile(
    *args: str,
    timeout: float = 600,
    cwd: str | None = None,
    env: dict | None = None,
    stdin: bytes | None = None,
):
    """tcompile in a subprocess.  Its stdin is ``stdin`` or /dev/null: never the test
    runner's (an xdist worker's stdin is its control channel)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [*tcompile_cmd(), *args],
        stdin=subprocess.DEVNULL if stdin is None else None,
        input=stdin,
        capture_output=True,
        text=stdin is None,
        timeout=timeout,
        cwd=cwd,
        env=full_env,
    )


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES

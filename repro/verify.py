"""Verifying a repro.py (DESIGN.md mechanism 9): run it in a fresh interpreter that
cannot import tcompile, from another directory, with none of tcompile's or torch's
debug environment; it must print ``REPRODUCED: <the same signature>`` and exit 1, and
with ``--backend eager`` it must not reproduce."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from tcompile.compiler import layout
from tcompile.compiler.pycache import helper_env
from tcompile.compiler.signature import FailureKind, FailureSignature

if TYPE_CHECKING:
    from tcompile.compiler.program import ProgramFailure

_NO_TCOMPILE = (
    "import sys, runpy, os, signal, threading, time\n"
    # tcompile killed (even with SIGKILL): this repro, its check process and the compilers
    # they started (all in this process group) go too -- a repro that hangs never outlives it
    "def _watch(parent=os.getppid()):\n"
    "    while os.getppid() == parent:\n"
    "        time.sleep(0.2)\n"
    "    os.killpg(os.getpgid(0), signal.SIGKILL)\n"
    "threading.Thread(target=_watch, daemon=True).start()\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'tcompile' or name.startswith('tcompile.'):\n"
    "            raise ImportError('tcompile is not available to repro.py')\n"
    "sys.meta_path.insert(0, _Block())\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def repro_output(
    repro: Path,
    backend: str | None = None,
    timeout: float = 900,
    cache_dir: Path | None = None,
    extra: list[str] | None = None,
    env_extra: dict[str, str] | None = None,
    launcher: list[str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a repro as a stranger would (``cwd``: from that folder; else from TMPDIR).  ``cache_dir``: inductor's cache for this run
    alone (a cache that cannot lie, and where the generated code can be found);
    ``extra``: more command-line arguments for it; ``launcher``: the job's launcher
    (torchrun ...) it runs under, on a port of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TCOMPILE", "TORCHINDUCTOR_", "TORCH_COMPILE"))
    }
    env.pop("PYTHONPATH", None)
    env.update(env_extra or {})
    if cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    env = helper_env(env)  # bytecode cached where the environment forbids writing it
    head = [sys.executable, "-c", _NO_TCOMPILE]
    if launcher:  # torchrun runs a script file: the same guard, written beside the repro
        from tcompile.compiler.program import launch_on_free_port

        guard = Path(repro).resolve().with_name(".run_as_a_stranger.py")
        layout.write_file(guard, _NO_TCOMPILE)
        head = [*launch_on_free_port(launcher), str(guard)]
    args = (
        [*head, str(Path(repro).resolve())]
        + (["--backend", backend] if backend else [])
        + list(extra or [])
    )
    with_tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(cwd or with_tmp),
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


def verify_repro(repro: Path, signature: FailureSignature, cache_dir: Path | None = None) -> bool:
    """It prints ``REPRODUCED: <signature>`` of the same failure (failure-identity as
    tcompile decides it: for a crash, the signal) and exits 1."""
    return check_repro(repro, signature, cache_dir)[0]


def check_repro(
    repro: Path, signature: FailureSignature, cache_dir: Path | None = None, timeout: float = 900
) -> tuple[bool, str]:
    """(verified, what the repro printed on stdout)."""
    proc = repro_output(repro, cache_dir=cache_dir, timeout=timeout)
    return _reproduced(proc, signature), proc.stdout


def _reproduced(proc: subprocess.CompletedProcess[str], signature: FailureSignature) -> bool:
    """It exited 1 and printed the same failure (the repro's output: another process's
    text, read back by FailureSignature.parse)."""
    if proc.returncode != 1:
        return False
    for line in proc.stdout.splitlines():
        if line.strip().startswith("REPRODUCED: "):
            text = line.strip()[len("REPRODUCED: ") :]
            if text == str(signature) or signature.matches(FailureSignature.parse(text)):
                return True
    return False


def repro_reproduces(repro: Path, backend: str | None = None) -> bool:
    return repro_output(repro, backend).returncode == 1


def verify_program_repro(
    repro: Path,
    failure: ProgramFailure,
    timeout: float,
    *,
    parallel: bool = False,
    launcher: list[str] | None = None,
    folder: Path | None = None,
) -> tuple[bool, str]:
    """Run as a stranger would (no tcompile, another directory): exit 1 and REPRODUCED
    with the same exception type (or death by the same kind of signal); with
    torch.compile disabled, exit 0 and NOT REPRODUCED.  ``parallel``: both runs at once;
    ``launcher``: both under the job's launcher (torchrun ...); ``folder``: repro.py's
    folder (the files it reads): copied to an empty folder, each run from its copy."""
    if folder is not None:
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tcompile-repro-") as tmp:
            copy = Path(tmp) / folder.name
            shutil.copytree(folder, copy)
            return _verify_program_repro(
                copy / repro.name, failure, timeout, parallel, launcher, copy
            )
    return _verify_program_repro(repro, failure, timeout, parallel, launcher, None)


class _RunWith(TypedDict):
    """How each run of a program-level repro is made (:func:`repro_output`'s keywords)."""

    timeout: float
    launcher: list[str] | None
    cwd: Path | None


def _verify_program_repro(
    repro: Path,
    failure: ProgramFailure,
    timeout: float,
    parallel: bool,
    launcher: list[str] | None,
    cwd: Path | None,
) -> tuple[bool, str]:
    off = {"TORCHDYNAMO_DISABLE": "1"}
    kw: _RunWith = {"timeout": timeout, "launcher": launcher, "cwd": cwd}
    if parallel:
        with ThreadPoolExecutor(2) as ex:
            later = ex.submit(repro_output, repro, env_extra=off, **kw)
            proc = repro_output(repro, **kw)
            plain = later.result()
    else:
        proc, plain = repro_output(repro, **kw), None
    said = next((ln for ln in proc.stdout.splitlines() if ln.startswith("REPRODUCED: ")), "")
    if failure.kind == FailureKind.CRASH:
        ok = proc.returncode < 0
    else:
        # the harness compared the causes (program_harness.REPRODUCED: the type below
        # torch's wrappers, the raising line): REPRODUCED only for the failure minified
        ok = proc.returncode == 1 and bool(said)
    if not ok:
        return False, (proc.stdout + proc.stderr)[-2000:]
    plain = plain or repro_output(repro, env_extra=off, **kw)
    if plain.returncode == 0 and "NOT REPRODUCED" in plain.stdout:
        return True, said
    tail = [ln for ln in (plain.stdout + plain.stderr).splitlines() if ln.strip()][-1:]
    return False, f"ERROR: with torch.compile off too: {tail[0] if tail else plain.returncode}"


def why_not_verified(output: str | None) -> str:
    """Why a repro did not verify, in one line with what to do, from what it printed
    (its stdout and stderr, or the verifier's own words)."""
    import re

    text = output or ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    missing = re.search(r"No module named '([\w.]+)'", text)
    if missing:
        mod = missing.group(1)
        return (
            f"it imports {mod!r}, which it does not carry (not found among the program's "
            f"own files, nor installed): minify again with --include PATH naming "
            f"{mod.split('.')[0]!r}'s file or folder, or run it where {mod.split('.')[0]!r} "
            "imports"
        )
    if "with torch.compile off too" in text:
        return (
            "it fails without torch.compile too: the smaller program no longer needs the "
            "compiler to fail; run `tcompile run` on repro.py to see which failure it has"
        )
    if any(ln.startswith("NOT REPRODUCED") for ln in lines):
        return (
            "the failure did not show in a fresh interpreter: it may need state the "
            "program's run built (a warm cache, a file it wrote) or come and go; run "
            "`python repro.py` twice, and `tcompile run` on it"
        )
    other = next((ln for ln in lines if ln.startswith("REPRODUCED: ")), None)
    if other:
        return (
            f"it shows another failure ({other[12:][:160]}): compare it with the one "
            "minified; `tcompile run` on repro.py classifies it"
        )
    if "TimeoutExpired" in text or "timed out" in text:
        return "it ran past its time limit: run `python repro.py` to see where it waits"
    last = lines[-1][:200] if lines else "nothing"
    return f"its last line: {last!r}; run `python repro.py` to see all it prints"

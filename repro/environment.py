"""The environment, for the headers of generated files and for bug reports."""

from __future__ import annotations

import platform
import sys
from typing import TypedDict, cast


class Environment(TypedDict):
    """Versions and devices: the header of a generated file."""

    torch: str
    torch_git: str
    cuda: str | None
    gpu: str | None
    python: str
    os: str
    tcompile: str
    executable: str


class FullEnvironment(Environment):
    """What a bug report adds: cuDNN, Triton, the C++ compiler, the TORCH* variables."""

    cudnn: int | None
    triton: str | None
    cxx: str | None
    env: dict[str, str]


def environment() -> Environment:
    import torch

    from tcompile import __version__

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", "unknown"),
        "cuda": cuda,
        "gpu": gpu,
        "python": platform.python_version(),
        "os": platform.platform(),
        "tcompile": __version__,
        "executable": sys.executable,
    }


def full_environment() -> FullEnvironment:
    """Everything a bug report needs: versions, devices, the C++ compiler, TORCH* vars."""
    import os
    import shutil
    import subprocess

    import torch

    info = cast("FullEnvironment", environment())  # the keys below complete it
    info["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:
        info["triton"] = None
    cxx = (
        os.environ.get("CXX")
        or shutil.which("g++")
        or shutil.which("c++")
        or shutil.which("clang++")
    )
    version = None
    if cxx:
        try:
            proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=10)
            version = proc.stdout.splitlines()[0]
        except Exception:
            version = None
    info["cxx"] = f"{cxx} ({version})" if cxx else None
    prefixes = ("TORCH", "PYTORCH", "CUDA_VISIBLE", "OMP_NUM_THREADS", "TCOMPILE")
    info["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith(prefixes)}
    return info

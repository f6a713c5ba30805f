"""The environment, for the headers of generated files and for bug reports."""

from __future__ import annotations

import platform
import sys
from typing import Any


def environment() -> dict[str, Any]:
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

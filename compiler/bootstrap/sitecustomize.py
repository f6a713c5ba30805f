"""tcompile's start-up hook.  Inert unless TCOMPILE_CONFIG is set.

This folder is put first on PYTHONPATH of the processes tcompile runs, so Python
imports this file at start-up; it installs the hooks, then hands over to any other
``sitecustomize`` further down the path, as if this one were not there.
"""

import os
import sys


def _tcompile_bootstrap() -> None:
    if os.environ.get("TCOMPILE_CONFIG"):
        try:
            from tcompile.compiler.child.hooks import install_from_environment

            install_from_environment()
        except Exception as exc:  # never break the user's program
            sys.stderr.write(f"tcompile: start-up hook not installed: {exc}\n")
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    me = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401  (the next one on the path, if any)
    except ImportError:
        if me is not None:
            sys.modules["sitecustomize"] = me
    finally:
        sys.path[:] = saved


_tcompile_bootstrap()

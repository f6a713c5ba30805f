"""tcompile.minifier: shrink a failing FX graph behind an oracle.

Pure search over FX graphs: knows nothing about subprocesses, the CLI or torch's
compiler internals.  See engine.py (the problem and its gate) and passes.py (the
passes and the rules for writing one).
"""

from .engine import MinifyError, MinifyResult, Progress, Step, Stop, Verdict, minify
from .graph import Case

__all__ = ["Case", "MinifyError", "MinifyResult", "Progress", "Step", "Stop", "Verdict", "minify"]

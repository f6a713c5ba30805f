"""The run folder's layout: every file a job writes into its folder, named here once.

A run folder is ``OUT/KIND-NNN/`` (runner.new_run_dir; ``KIND`` one of ``FOLDERS``).
Users, scripts and other jobs find files by these names (``merge`` reads ``RESULT``,
minify's ``--json`` names ``REPRO``), so they are part of the public interface: add
names, never rename one.  The minifier's checkpoint (minifier/checkpoint.py) keeps its
own name: the pure search imports nothing of tcompile.

Every artifact is written through ``write_file``: atomically, deleted on failure
(tests/unit/test_layers.py keeps other writes out of the writers).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# the folder of each job, under --out
FOLDERS = ("run", "bisect", "minify", "report", "replay", "explain", "launcher")

# every job
RESULT = "result.json"  # tcompile run's --json document (merge reads it)
MINIFY = "minify.json"  # minify's --json document
STDERR = "stderr.txt"  # a forkserver child's stderr

# run
RECORD = "record.pkl"  # a frame Dynamo could not capture (replay's input)
# the folders of the program's runs inside a run folder: the compiled run, and where it
# failed unexplained the plain run, the locating run, and the watching-only reruns
# (faithful.py: after a check that changed the program; "again": after a locating run
# that did)
COMPILED, PLAIN, LOCATED, PASSIVE, AGAIN = "compiled", "plain", "located", "passive", "again"
WITHOUT = "without"  # the program with the subsystem its error names off (owned.py)
PROGRAM_RUNS = (COMPILED, PLAIN, LOCATED, PASSIVE, AGAIN, WITHOUT)


def program_runs(run_dir: str) -> int:
    """How many times a run ran the program (the folders of PROGRAM_RUNS it left)."""
    return sum(os.path.isdir(os.path.join(run_dir, name)) for name in PROGRAM_RUNS)


def record_name(n: int) -> str:
    """The ``n``-th record of a run: record.pkl, record-2.pkl, ..."""
    return RECORD if n == 1 else f"record-{n}.pkl"


# minify: the repro and what sits beside it
REPRO = "repro.py"
SIDECAR_SUFFIX = "_inputs.pt"  # repro.py's inputs when they are too big to inline
LAUNCHER = "minifier_launcher.py"
LAUNCHER_GRAPH_SUFFIX = "_graph.pt"  # minifier_launcher.py's graph and inputs beside it
KERNEL_CPP = "kernel.cpp"  # the generated code of the culprit's kernel
KERNEL_TRITON = "kernel_triton.py"
KERNEL_REPRO = "kernel_repro.py"  # the one Triton kernel, launched alone
KERNEL_REPRO_TENSORS = "kernel_repro.pt"
MINIMAL_FUNCTION = "minimal_function.py"  # a capture failure's function, shrunk
BEST_PROGRAM = "best.py"  # program-level minify's smallest program so far
TARGET = "target.json"  # program-level minify's oracle target (benchmarks read it)

# a minifier worker's capture of the graph it serves (child/serve.py writes, parent reads)
CAPTURE_GRAPH = "graph.pt"
CAPTURE_INPUTS = "inputs.pt"
CAPTURE_META = "capture.json"
# what each collective of the captured graph returned on that rank (collectives.py)
CAPTURE_COLLECTIVES = "collectives.pt"
# a kernel traced for kernel_repro.py (kernel_trace.py writes, kernel_repro.py reads)
KERNEL_TENSORS = "kernel.pt"
KERNEL_DOC = "kernel.json"
OBSERVED = "observed.json"
# the files a program-level run opened (child/opened.py): the baseline's, in the program
# folder; each candidate's (its run and its control run), in the candidate's folder
OPENED = "opened.jsonl"
# the failing graphs a bisect's or report's baseline saved as it ran (HookConfig.capture):
# CAPTURES/graph-N/ holds CAPTURE_GRAPH, CAPTURE_INPUTS, CAPTURE_META
CAPTURES = "captures"
MAX_CAPTURES = 3  # graphs saved per run (report's --max-bugs default)  # what a program run observed (program.py)

# report
REPORT = "report.md"
REPORT_FULL = "report-full.md"  # the whole report when report.md had to be cut
BISECTED = "bisected.json"  # a report's first bisect, written before its minify (triage)

# replay
DRIVER_STATUS = "driver-status.json"

# triage (its --out is the triage folder itself: a rerun resumes there)
TRIAGE_MD = "triage.md"
TRIAGE_HTML = "triage.html"
TRIAGE_JSON = "triage.json"
TRIAGE_CACHE = "cache"
TRIAGE_REPROS = "repros"
TRIAGE_SCRIPTS = "scripts"


def write_file(path: str | os.PathLike[str], data: str | bytes, *, mode: int | None = None) -> Path:
    """Write one artifact the one way every writer does (as coverage.py's reporters):
    whole or not at all -- into a temporary file beside it, then renamed over it; if
    anything fails the temporary file is deleted and ``path`` is untouched (never a
    half-written file).  ``mode``: its permission bits (0o755 for scripts)."""
    import os
    import threading
    from pathlib import Path

    path = Path(path)
    # one temporary name per process and thread (the umask's permissions, as any file)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path

"""Run SCRIPT as __main__ after appending a line to LOG: counts the runs a tool makes.

python benchmarks/count_runs.py LOG SCRIPT [ARGS...]
"""

import runpy
import sys

log, script = sys.argv[1], sys.argv[2]
with open(log, "a") as f:
    f.write("run\n")
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")

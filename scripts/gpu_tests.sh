#!/usr/bin/env bash
# Run the GPU test subset (tests marked `gpu`) on a machine with CUDA, in one go, and
# write a results table (markdown) with the date, GPU, torch and Triton versions.
#
#   bash scripts/gpu_tests.sh [RESULTS_DIR] [pytest args...]
#
# RESULTS_DIR defaults to $OUT (the device machine's output folder) or gpu-results/.
# tcompile is installed editable with --no-deps (the machine has torch); wheels of
# other dependencies can be put in .whl/ beforehand (no network needed).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
results=${1:-${OUT:-gpu-results}}
shift || true
mkdir -p "$results"
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-deps --no-build-isolation .whl/*.whl
fi
"$PY" -m pip install -q --no-deps --no-build-isolation -e . >/dev/null
start=$(date +%s)
parallel=()
if "$PY" -c "import xdist" 2>/dev/null; then parallel=(-n "${GPU_TEST_JOBS:-4}"); fi
"$PY" -m pytest -m gpu -v -p no:cacheprovider "${parallel[@]}" \
  --junitxml "$results/gpu-junit.xml" tests "$@" \
  2>&1 | tee "$results/gpu-pytest.log"
status=${PIPESTATUS[0]}
"$PY" - "$results" "$start" <<'PYEOF'
import datetime, sys, time, xml.etree.ElementTree as ET
import torch
results, start = sys.argv[1], int(sys.argv[2])
try:
    import triton
    triton_version = triton.__version__
except ImportError:
    triton_version = "-"
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
rows = []
for case in ET.parse(f"{results}/gpu-junit.xml").getroot().iter("testcase"):
    outcome = "passed"
    for child in case:
        if child.tag in ("failure", "error"):
            outcome = "FAILED"
        elif child.tag == "skipped":
            outcome = "skipped"
    rows.append((case.get("name"), outcome, float(case.get("time", 0))))
lines = [
    f"GPU tests, {datetime.date.today().isoformat()}: {gpu}, torch {torch.__version__}, "
    f"Triton {triton_version}, Python {sys.version.split()[0]}; "
    f"{sum(r[1] == 'passed' for r in rows)}/{len(rows)} passed in {time.time() - start:.0f} s",
    "",
    "| test | result | seconds |",
    "|---|---|---:|",
] + [f"| `{n}` | {o} | {t:.1f} |" for n, o, t in rows]
text = "\n".join(lines) + "\n"
open(f"{results}/gpu-results.md", "w").write(text)
print(text)
PYEOF
exit "$status"

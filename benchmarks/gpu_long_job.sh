#!/usr/bin/env bash
# Issue 61, item 4 on a GPU: `tcompile report` on a GPU training job of about two
# minutes that fails at its end, as a ratio to one plain run of it, in one sitting:
#   (b) the program's own check fails (report without --accuracy), then
#   (a) a compiled graph's --accuracy check fails (the job only logs its metric),
# fixtures/long_job/gpu_train_eval.py (#181568, matmul + bf16 cast + fp32 add).
# The plain run trains for SECONDS and says how many steps that was; each report trains
# the same steps.  Each run gets its own empty inductor cache (no warm compile).
#   OUT=/tmp/out bash benchmarks/gpu_long_job.sh [SECONDS] [LEFT]
# LEFT: seconds this call may still spend; (a) is skipped when too few are left for it.
# DEVICE=cpu runs it on the CPU (the bug shows there too on torch 2.13).  WHICH="a": only
# that report (after the plain run).
# Writes $OUT/gpu_long_job.tgz: each run's stdout/stderr, each report's --json, times.txt.
# On a fresh device machine (no network), tcompile's own dependencies travel as wheels:
#   here:  pip download -d .wheels --no-deps click rich markdown-it-py mdurl pygments dill
#   there: python -m pip install --no-index --no-deps .wheels/*.whl
#          python -m pip install --no-deps --no-build-isolation -e .
# (`python -m`: the interpreter that has torch; a bare `pip` there installed for another).
set -u
secs=${1:-120}
left=${2:-100000}
here=$(cd "$(dirname "$0")/.." && pwd)
job="$here/fixtures/long_job/gpu_train_eval.py"
w=$(mktemp -d)
start=$(date +%s.%N)
now() { python -c "import time; print(f'{time.time():.1f}')"; }
took() { python -c "print(f'{$2 - $1:.1f}')"; }
t0=$(now)
TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) python "$job" --seconds "$secs" --check own --device "${DEVICE:-cuda}" > "$w/plain.out" 2> "$w/plain.err"
rc=$?
t1=$(now)
plain=$(took "$t0" "$t1")
steps=$(grep -o 'trained [0-9]*' "$w/plain.out" | grep -o '[0-9]*')
echo "plain rc=$rc seconds=$plain steps=$steps" | tee "$w/times.txt"
for which in ${WHICH:-b a}; do
  spent=$(took "$start" "$(now)")
  if [ "$which" = a ] && python -c "import sys; sys.exit(0 if $spent + 1.6 * $plain > $left else 1)"; then
    echo "report (a) skipped: ${spent} s spent of ${left}" | tee -a "$w/times.txt"
    continue
  fi
  if [ "$which" = b ]; then flags=(); check=own; else flags=(--accuracy); check=none; fi
  t0=$(now)
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) python -m tcompile report --json "${flags[@]}" --out "$w/report-$which" \
    "$job" --steps "$steps" --check "$check" --device "${DEVICE:-cuda}" > "$w/report-$which.json" 2> "$w/report-$which.err"
  rc=$?
  t1=$(now)
  s=$(took "$t0" "$t1")
  echo "report ($which) rc=$rc seconds=$s ratio=$(python -c "print(f'{$s / $plain:.2f}')")" | tee -a "$w/times.txt"
done
# the reports' folders (report.md, repro.py), less saved tensors
(cd "$w" && tar czf "$OUT/gpu_long_job.tgz" --exclude='*.pt' ./*.out ./*.err ./*.json times.txt report-*)

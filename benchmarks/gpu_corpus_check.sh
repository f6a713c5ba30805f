#!/usr/bin/env bash
# Run every candidate script twice on the GPU machine:
#   1) normally (torch.compile active)            -> compiled_rc
#   2) with TORCHDYNAMO_DISABLE=1 (pure eager)      -> disabled_rc
# A good candidate (bug still present) shows compiled_rc != 0 and disabled_rc == 0.
# Prints one line per script: FILE compiled_rc disabled_rc seconds   (seconds = wall time of the compiled run)
# Full stdout/stderr of each run is kept in ./logs/ (override with LOGDIR=...).
# Usage: bash check.sh [script.py ...]      (default: all c*_*.py in this directory)
set -u
cd "$(dirname "$0")/../fixtures/real_gpu"
LOGDIR=${LOGDIR:-logs}
mkdir -p "$LOGDIR"
PY=${PYTHON:-python3}

if [ "$#" -gt 0 ]; then
  scripts=("$@")
else
  scripts=(c[0-9]_*.py)
fi

printf '%s %s %s %s\n' FILE compiled_rc disabled_rc seconds
for f in "${scripts[@]}"; do
  base=$(basename "$f" .py)
  cache1=$(mktemp -d "${TMPDIR:-/tmp}/ind_cache_${base}_XXXX")
  cache2=$(mktemp -d "${TMPDIR:-/tmp}/ind_cache_${base}_XXXX")

  t0=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR="$cache1" timeout 100 "$PY" "$f" >"$LOGDIR/$base.compiled.log" 2>&1
  rc1=$?
  t1=$(date +%s.%N)

  TORCHDYNAMO_DISABLE=1 TORCHINDUCTOR_CACHE_DIR="$cache2" timeout 100 "$PY" "$f" >"$LOGDIR/$base.disabled.log" 2>&1
  rc2=$?

  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
  printf '%s %s %s %s\n' "$f" "$rc1" "$rc2" "$secs"
  rm -rf "$cache1" "$cache2"
done

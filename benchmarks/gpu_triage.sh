#!/usr/bin/env bash
# Issue 52 on a CUDA machine: tcompile triage of fixtures/real_gpu (reporters' scripts
# of real Triton / CUDA-graph bugs), once per cluster; resumable (the --out cache), so a
# second call finishes what the first did not.  Packs triage.json, triage.md, the issue
# texts and the log as $OUT/r.tgz.  Run from the repository root:
#   bash benchmarks/gpu_triage.sh [SECONDS] [extra triage flags...]
cd "$(dirname "$0")/.."
limit=${1:-540}; shift || true
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || exit 8
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
s=$(date +%s)
timeout -s INT "$limit" tcompile triage --json --jobs $((gpus * 4)) --per-gpu 4 --timeout 420 \
  --out /tmp/gt "$@" fixtures/real_gpu > "$OUT/r/triage.stdout.json" 2> "$OUT/r/triage.log"
echo "exit $? wall $(( $(date +%s) - s )) gpus $gpus" >> "$OUT/r/triage.log"
cp /tmp/gt/triage.json /tmp/gt/triage.md "$OUT/r/" 2>/dev/null
cp -r /tmp/gt/issues "$OUT/r/" 2>/dev/null
nvidia-smi -L >> "$OUT/r/triage.log" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/r/triage.log" 2>&1
cd "$OUT" && tar czf r.tgz r && rm -rf r

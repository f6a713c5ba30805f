#!/usr/bin/env bash
# Issue 52 on a CUDA machine: the tracker's GPU duplicate groups (fixtures/dupes_gpu).
# First what each script does there (exit compiled, exit with TORCHDYNAMO_DISABLE=1),
# then benchmarks/triage_throughput.py on them: HALF is once (once per cluster), each
# (every script reported) or both, from an empty --out each.  Packs $OUT/r.tgz.
#   bash benchmarks/gpu_dupes.sh [HALF] [PER_GPU]
cd "$(dirname "$0")/.."
half=${1:-once}; per_gpu=${2:-4}
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || exit 8
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
if [ "$half" != each ]; then
  for f in fixtures/dupes_gpu/*.py; do
    (timeout 150 python3 "$f" > /dev/null 2>&1; a=$?
     TORCHDYNAMO_DISABLE=1 timeout 150 python3 "$f" > /dev/null 2>&1; b=$?
     echo "$(basename "$f") compiled=$a disabled=$b") &
  done > "$OUT/r/exits.txt"
  wait
fi
s=$(date +%s)
python3 benchmarks/triage_throughput.py --corpus dupes_gpu --half "$half" \
  --jobs $((gpus * per_gpu)) --per-gpu "$per_gpu" --timeout 420 --out /tmp/tt \
  --results "$OUT/r/throughput-$half.json" > "$OUT/r/throughput-$half.md" 2> "$OUT/r/log-$half"
echo "exit $? wall $(( $(date +%s) - s )) gpus $gpus" >> "$OUT/r/log-$half"
for m in once each; do
  [ -d /tmp/tt/$m ] && mkdir -p "$OUT/r/$m" && cp /tmp/tt/$m/triage.json /tmp/tt/$m/triage.md /tmp/tt/$m.json "$OUT/r/$m/" 2>/dev/null
done
nvidia-smi -L >> "$OUT/r/log-$half" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> "$OUT/r/log-$half" 2>&1
cd "$OUT" && tar czf r.tgz r && rm -rf r

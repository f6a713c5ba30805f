#!/usr/bin/env bash
# Issue 51 on a CUDA machine: bisect from the capture against the program bisect
# (--whole-program) on the Triton fixtures, and the GPU tests that bisect, side by side;
# everything packed as $OUT/r.tgz.  Run from the repository root:
#   bash benchmarks/gpu_capture_bisect.sh
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || exit 8
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/r"
par=""; python3 -c "import xdist" 2>/dev/null && par="-n 4"
( s=$(date +%s); timeout 560 python3 -m pytest -q -p no:cacheprovider $par tests/gpu/test_gpu.py \
    -k "bisect or cudagraphs" > "$OUT/r/gpu_test.txt" 2>&1
  echo "wall $(( $(date +%s) - s ))" >> "$OUT/r/gpu_test.txt" ) &
b() {  # name, fixture, flags...
  local n=$1 f=$2; shift 2
  ( for mode in capture whole; do
      extra=""; [ "$mode" = whole ] && extra="--whole-program"
      TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout 270 tcompile bisect --json --jobs 1 $extra \
        --out "/tmp/b-$n-$mode" "$@" "fixtures/$f" > "$OUT/r/$n.$mode.json" 2> "$OUT/r/$n.$mode.err"
    done ) &
}
b acc gpu_triton_relu_accuracy.py --accuracy
b compile gpu_triton_relu_compile_error.py
b runtime gpu_triton_relu_runtime_error.py
b bf16 gpu_bf16_relu_accuracy.py --accuracy
wait
for n in acc compile runtime bf16; do for mode in capture whole; do python3 -c "
import json; d=json.load(open('$OUT/r/$n.$mode.json'))
print('$n $mode', d['exit_code'], d['stage'], d['graph'], d['subsystem'], d['detail'], 'runs', d['runs'], 'compiles', d.get('graph_judgements'), round(d['seconds'], 1), d.get('fallback'))" 2>&1 | tail -1; done; done
tail -4 "$OUT/r/gpu_test.txt"
cd "$OUT" && tar czf r.tgz r && rm -rf r

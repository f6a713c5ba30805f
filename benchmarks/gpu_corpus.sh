#!/usr/bin/env bash
# The GPU corpus (fixtures/real_gpu/, issue 24) on a CUDA machine: tcompile MODE (run,
# bisect or minify, with --accuracy) on each fixture, N at a time; one JSON per fixture
# in $OUT/MODE/, packed as $OUT/MODE.tgz.  What ran on 2026-11-25 (one H100, torch 2.11):
#   bash benchmarks/gpu_corpus.sh run 7 FIXTURE.py ...      (then bisect 7 ..., minify 9 ...)
# The table is benchmarks/results/gpu-corpus-2026-11-25-h100.md.
mode=$1; shift; n=$1; shift
mkdir -p "$OUT/$mode"
cd "$(dirname "$0")/../fixtures/real_gpu"
printf '%s\n' "$@" | xargs -P "$n" -I{} bash -c '
  f={}; b=$(basename $f .py); t0=$(date +%s)
  case '"$mode"' in
    run) args="run --accuracy --json";;
    bisect) args="bisect --accuracy --json";;
    minify) args="minify --accuracy --json --jobs 2";;
  esac
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) timeout ${PER:-560} tcompile $args --out /tmp/tc-'"$mode"'-$b $f > $OUT/'"$mode"'/$b.json 2> $OUT/'"$mode"'/$b.err
  echo "$b rc=$? $(( $(date +%s) - t0 ))s"'
cd "$OUT" && tar czf "$mode.tgz" "$mode" && rm -rf "$mode"

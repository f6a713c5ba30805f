#!/usr/bin/env bash
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || { echo install failed; exit 8; }
export PYTHONUNBUFFERED=1
s=$(date +%s)
bash benchmarks/gpu_corpus.sh bisect 14 $(cd fixtures/real_gpu && ls *.py) 2>&1 | tail -20
echo "wall $(( $(date +%s) - s ))"

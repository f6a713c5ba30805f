#!/usr/bin/env bash
# Quick start 2: set up if needed (with the transformers extra for the real-model
# tests), then the whole test suite, two tests at a time (pytest-xdist; the suite is
# dominated by real compiles in child processes).  --dist worksteal: a worker that ran
# out of tests takes some of those queued for the other, so the suite does not end on
# one worker with a queue behind a long test.  Extra arguments go to pytest, e.g.
# -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
TCOMPILE_EXTRAS=test,models bash scripts/setup.sh
exec python3 -m pytest -n 2 --dist worksteal --durations=40 "$@"

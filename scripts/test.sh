#!/usr/bin/env bash
# Quick start 2: set up if needed, then the whole test suite, two tests at a time (pytest-xdist; the suite is
# dominated by real compiles in child processes).  --dist worksteal: a worker that ran
# out of tests takes some of those queued for the other, so the suite does not end on
# one worker with a queue behind a long test.  Extra arguments go to pytest, e.g.
# -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
# the real-model tests (transformers) run only with TCOMPILE_TEST_EXTENDED=1: only then
# is the models extra installed (the fast subset and the suite install nothing else)
if [ "${TCOMPILE_TEST_EXTENDED:-}" = "1" ]; then extras=test,models; else extras=test; fi
TCOMPILE_EXTRAS=$extras bash scripts/setup.sh
exec python3 -m pytest -n 2 --dist worksteal --durations=40 "$@"

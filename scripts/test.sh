#!/usr/bin/env bash
# Quick start 2: set up if needed (with the transformers extra for the real-model
# tests), then the whole test suite, two tests at a time (pytest-xdist; the suite is
# dominated by real compiles in child processes).  Extra arguments go to pytest,
# e.g. -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
TCOMPILE_EXTRAS=test,models bash scripts/setup.sh
exec python3 -m pytest -n 2 --durations=40 "$@"

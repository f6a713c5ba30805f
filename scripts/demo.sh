#!/usr/bin/env bash
# Quick start 1: set up if needed, then a real tcompile job on a bundled fixture: a
# program with three compiled graphs and an inductor C++ codegen bug in one of them.
set -euo pipefail
cd "$(dirname "$0")/.."
TCOMPILE_EXTRAS=test bash scripts/setup.sh
exec tcompile run --accuracy fixtures/multi_graph.py

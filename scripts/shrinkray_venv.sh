#!/usr/bin/env bash
# A virtual environment with shrinkray (the general-purpose test-case reducer) for
# benchmarks/program_vs_shrinkray.py.  shrinkray needs Python >= 3.12, tcompile's own
# environment may be older, so it lives apart: ${SHRINKRAY_VENV:-~/.cache/tcompile-shrinkray}.
# Idempotent: does nothing when $VENV/bin/shrinkray is already there.  Prints the path
# of the shrinkray executable (and nothing else on stdout).
# The first install is slow: shrinkray depends on llama-cpp-python (for its LLM passes,
# which the benchmark turns off), built from source here -- about 15 minutes on 2 cores.
#
# The interpreter: $SHRINKRAY_PYTHON, else /root/.pyenv/versions/3.12.1/bin/python, else
# python3.12 (or python3.13) on PATH.
set -euo pipefail
VENV=${SHRINKRAY_VENV:-$HOME/.cache/tcompile-shrinkray}
VERSION=26.9.13.0

say() { echo "shrinkray_venv: $*" >&2; }

if [ ! -x "$VENV/bin/shrinkray" ]; then
  PY=${SHRINKRAY_PYTHON:-}
  if [ -z "$PY" ]; then
    for cand in /root/.pyenv/versions/3.12.1/bin/python python3.12 python3.13; do
      if command -v "$cand" >/dev/null 2>&1 \
        && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        PY=$(command -v "$cand")
        break
      fi
    done
  fi
  if [ -z "$PY" ]; then
    say "no Python >= 3.12 found (shrinkray needs one); set SHRINKRAY_PYTHON"
    exit 1
  fi
  say "creating $VENV with $PY"
  "$PY" -m venv "$VENV"
  say "installing shrinkray==$VERSION"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "shrinkray==$VERSION" >&2
fi
echo "$VENV/bin/shrinkray"

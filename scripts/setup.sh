#!/usr/bin/env bash
# Set-up shared by the quick-start commands: idempotent, quiet when nothing is missing.
#  - torch: if it is not importable, install torch==2.13.0 -- but only if pip resolves
#    it to a CPU build (no nvidia-* packages); a multi-GB CUDA build is never pulled by
#    accident: we stop and say how to get the CPU build instead.
#  - tcompile itself (editable) with the extras named in $TCOMPILE_EXTRAS.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras=${TCOMPILE_EXTRAS:-test}

say() { echo "setup: $*" >&2; }

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  say "torch is not installed; checking what pip would install for torch==2.13.0"
  report=$("$PY" -m pip install --dry-run --quiet --report - torch==2.13.0 2>/dev/null || true)
  if [ -z "$report" ]; then
    echo "setup: pip cannot resolve torch==2.13.0 here" >&2
    exit 1
  fi
  if grep -q '"name": "nvidia-' <<<"$report"; then
    echo "setup: pip would install a CUDA build of torch (several GB); refusing." >&2
    echo "setup: install the CPU build first, e.g." >&2
    echo "  $PY -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" >&2
    exit 1
  fi
  say "installing torch==2.13.0 (CPU build; a minute or two)"
  "$PY" -m pip install --quiet torch==2.13.0
  say "torch $("$PY" -c 'import torch; print(torch.__version__)') installed"
fi

if ! "$PY" -c "import tcompile.cli.main, click, rich, dill" >/dev/null 2>&1 \
   || [ "$("$PY" -c 'import tcompile, os; print(os.path.realpath(tcompile.__file__))' 2>/dev/null)" != "$(realpath pkg/__init__.py)" ] \
   || [ -n "${TCOMPILE_FORCE_INSTALL:-}" ]; then
  say "installing tcompile (editable) with extras: ${extras}"
  "$PY" -m pip install --quiet -e ".[${extras}]"
else
  # extras may be missing even when tcompile is installed
  case ",$extras," in *,test,*) { "$PY" -c "import pytest, hypothesis, xdist, yaml" 2>/dev/null && command -v tlparse >/dev/null; } || "$PY" -m pip install --quiet -e ".[${extras}]";; esac
  case ",$extras," in *,models,*) "$PY" -c "import transformers" 2>/dev/null || "$PY" -m pip install --quiet -e ".[${extras}]";; esac
fi

#!/usr/bin/env bash
# Run the suite against another torch, in a virtual environment of its own (not CI):
#   bash scripts/test_torch.sh 2.14.1 [pytest args...]     e.g. -m "not slow"
# torch==2.14.1 installs from local disk here (a CUDA build that runs on the CPU, ~5.5 GB).
# The result goes to docs/layout.md "Versions" by hand, with the date.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/test_torch.sh TORCH_VERSION [pytest args...]}
shift
venv=${TCOMPILE_TORCH_VENV:-/tmp/tcompile-torch-$version}
if [ ! -x "$venv/bin/python" ]; then
  echo "test_torch: making $venv with torch==$version" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet "torch==$version"
fi
"$venv/bin/python" -m pip install --quiet -e ".[test]"
echo "test_torch: $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)')" >&2
PATH="$venv/bin:$PATH" exec "$venv/bin/python" -m pytest -n 2 "$@"

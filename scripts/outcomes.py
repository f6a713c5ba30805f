"""Record how every fixture ends under plain ``python`` (fixtures/OUTCOMES.json), for
tests/e2e/test_differential.py: its exit status, the exception line its traceback ends
with, the last line it printed -- with the fixture's fingerprint and the torch it ran
on.  The test uses an entry only where both still match; it runs any other plainly.

    python scripts/outcomes.py [--only SUBSTRING]      # minutes: every fixture, plainly
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _folder in ("tests", "tests/e2e", "tests/unit"):
    sys.path.insert(0, str(ROOT / _folder))


def main() -> int:
    import torch
    from test_differential import OUTCOMES, _fixtures, _gpu, fingerprint, plain, user_bugs

    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    try:
        table = json.loads(OUTCOMES.read_text())
    except (OSError, ValueError):
        table = {}
    if table.get("torch") != torch.__version__:
        table = {"torch": torch.__version__, "fixtures": {}}
    for rel in [*_fixtures(), *user_bugs()]:
        if args.only not in rel or (_gpu(rel) and not torch.cuda.is_available()):
            continue
        outcome = plain(rel)
        table["fixtures"][rel] = {"fingerprint": fingerprint(rel), "outcome": outcome}
        print(f"{rel}: {outcome}", flush=True)
    table["fixtures"] = dict(sorted(table["fixtures"].items()))
    OUTCOMES.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

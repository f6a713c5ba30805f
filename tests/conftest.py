import sys
from pathlib import Path

# tests/ (helpers.py) and its groups: unit/ (pure, fast: no compile, no child process),
# e2e/ (end to end: the slow tests, and the few fast checks beside them), gpu/ (CUDA);
# a test module may import another's helpers whichever group holds it
_HERE = Path(__file__).resolve().parent
for _folder in (_HERE, _HERE / "unit", _HERE / "e2e", _HERE / "gpu"):
    sys.path.insert(0, str(_folder))


# Tests marked ``extended`` repeat what others cover (more real bugs of a kind already
# classified, more capture fixtures, a second distributed bisect, real models): they
# run with TCOMPILE_TEST_EXTENDED=1 and stay out of the 30-minute suite.
def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    import os

    import pytest

    if os.environ.get("TCOMPILE_TEST_EXTENDED") == "1":
        return
    skip = pytest.mark.skip(
        reason="extended: set TCOMPILE_TEST_EXTENDED=1 (kept out of the 30-minute suite)"
    )
    for item in items:
        if "extended" in item.keywords:
            item.add_marker(skip)

"""A max-autotune failure names the choice that failed: pin it in the repro.

When autotuning verifies its choices against the ATen reference
(``select_algorithm.VERIFY``, set by torch's own tests and by programs that check their
kernels), a wrong template raises ``AssertionError: Incorrect result from choice
TritonTemplateCaller(<module path>, <description>)`` at compile time.  A repro in a fresh
process has no such verification, and autotuning there may pick another, correct
choice: the repro would not reproduce.  So the repro compiles with that one choice and
nothing else (inductor's ``test_configs.autotune_choice_desc_regex`` keeps only the
choices whose description matches; with one choice left, inductor does not autotune)
and compares it with eager: the failure it shows is the wrong values of that choice.

Pure text: no torch import here, the regex is applied by inductor in the repro.
"""

from __future__ import annotations

import re

from .signature import FailureKind, FailureSignature

# "Incorrect result from choice TritonTemplateCaller(/tmp/.../xyz.py, ALLOW_TF32=False, ...)"
_CHOICE = re.compile(r"Incorrect result from choice (\w+)\((.*)\)")
PIN_KEY = "test_configs.autotune_choice_desc_regex"


def pinned_choice(
    message: str, stage: str = "inductor"
) -> dict[str, str | dict[str, str] | FailureSignature] | None:
    """The config that pins the failing choice named in ``message`` (the failure's
    unscrubbed text: a signature has its numbers scrubbed), the choice, and the accuracy
    signature its repro shows; None when it is not an autotune verification failure."""
    m = _CHOICE.search(message)
    if m is None:
        return None
    caller, body = m.group(1), m.group(2).strip()
    # TritonTemplateCaller's str is "(module_path, description)"; others give the
    # description alone.  A module path is a file name: drop it when present.
    head, sep, rest = body.partition(", ")
    description = rest if sep and head.endswith(".py") else body
    if not description:
        return None
    return {
        "choice": f"{caller}({description})",
        "config": {PIN_KEY: "^" + re.escape(description) + "$"},
        "signature": FailureSignature(
            stage,
            FailureKind.ACCURACY.value,
            "AccuracyError",
            f"the autotune choice {caller}({description}) pinned alone gives wrong values",
            result="output",
        ),
    }

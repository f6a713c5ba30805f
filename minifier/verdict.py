"""The oracle's answer: one enum from the judge in a worker to the engine's gate.

No torch import: the contract between compiler/ (which judges) and the engine (which
decides) is this module alone.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any


class Verdict(str, enum.Enum):
    SAME_FAILURE = "same_failure"  # the failure being minified shows: keep the candidate
    PASS = "pass"  # compiles, runs and (if judged) agrees with eager
    OTHER_FAILURE = "other_failure"  # another failure: a different bug, not this one
    CRASH = "crash"  # the process judging it died (and not of this failure)
    TIMEOUT = "timeout"  # the process judging it ran past its time
    INVALID = "invalid"  # not a program: the candidate does not run eagerly


# The oracles, by what they are handed; each answers a Verdict (a pure oracle -- a
# test's, a benchmark's -- may answer a bool: True, it fails the same way).
Answer = Verdict | bool
GraphOracle = Callable[[Any, list[Any]], Answer]  # a graph and its inputs: graphs, inputs
SourceOracle = Callable[[str], Answer]  # a module's source: a frame's, a program's


def as_verdict(value: Any) -> Verdict:
    """tcompile's oracles return a Verdict; a bool (True: fails) is taken from a pure
    oracle (tests, benchmarks).  Anything else -- a verdict's bare string among them --
    is an oracle's bug."""
    if isinstance(value, Verdict):
        return value
    if isinstance(value, bool):
        return Verdict.SAME_FAILURE if value else Verdict.PASS
    raise TypeError(f"oracle returned {value!r}; expected a Verdict or a bool")

"""A script's verdict in triage: one enum, compared and written as its word (issue 60).

A ``str`` enum: the JSON, the cache and the pages keep the words (``"bug"``) they had;
comparing a member with the word, or looking it up in a dict keyed by words, works
both ways (``__hash__`` is the word's).  Pure.
"""

from __future__ import annotations

import enum


class TriageVerdict(str, enum.Enum):
    BUG = "bug"  # a compiler bug: culprit, cluster, a verified repro where one was made
    CLEAN = "clean"  # every run ended cleanly, no check found anything
    NOT_COMPILER = "not_compiler"  # the script fails the same way without torch.compile
    FLAKY = "flaky"  # failed in some runs only
    TIMEOUT = "timeout"  # a run did not finish in --timeout
    NEEDS_GPU = "needs_gpu"  # asks for CUDA on a machine without it
    ERROR = "error"  # tcompile itself failed on the script (never read as no failure)

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def failing(self) -> bool:
        """A verdict that makes triage exit 1: a bug or a flaky one."""
        return self in (TriageVerdict.BUG, TriageVerdict.FLAKY)


VERDICTS: tuple[TriageVerdict, ...] = tuple(TriageVerdict)

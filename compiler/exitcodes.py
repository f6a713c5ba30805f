"""Exit codes and the errors that map to them: one table for every command.

A failure of the user's program is not a failure of tcompile: ``NOT_COMPILER`` says
the program fails the same way without torch.compile, ``FLAKY`` that it
failed once and then passed, with torch.compile and without, ``INTERNAL`` that tcompile
itself went wrong, ``USAGE`` that the input (a script, a flag, a file) is bad.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # no compiler failure
    COMPILER_FAILURE = 1  # a compiler failure was found (or minified, or reproduced)
    USAGE = 2  # bad input: a missing script, a bad flag, a corrupt or untrusted file
    NOT_COMPILER = 3  # the program fails the same way without torch.compile
    INTERNAL = 4  # tcompile itself failed (its own stack could not be built, a bug)
    # the command failed once, then passed when run again with torch.compile and
    # without: a flaky failure, not shown to be the compiler's
    FLAKY = 5
    INTERRUPTED = 130  # Ctrl-C or SIGTERM (128 + SIGINT, as shells say it)


class UsageError(Exception):
    """Bad input from the user, said in one line (exit 2)."""


class InternalError(Exception):
    """tcompile itself cannot go on, said in one line (exit 4)."""

"""How a rank's own code ended, said at the start of the interpreter's exit.

A rank of a launched job emits one ``exit`` event (protocol.Event.EXIT): its code
returned, raised (the uncaught exception sys.excepthook saw), or called ``sys.exit``
with a status.  It is said from threading's exit callbacks -- before non-daemon threads
are joined and before atexit's handlers (torch's own, registered after start-up, run
before those registered earlier and can hang in a gloo teardown).  The parent ends a
rank that hangs after its code *returned*, never one whose code failed (runner.py,
invariant.py).  Only the rank's own process says it: the first process under the hooks
with a rank marks its children (inductor's compile workers inherit RANK)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..protocol import CONFIG_ENV, Event, HookConfig
from ..signature import first_lines

if TYPE_CHECKING:
    from .recorder import Recorder

RANK_PROCESS_ENV = "TCOMPILE_RANK_PROCESS"
raised: list[str] = []  # the uncaught exception this process dies of (excepthook)
_exit_code: list[object] = []  # what the program passed to sys.exit
_said: list[bool] = []
_recorder: list[Callable[[], Recorder | None]] = []


def note_raised(exc_type: type[BaseException], exc: BaseException) -> None:
    """The excepthook saw the exception the process dies of."""
    raised[:] = [f"{exc_type.__name__}: {first_lines(str(exc), 1, 200)}".rstrip(": ")]


def watch(recorder: Callable[[], Recorder | None]) -> None:
    """In a rank's own process: remember ``sys.exit``'s status and say how the code
    ended at exit (``recorder``: the session's, where there is one)."""
    from .recorder import DIST

    if "rank" not in DIST or os.environ.get(RANK_PROCESS_ENV):
        return
    os.environ[RANK_PROCESS_ENV] = str(os.getpid())
    _recorder[:] = [recorder]
    import atexit

    original = sys.exit

    @functools.wraps(original)
    def exit(status: str | int | None = None) -> Any:
        _exit_code[:] = [status]
        return original(status)

    sys.exit = exit
    register = getattr(__import__("threading"), "_register_atexit", None)
    try:
        register(say) if register else atexit.register(say)
    except Exception:
        atexit.register(say)


def say() -> None:
    if _said:
        return
    _said.append(True)
    try:
        status = _exit_code[0] if _exit_code else None
        code = 0 if status is None else status if isinstance(status, int) else 1
        rec = _recorder[0]() if _recorder else None
        if rec is None:
            from .recorder import Recorder

            rec = Recorder(HookConfig.from_env(os.environ[CONFIG_ENV]).dir)
        rec.emit(Event.EXIT, code=1 if raised else code, raised=raised[0] if raised else None)
    except Exception:
        pass

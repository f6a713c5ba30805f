"""What the program reads on stdin: the same in every run of it (captured once)."""

from __future__ import annotations

import os
import subprocess
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    # a run of the program: with text pipes (runner.py) or binary ones (pool.py)
    Proc = subprocess.Popen[str] | subprocess.Popen[bytes]


class Stdin:
    """What the program reads on stdin, the same in every run of it (captured once).

    A terminal is passed through to every run (the user types again).  Anything else
    (a pipe, a file) is *teed* in the first run: the bytes delivered to the program
    are kept, and every later run (the run without torch.compile, bisect's probes,
    minify's workers) gets exactly those bytes, then end-of-file.  stdin is read only
    while the first run runs, by a background thread (a stdin that never ends does
    not block tcompile)."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self._lock = threading.Lock()
        self._delivered = bytearray()
        self._frozen: bytes | None = None
        self.ended = False  # the first run's stdin reached end-of-file
        self._tee_running = False

    def _mode(self) -> str:
        try:
            os.fstat(self.fd)
        except OSError:
            return "none"
        return "tty" if os.isatty(self.fd) else "data"

    def for_run(self) -> tuple[int | None, Callable[[Proc], None]]:
        """(stdin for Popen, a function that starts feeding it once the process runs)."""
        mode = self._mode()
        if mode == "none":
            return subprocess.DEVNULL, lambda proc: None
        if mode == "tty":
            return None, lambda proc: None
        with self._lock:
            first = self._frozen is None and not self._tee_running
            if first:
                self._tee_running = True
        if first:
            return subprocess.PIPE, self._tee
        data = self.snapshot()
        return subprocess.PIPE, lambda proc: _feed(proc, data)

    def snapshot(self) -> bytes:
        with self._lock:
            if self._frozen is None:
                self._frozen = bytes(self._delivered)
            return self._frozen

    def ran(self) -> None:
        """A run ended: after the first, what it was given is what every run gets."""
        if self._tee_running:
            self.snapshot()

    def _tee(self, proc: Proc) -> None:
        def run() -> None:
            sink = _binary(proc.stdin)
            while True:
                try:
                    chunk = os.read(self.fd, 1 << 16)
                except OSError:
                    chunk = b""
                try:
                    if chunk:
                        sink.write(chunk)
                        sink.flush()
                    else:
                        sink.close()
                except (OSError, ValueError):
                    return  # the program is gone or closed its stdin
                with self._lock:
                    if self._frozen is not None:
                        return  # the first run is over: what is read now is no one's
                    if not chunk:
                        self.ended = True
                        return
                    self._delivered += chunk

        threading.Thread(target=run, daemon=True).start()


def _binary(stream: Any) -> Any:
    return stream.buffer if hasattr(stream, "buffer") else stream


def _feed(proc: Proc, data: bytes) -> None:
    def run() -> None:
        try:
            sink = _binary(proc.stdin)
            sink.write(data)
            sink.close()
        except (OSError, ValueError):
            pass

    threading.Thread(target=run, daemon=True).start()


STDIN = Stdin()

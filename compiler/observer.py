"""Progress reporting: the library calls an observer; only the CLI renders it."""

from __future__ import annotations

from typing import Any, Protocol


class Observer(Protocol):
    def event(self, event: dict[str, Any]) -> None:
        """A child event (graph compiled, failure, note) as soon as it is read."""

    def status(self, text: str) -> None:
        """A one-line status: what tcompile is doing now."""


class NullObserver:
    def event(self, event: dict[str, Any]) -> None:
        pass

    def status(self, text: str) -> None:
        pass

"""OS signals (here "interrupts", to keep "signal" for blinker's), turned into a queue the
main loop reads, so that handlers do nothing but record what arrived."""

from __future__ import annotations

import collections
import signal
import threading
import typing as t

GRACEFUL = (signal.SIGTERM, signal.SIGINT)
IMMEDIATE = (signal.SIGQUIT,)


class Interrupts:
    """The interrupts a process received and hasn't handled yet."""

    def __init__(self, signums: t.Iterable[int] = (*GRACEFUL, *IMMEDIATE)) -> None:
        self.signums = tuple(signums)
        self._pending: collections.deque[int] = collections.deque()
        self._arrived = threading.Event()
        self._previous: dict[int, t.Any] = {}

    def install(self) -> None:
        """Start recording ``signums``; only the main thread may do this."""
        for signum in self.signums:
            self._previous[signum] = signal.signal(signum, self._record)

    def restore(self) -> None:
        """Put back the handlers :meth:`install` replaced."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def wait(self, timeout: float) -> list[int]:
        """Wait up to ``timeout`` seconds for an interrupt; return those that arrived."""
        self._arrived.wait(timeout)
        self._arrived.clear()
        arrived = []
        while self._pending:
            arrived.append(self._pending.popleft())
        return arrived

    def wake(self) -> None:
        """End a :meth:`wait` early, with nothing arrived."""
        self._arrived.set()

    def _record(self, signum: int, _frame: t.Any) -> None:
        self._pending.append(signum)
        self._arrived.set()

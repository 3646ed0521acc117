"""A wake-up that is safe to ring from a signal handler.

``threading.Event.set()`` takes a lock; a signal handler that runs while the main thread holds
that same lock (inside ``Event.wait`` or ``set``) would wait for itself forever. Writing a byte
to a pipe takes no lock, and the sleeper waits on the pipe with ``select``.
"""

from __future__ import annotations

import os
import select


class Waker:
    """A pipe one side rings and the other sleeps on."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def ring(self) -> None:
        """End the current (or the next) :meth:`sleep` at once; from any thread or handler."""
        try:
            os.write(self._write, b"!")
        except (BlockingIOError, OSError):  # full pipe: a sleep will end anyway; closed: gone
            pass

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``, or until rung; forget the rings that woke it."""
        if seconds > 0:
            select.select([self._read], [], [], seconds)
        self.clear()

    def clear(self) -> None:
        """Forget any ring that hasn't ended a sleep yet."""
        try:
            while os.read(self._read, 512):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass

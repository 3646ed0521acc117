"""A wake-up that is safe to ring from a signal handler: a pipe (unlike the notices between
processes about jobs, :mod:`~flask_solidq.processes.job_notices`).

``threading.Event.set()`` takes a lock; a signal handler that runs while the main thread holds
that same lock (inside ``Event.wait`` or ``set``) would wait for itself forever. Writing a byte
to a pipe takes no lock, and the sleeper waits on the pipe with ``select``.
"""

from __future__ import annotations

import os
import select
import time
import typing as t

#: A descriptor to wait on beside the pipe, and what to call when it is readable.
Watched = tuple[int, t.Callable[[], None]]


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

    def sleep(self, seconds: float, watched: t.Sequence[Watched] = ()) -> None:
        """Sleep up to ``seconds``, or until rung; forget the rings that woke it.

        ``watched`` descriptors (sockets that bring wake-ups from other processes) are waited
        on too: when one is readable its handler runs, and may :meth:`ring` to end the sleep.
        """
        handlers = dict(watched)
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                readable, _, _ = select.select([self._read, *handlers], [], [], remaining)
            except (OSError, ValueError):  # a watched descriptor closed under it: wake
                break
            if self._read in readable:
                break
            for fd in readable:
                handlers[fd]()
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

"""Writing log lines to a descriptor so that a worker's threads don't take turns over them.

A worker thread logs two lines per job. Written where they are logged, each line is a
``write`` call, and a call that enters the kernel releases the GIL: while the other threads
are busy, that hands the GIL over, and the writer then waits to get it back. With three
threads draining no-op jobs the lines cost about as much CPU as the rest of the job (see
docs/performance.md, "Figures behind the code"), and :class:`logging.StreamHandler`, which
writes under its lock, made it worse: a thread that lost the GIL inside the write still held the
lock, and the others slept on it.

So a :class:`LineWriter` writes lines the way the finisher stores outcomes: a thread takes a
line, the writer's own thread wakes, lingers :data:`LINGER` for the lines that follow, and
writes them all with one call (one call every couple of milliseconds, not one per line).
What this costs: a line reaches the descriptor up to a couple of milliseconds after it was
logged, and a process killed outright (SIGKILL, a crash of the interpreter) loses the lines of
its last milliseconds. Lines at WARNING and above are written before the logging call returns
(after the lines before them, in order), and every line is written when logging shuts down
(at the interpreter's exit, and before a forked process exits) and before a fork.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref

#: How long the writer's thread waits for more lines after one woke it.
LINGER = 0.002
#: How long the writer's thread waits for a line before it ends (the next line starts another).
IDLE_TIMEOUT = 1.0
#: The most lines waiting for the writer's thread: past them, the thread that logs writes them
#: itself. Should stderr stop taking lines (its reader stalled), the logging threads then wait
#: on it, as they would with :class:`logging.StreamHandler`, rather than the lines piling up in
#: memory.
MAX_PENDING = 10_000

_writers: weakref.WeakSet[LineWriter] = weakref.WeakSet()


class LineWriter:
    """Writes lines to ``descriptor`` from a thread of its own, several lines per call, in the
    order they were given."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor
        self.linger = LINGER
        self._reset()
        _writers.add(self)

    def _reset(self) -> None:
        self._pending: collections.deque[bytes] = collections.deque()
        self._wake = threading.Condition(threading.Lock())
        self._writing = threading.Lock()
        self._sleeping = False
        self._closing = False
        self._thread: threading.Thread | None = None

    def write(self, line: bytes, *, now: bool = False) -> None:
        """Write ``line``: soon, or before returning when ``now`` (or when
        :data:`MAX_PENDING` lines wait)."""
        self._pending.append(line)
        if now or len(self._pending) >= MAX_PENDING:
            self.flush()
            return
        # ``_sleeping`` is set before the writer's thread looks for lines and cleared after it
        # found some: read here, after the append, it can't miss a thread about to sleep (or
        # to end) with this line pending.
        if self._sleeping or self._thread is None:
            with self._wake:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="solidq-log-writer", daemon=True
                    )
                    self._thread.start()
                else:
                    self._wake.notify()

    def flush(self) -> None:
        """Write every pending line now, in one call."""
        with self._writing:  # taken from the deque and written in one go: order holds
            lines = []
            while self._pending:
                lines.append(self._pending.popleft())
            if lines:
                _write_all(self.descriptor, b"".join(lines))

    def close(self) -> None:
        """Write what is pending and end the writer's thread (a later line starts another)."""
        with self._wake:
            thread, self._closing = self._thread, True
            self._wake.notify()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.flush()
        self._closing = False

    def _run(self) -> None:
        """Write the lines as they come; end after :data:`IDLE_TIMEOUT` without any."""
        while True:
            with self._wake:
                self._sleeping = True
                if not self._pending and not self._closing:
                    self._wake.wait(IDLE_TIMEOUT)
                if not self._pending or self._closing:
                    self._thread = None  # before _sleeping clears: write() starts another
                    self._sleeping = False
                    return
                self._sleeping = False
                if not self._closing:  # linger, unless close() asks for the lines now
                    self._wake.wait(self.linger)
            try:
                self.flush()
            except OSError:  # stderr closed or full: the lines are lost, as a write's would be
                pass


def _write_all(descriptor: int, data: bytes) -> None:
    """Write all of ``data``: one call unless the descriptor took only part of it."""
    while data:
        written = os.write(descriptor, data)
        data = data[written:]


def _before_fork() -> None:
    """Write the pending lines and end the writers' threads before a fork: the supervisor
    forks its workers with no thread of its own running (see
    :mod:`flask_solidq.processes.forks`), and a line logged next starts a thread again,
    in the parent and in the child."""
    for writer in list(_writers):
        try:
            writer.close()
        except OSError:  # stderr is gone: the lines are lost, as a write's would be
            pass


def _after_fork_in_child() -> None:
    """A forked child starts its writers afresh: their locks as new, no thread (threads don't
    survive a fork) and no pending line."""
    for writer in list(_writers):
        writer._reset()


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)

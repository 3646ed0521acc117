"""The loop of every polling process: poll, then sleep for the delay the poll returned.

Subclasses say what one poll does and how long to wait after it (Solid Queue's Poller): a
worker claims jobs, a dispatcher makes due jobs ready, the scheduler enqueues due ticks.
"""

from __future__ import annotations

import logging
import os
import time

from flask_solidq.processes.base import Runnable
from flask_solidq.processes.thread_errors import ThreadActivity

logger = logging.getLogger("flask_solidq")

#: The longest a failing poll waits before trying again, in seconds.
MAX_ERROR_BACKOFF = 10.0


class Poller(Runnable):
    """A process whose loop is :meth:`poll`, then an interruptible sleep."""

    #: In fork mode, the pid of the supervisor; the process stops when its parent changes
    #: (the supervisor died), so no orphan keeps claiming jobs.
    parent_pid: int | None = None

    #: Whether the current poll asked the database anything; a poll that had nothing to ask
    #: (a worker whose threads and claimed-ahead jobs are all taken) sets it False, and so
    #: ends no outage: it proves nothing about a database that went away.
    reached_database = True

    def poll(self) -> float:
        """Do one unit of work; return the seconds to sleep before the next."""
        raise NotImplementedError

    def loop(self) -> None:
        failures = 0
        while not self.stopping:
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                logger.warning("SolidQ %s %s lost its supervisor; stopping", self.kind, self.name)
                break
            self._waker.clear()
            started = time.monotonic()
            self.reached_database = True
            try:
                delay = self.poll()
                failures = 0
                if self.reached_database:
                    self.outage.succeeded(started=started)
            # The poll loop: a database that's down, or a bug in one poll, is logged and the
            # process carries on after a growing pause instead of dying. An unreachable
            # database is logged once per outage (see outage.py), anything else every time;
            # the outage reports the error to SOLIDQ_ON_THREAD_ERROR the same way.
            except Exception as error:
                failures += 1
                delay = min(MAX_ERROR_BACKOFF, 0.1 * 2**failures)
                if not self.outage.failed(
                    error,
                    started=started,
                    retry_every=MAX_ERROR_BACKOFF,
                    where=ThreadActivity.POLL,
                ):
                    logger.exception(
                        "SolidQ %s %s: poll failed; next in %.1fs", self.kind, self.name, delay
                    )
            self.sleep(delay)

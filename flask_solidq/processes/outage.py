"""One warning per outage: while a process can't reach its database, it says so once, with
the cause, and once more when the database answers again, instead of a traceback per poll.

Each process (worker, dispatcher, scheduler, supervisor) has one :class:`Outage`; its poll
loop, its heartbeat and the supervisor's maintenance report to it. The first of them to fail
starts the outage and logs the warning; the first to succeed ends it, with an INFO line. An
attempt that began before the outage ended and fails after (a heartbeat stuck on a connection
that died with the outage) belongs to the old outage and starts no new one. Failures that
aren't about reaching the database (a bug, a constraint, a deadlock, a statement timeout) are
not outages: :meth:`Outage.failed` returns False and the caller logs them as before.

Every failure it is told of, but the repeats of an ongoing outage, also goes to the process's
report of thread errors (``SOLIDQ_ON_THREAD_ERROR`` and ``signals.thread_error``), so an error
tracker hears of each error the log shows, and of an outage once.
"""

from __future__ import annotations

import logging
import threading
import time
import typing as t

import sqlalchemy as sa

from flask_solidq import db

if t.TYPE_CHECKING:
    from flask_solidq.processes.base import ThreadActivity

#: Hears a thread's error and where it happened (see :meth:`Runnable.report_thread_error`).
Report = t.Callable[[BaseException, "ThreadActivity"], None]

logger = logging.getLogger("flask_solidq")

#: SQLSTATE of PostgreSQL's "canceling statement due to statement timeout" (and other
#: cancellations): the server answered, so it isn't an outage.
QUERY_CANCELED = "57014"
#: MySQL/MariaDB errors of a statement over its time limit (MariaDB's max_statement_time,
#: MySQL's max_execution_time).
MYSQL_STATEMENT_TIMEOUTS = (1969, 3024)


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` means the database couldn't be reached or the connection was lost
    (refused, timed out, reset, gone silent), rather than a statement that failed on a
    server that answered."""
    if isinstance(error, sa.exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, sa.exc.InterfaceError):
        return True
    if not isinstance(error, sa.exc.OperationalError) or db.is_deadlock(error):
        return False
    original = error.orig
    if getattr(original, "sqlstate", None) == QUERY_CANCELED:
        return False
    args = getattr(original, "args", ())
    return not (args and args[0] in MYSQL_STATEMENT_TIMEOUTS)


def describe(error: BaseException) -> str:
    """The first line of ``error``'s text: the driver's own message (the queue's engines hide
    parameters, and the statement is on later lines)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class Outage:
    """The database outage, if any, that one process is living through (thread-safe)."""

    def __init__(self, who: str, report: Report | None = None) -> None:
        #: The process, as log lines name it ("Worker worker-1a2b...").
        self.who = who
        #: Where the errors go besides the log (the process's thread-error report).
        self.report = report
        self._lock = threading.Lock()
        self._since: float | None = None
        self._ended = float("-inf")

    @property
    def ongoing(self) -> bool:
        """Whether the database is unreachable as far as this process knows."""
        return self._since is not None

    def failed(
        self,
        error: BaseException,
        *,
        started: float,
        retry_every: float,
        where: ThreadActivity | None = None,
    ) -> bool:
        """Report that an attempt begun at ``started`` (``time.monotonic()``) failed with
        ``error``, in the thread doing ``where``.

        Returns whether it was an outage, taken care of here: the first failure of an outage
        logs one warning naming the cause, later ones log nothing. Returns False for any
        other error, which the caller logs itself. Either way, unless it repeats an ongoing
        outage, the error goes to :attr:`report` (when there is one, and ``where`` is given).
        """
        if not is_unreachable(error):
            self._report(error, where)
            return False
        with self._lock:
            if self._since is not None or started < self._ended:
                return True
            self._since = time.monotonic()
        logger.warning(
            "SolidQ %s can't reach the database: %s; retrying every %gs at most",
            self.who,
            describe(error),
            round(retry_every, 1),
        )
        self._report(error, where)
        return True

    def succeeded(self) -> None:
        """Report that an attempt reached the database: an outage ends, with one INFO line."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            if self._since is None:
                return
            now = time.monotonic()
            elapsed, self._since, self._ended = now - self._since, None, now
        logger.info("SolidQ %s: database reachable again after %.1fs", self.who, elapsed)

    def _report(self, error: BaseException, where: ThreadActivity | None) -> None:
        if self.report is not None and where is not None:
            self.report(error, where)

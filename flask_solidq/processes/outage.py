"""One warning per outage: while a process can't reach its database, it says so once, with
the cause, and once more when the database answers again, instead of a traceback per poll.

Each process (worker, dispatcher, scheduler, supervisor) has one :class:`Outage`; its poll
loop, its heartbeat and the supervisor's maintenance report to it. The first of them to fail
starts the outage and logs the warning; the first to succeed ends it, with an INFO line. An
attempt that began before the outage ended and fails after (a heartbeat stuck on a connection
that died with the outage) belongs to the old outage and starts no new one; one that began
before the outage started and succeeds after (a claim whose reply beat the restart) ends none.
Failures that aren't about reaching the database (a bug, a constraint, a deadlock, a statement
timeout, a pooler refusing what only a direct connection carries) are not outages:
:meth:`Outage.failed` returns False and the caller logs them as before.

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

from flask_solidq.storage import db
from flask_solidq.storage import pooler

if t.TYPE_CHECKING:
    from flask_solidq.processes.thread_errors import ThreadActivity

#: Hears a thread's error and where it happened (see :meth:`Runnable.report_thread_error`).
Report = t.Callable[[BaseException, "ThreadActivity"], None]

logger = logging.getLogger("flask_solidq")

#: SQLSTATE of PostgreSQL's "canceling statement due to statement timeout" (and other
#: cancellations): the server answered, so it isn't an outage.
QUERY_CANCELED = "57014"
#: MySQL/MariaDB errors of a statement over its time limit (MariaDB's max_statement_time,
#: MySQL's max_execution_time).
MYSQL_STATEMENT_TIMEOUTS = (1969, 3024)


#: The packages of the drivers whose own errors (not wrapped by SQLAlchemy: raised around the
#: statements, by the fast path of :mod:`flask_solidq.storage.db` or a listener) are told apart too.
DRIVERS = ("psycopg", "psycopg2", "pymysql", "MySQLdb", "sqlite3")


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` means the database couldn't be reached or the connection was lost
    (refused, timed out, reset, gone silent), rather than a statement that failed on a
    server that answered. SQLAlchemy's errors and the drivers' own (psycopg's, PyMySQL's)
    are told apart alike. PgBouncer refusing what only a direct connection carries (startup
    options, a prepared statement: see :func:`flask_solidq.storage.pooler.is_pooler_error`) is a
    setting to fix, never an outage."""
    if pooler.is_pooler_error(error):
        return False
    if isinstance(error, sa.exc.DBAPIError):
        if error.connection_invalidated or isinstance(error, sa.exc.InterfaceError):
            return True
        original = error.orig
        return isinstance(error, sa.exc.OperationalError) and (original is None or _lost(original))
    kind = _driver_error_kind(error)
    return kind == "InterfaceError" or (kind == "OperationalError" and _lost(error))


def _lost(original: BaseException) -> bool:
    """Whether a driver's ``OperationalError`` is about the connection: not a deadlock nor
    a statement over its time limit, which a server that answered reported."""
    if db.is_deadlock_error(original):
        return False
    if getattr(original, "sqlstate", None) == QUERY_CANCELED:
        return False
    args = getattr(original, "args", ())
    return not (args and args[0] in MYSQL_STATEMENT_TIMEOUTS)


def _driver_error_kind(error: BaseException) -> str | None:
    """``"OperationalError"`` or ``"InterfaceError"`` (PEP 249's classes) for an error of
    one of :data:`DRIVERS`; None for anything else."""
    for cls in type(error).__mro__:
        if cls.__name__ in ("OperationalError", "InterfaceError"):
            if cls.__module__.split(".")[0] in DRIVERS:
                return cls.__name__
    return None


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
        self._pooler_named = False

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
            self._name_the_pooler_fix(error)
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

    def succeeded(self, *, started: float | None = None) -> None:
        """Report that an attempt begun at ``started`` (``time.monotonic()``) reached the
        database: an outage ends, with one INFO line. An attempt begun before the outage did
        proves nothing (its reply came before the database went away) and ends none."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            if self._since is None or (started is not None and started < self._since):
                return
            now = time.monotonic()
            elapsed, self._since, self._ended = now - self._since, None, now
        logger.info("SolidQ %s: database reachable again after %.1fs", self.who, elapsed)

    def _name_the_pooler_fix(self, error: BaseException) -> None:
        """PgBouncer refused what only a direct connection carries: say what to set, once
        per process, where the error's own text doesn't (the caller logs the error)."""
        if (
            self._pooler_named
            or not pooler.is_pooler_error(error)
            or pooler.POOLER_FIX in str(error)
        ):
            return
        self._pooler_named = True
        logger.warning("SolidQ %s: %s: %s", self.who, describe(error), pooler.POOLER_FIX)

    def _report(self, error: BaseException, where: ThreadActivity | None) -> None:
        if self.report is not None and where is not None:
            self.report(error, where)

"""Whether the budgets table, ``solidq_rate_limits``, exists: without it the rate limit fails
closed, and everything else carries on.

The table can be missing while the others exist: a database migrated by hand, or the table
dropped or renamed under running workers. Then (as docs/rate-limits.md tells users):

* enqueueing works, rate-limited jobs included: they are stored, and wait;
* a claim defers every rate-limited job it meets by
  :data:`TABLE_MISSING_WAIT` and claims the rest;
* each process logs one ERROR naming the fix, then a one-line reminder at most every
  :data:`REMINDER_INTERVAL` while its claims keep meeting rate-limited jobs;
* it looks for the table again at most every :data:`RECHECK_INTERVAL`, so a table migrated
  back is noticed (one INFO line) without restarting the workers.

A process asks the database (``has_table``) when a claim first meets a rate-limited job,
then trusts a table it found. One that disappears afterwards is noticed from the error of
the claim's statement on it (:func:`flask_solidq.storage.db.is_missing_table`): the claim rolls back
(PostgreSQL aborted its transaction) and runs again, deferring as above.

The answer is kept per database (an app may have several) and per process: a forked worker
starts afresh, and logs its own ERROR.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import os
import threading
import time
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq.models.tables import BUDGETS
from flask_solidq.storage import db

logger = logging.getLogger("flask_solidq")

#: How often, at most, a process that found the table missing looks for it again, in seconds:
#: when a claim meets a rate-limited job (they come back every minute while it is missing).
RECHECK_INTERVAL = 30.0

#: How often, at most, a process logs that the table is still missing, in seconds.
REMINDER_INTERVAL = 300.0

#: How long a limited job waits when the budgets table is missing, before it is looked at
#: again (the limit fails closed).
TABLE_MISSING_WAIT = dt.timedelta(minutes=1)

#: The table's name.
NAME: str = BUDGETS.name

#: What makes the table; every message about it ends with this.
FIX = "Run `flask solidq install`, then `flask db upgrade`."


@dataclasses.dataclass
class _Absence:
    """Since when (``time.monotonic()``) a process has known the table missing, when it last
    looked for it, and when it last said so."""

    since: float
    checked_at: float
    reminded_at: float


class BudgetTable:
    """What this process knows of the budgets table, per database: present, or missing
    since when."""

    def __init__(self) -> None:
        self._present: set[str] = set()
        self._absent: dict[str, _Absence] = {}
        self._lock = threading.Lock()

    def is_missing(self, connection: sa.Connection) -> bool:
        """Whether the budgets table is missing from ``connection``'s database, as far as
        this process knows; asks the database the first time, and again when
        :data:`RECHECK_INTERVAL` has passed since the table was last found missing."""
        url = _key(connection)
        if url in self._present:
            return False
        with self._lock:
            absence = self._absent.get(url)
            now = time.monotonic()
            if absence is not None and now - absence.checked_at < RECHECK_INTERVAL:
                self._remind(absence, now)
                return True
            if exists(connection):
                self._found(url, absence)
                return False
            if absence is None:
                self._lose(url)
            else:
                absence.checked_at = now
                self._remind(absence, now)
            return True

    def noticed_missing(self, connection: sa.Connection | sa.Engine, error: BaseException) -> bool:
        """Whether ``error`` says the budgets table is missing; if so, remember it (the
        first time, logging the ERROR) so that what failed can run again without the table.
        ``connection``'s transaction may be aborted: nothing is asked of it."""
        if not db.is_missing_table(error, BUDGETS.name):
            return False
        url = _key(connection)
        with self._lock:
            self._present.discard(url)
            if url not in self._absent:
                self._lose(url)
        return True

    def forget(self) -> None:
        """Forget every answer: the next claim asks the database again (tests)."""
        with self._lock:
            self._present.clear()
            self._absent.clear()

    def _start_afresh(self) -> None:
        """In a forked child: no answer, and a new lock (another thread of the parent may
        have held the old one when it forked)."""
        self._lock = threading.Lock()
        self._present = set()
        self._absent = {}

    def _lose(self, url: str) -> None:
        now = time.monotonic()
        self._absent[url] = _Absence(since=now, checked_at=now, reminded_at=now)
        logger.error(
            "SolidQ process %s can't check rate limits: the table %s is missing, so"
            " rate-limited jobs wait a minute at a time instead of running (other jobs run)."
            " %s This process looks for the table again every %gs: no restart needed.",
            os.getpid(),
            BUDGETS.name,
            FIX,
            RECHECK_INTERVAL,
            extra={"event": "rate_limits_table_missing"},
        )

    def _remind(self, absence: _Absence, now: float) -> None:
        if now - absence.reminded_at < REMINDER_INTERVAL:
            return
        absence.reminded_at = now
        logger.error(
            "SolidQ process %s: the table %s is still missing (for %.0f minutes), so"
            " rate-limited jobs keep waiting. %s",
            os.getpid(),
            BUDGETS.name,
            (now - absence.since) / 60,
            FIX,
            extra={"event": "rate_limits_table_missing"},
        )

    def _found(self, url: str, absence: _Absence | None) -> None:
        self._present.add(url)
        if absence is not None:
            del self._absent[url]
            logger.info(
                "SolidQ process %s found the table %s again: rate-limited jobs run as their"
                " limits admit.",
                os.getpid(),
                BUDGETS.name,
                extra={"event": "rate_limits_table_found"},
            )


def exists(connection: sa.Connection) -> bool:
    """Whether the budgets table exists now (one query; the dashboard and ``status`` ask
    before reading budgets, which would fail, and on PostgreSQL abort their transaction)."""
    return sa.inspect(connection).has_table(BUDGETS.name)


@contextlib.contextmanager
def required() -> t.Iterator[None]:
    """Turn the error of a statement on the missing budgets table into
    :class:`~flask_solidq.PendingMigrations` naming it (``solidq.rate_limiter``, which is
    asked about budgets and has no answer without them)."""
    try:
        yield
    except sa.exc.DBAPIError as error:
        if db.is_missing_table(error, BUDGETS.name):
            raise errors.PendingMigrations([BUDGETS.name]) from error
        raise


def _key(connection: sa.Connection | sa.Engine) -> str:
    return connection.engine.url.render_as_string()


#: This process's answers.
TABLE = BudgetTable()

os.register_at_fork(after_in_child=TABLE._start_afresh)

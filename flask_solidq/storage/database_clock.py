"""One clock decides: the database server's.

Workers, dispatchers and supervisors run on hosts whose clocks drift apart (a VM resumed, NTP
stepping, a container's clock off by seconds). A promise that compares times written by one
host with times read by another (a rate limit's next admission, a heartbeat's age, a scheduled
job's due time, a concurrency lease's expiry) holds only if every host reads the same clock,
so those reads ask the database, inside the transaction that decides:

* PostgreSQL: ``clock_timestamp()``, the time at the moment it is read (``now()`` would be the
  transaction's start, older than a lock the transaction waited for);
* MariaDB/MySQL: ``UTC_TIMESTAMP(6)``, read when its statement starts;
* SQLite: this host's clock. A SQLite database is a file on one host, and every process that
  opens it reads that host's clock.

Under :func:`flask_solidq.testing.frozen_clock`, this process reads the frozen time instead,
on every backend, without a round trip: a test then steps the server's clock too, as far as
this process's claims, dispatches and budgets are concerned.

A host's own clock still serves what only that host compares: how long it sleeps between
polls, the times in its log lines, and the delays its callers compute (``wait=``,
``wait_until=``), which mean that host's "in five minutes".
"""

from __future__ import annotations

import datetime as dt
import functools

import sqlalchemy as sa

from flask_solidq.storage import db
from flask_solidq.timing import as_utc
from flask_solidq.timing import frozen_at
from flask_solidq.timing import utcnow


def now(connection: sa.Connection) -> dt.datetime:
    """The database server's current time, aware UTC, read on ``connection`` (one round
    trip on a server database; none on SQLite, nor under a frozen clock)."""
    query = db.dialect(connection).clock
    if query is None or frozen_at() is not None:
        return utcnow()
    return as_utc(connection.scalar(query))


def column(connection: sa.Connection) -> sa.ColumnElement[dt.datetime] | None:
    """:func:`now` as a column to select beside others (read as the statement runs), to ride
    on a query that reads something else (one round trip); None where :func:`now` needs no
    round trip (SQLite, a frozen clock): read :func:`now` then."""
    if frozen_at() is not None:
        return None
    query = db.dialect(connection).clock
    return None if query is None else _column(query.text)


@functools.cache
def _column(query: str) -> sa.ColumnElement[dt.datetime]:
    return sa.literal_column(query.removeprefix("SELECT "), sa.DateTime(timezone=True))


def read_now(engine: sa.Engine) -> dt.datetime:
    """:func:`now` on the open :func:`flask_solidq.storage.db.transaction` of ``engine``, or on a
    connection of its own."""
    if db.dialect(engine).clock is None or frozen_at() is not None:
        return utcnow()
    opened = db.write(engine) if db.in_transaction(engine) else engine.connect()
    with opened as connection:
        return now(connection)

"""The queue's transactions, and the helpers every operation calls whatever the database.

How a transaction is opened for writing or reading (and joined: an explicit
:func:`transaction`, or the app's own, see :mod:`flask_solidq.storage.app_transaction`), row
locking with ``SKIP LOCKED``, and which errors are deadlocks worth retrying. What each
database does its own way (inserts that ignore duplicates, deletes by id, the minute bucket,
wake-ups) these helpers ask of its dialect (:mod:`flask_solidq.storage.dialects`), so the
operations never test the dialect. How the engines are built is
:mod:`flask_solidq.storage.engines`'.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import random
import time
import typing as t

import sqlalchemy as sa

from flask_solidq.storage import sqlite_connections
from flask_solidq.storage.dialects import dialect_of
from flask_solidq.storage.dialects import mysql
from flask_solidq.storage.dialects.base import READY_CHANNEL as READY_CHANNEL
from flask_solidq.storage.dialects.base import SCHEDULED_CHANNEL as SCHEDULED_CHANNEL
from flask_solidq.storage.dialects.base import Dialect

T = t.TypeVar("T")


#: Rows per multi-row INSERT. PostgreSQL takes at most 65,535 parameters in one statement and
#: a job row has 12 columns; SQLite's default limit is 32,766.
INSERT_BATCH_SIZE = 1000


#: The key of ``connection.info`` holding what runs after the transaction commits.
_AFTER_COMMIT = "solidq_after_commit"

_ambient: contextvars.ContextVar[dict[sa.Engine, sa.Connection] | None] = contextvars.ContextVar(
    "solidq_ambient_transactions", default=None
)


@contextlib.contextmanager
def transaction(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """One transaction on ``engine`` that every queue write inside the block joins.

    Nested blocks join the outermost one. It commits when the outermost block exits, and
    rolls back if that block raises.
    """
    current = _ambient.get() or {}
    if engine in current:
        yield current[engine]
        return
    callbacks: list[t.Callable[[], None]] = []
    with _writer(engine), engine.connect() as connection:
        with connection.begin(), joined(engine, connection, callbacks):
            yield connection
    for callback in callbacks:
        callback()


@contextlib.contextmanager
def joined(
    engine: sa.Engine, connection: sa.Connection, callbacks: list[t.Callable[[], None]]
) -> t.Iterator[sa.Connection]:
    """Inside the block, every queue write on ``engine`` runs on ``connection``, in a
    transaction someone else owns (the app's session: see
    :mod:`flask_solidq.storage.app_transaction`), and :func:`after_commit` callbacks go to
    ``callbacks``, which that owner runs when it commits. Nothing here commits."""
    current = _ambient.get() or {}
    # The dict itself, read now: after a lost connection, reading connection.info raises.
    info = connection.info
    previous = info.get(_AFTER_COMMIT)
    info[_AFTER_COMMIT] = callbacks
    token = _ambient.set({**current, engine: connection})
    try:
        yield connection
    finally:
        _ambient.reset(token)
        if previous is None:
            info.pop(_AFTER_COMMIT, None)
        else:
            info[_AFTER_COMMIT] = previous


def after_commit(engine: sa.Engine, callback: t.Callable[[], None]) -> None:
    """Run ``callback`` once the open :func:`transaction` on ``engine`` commits (never, if it
    rolls back), or now when none is open."""
    ambient = (_ambient.get() or {}).get(engine)
    if ambient is None:
        callback()
    else:
        ambient.info[_AFTER_COMMIT].append(callback)


def after_commit_on(connection: sa.Connection, callback: t.Callable[[], None]) -> None:
    """Run ``callback`` once ``connection``'s transaction commits (never, if it rolls back):
    ``connection`` is one :func:`write`, :func:`transaction` or :func:`joined` gave."""
    connection.info[_AFTER_COMMIT].append(callback)


@contextlib.contextmanager
def joining_connection(engine: sa.Engine, connection: sa.Connection) -> t.Iterator[None]:
    """Inside the block, queue writes on ``engine`` join ``connection``'s transaction (one
    :func:`write`, :func:`transaction` or :func:`joined` gave), and their :func:`after_commit`
    callbacks run after its commit."""
    with joined(engine, connection, connection.info[_AFTER_COMMIT]):
        yield


def in_transaction(engine: sa.Engine) -> bool:
    """Whether a :func:`transaction` block on ``engine`` is open in this context."""
    return engine in (_ambient.get() or {})


@contextlib.contextmanager
def write(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """A connection in a transaction that may write: joins the open :func:`transaction`, or
    begins one of its own that commits on exit (``BEGIN IMMEDIATE`` on SQLite) and then runs
    what :func:`after_commit_on` gave it."""
    ambient = (_ambient.get() or {}).get(engine)
    if ambient is not None:
        yield ambient
        return
    callbacks: list[t.Callable[[], None]] = []
    with _writer(engine), engine.begin() as connection:
        # The dict itself, read now: after a lost connection, reading connection.info raises
        # (and would hide the error that lost it).
        info = connection.info
        info[_AFTER_COMMIT] = callbacks
        try:
            yield connection
        finally:
            # info lives with the DBAPI connection, past this checkout.
            info.pop(_AFTER_COMMIT, None)
    for callback in callbacks:
        callback()


def _writer(engine: sa.Engine) -> t.ContextManager[object]:
    """SQLite's write lock, taken in this process first (see
    :func:`flask_solidq.storage.sqlite_connections.writer_lock`)."""
    return sqlite_connections.writer_lock(engine) or contextlib.nullcontext()


@contextlib.contextmanager
def read(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """A connection for reading only: on SQLite its transaction takes no write lock."""
    with engine.connect() as connection:
        connection = connection.execution_options(solidq_read_only=True)
        with connection.begin():
            yield connection


@contextlib.contextmanager
def autocommit(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """A connection outside any transaction: each statement commits on its own. For writes
    that are a single statement, it saves the round trips of ``BEGIN`` and ``COMMIT``."""
    with engine.connect() as connection:
        yield connection.execution_options(isolation_level="AUTOCOMMIT")


@contextlib.contextmanager
def read_for_counts(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """:func:`read`, for a page of counts over the executions, set up by the dialect (on
    PostgreSQL, JIT compilation off: see
    :meth:`flask_solidq.storage.dialects.postgresql.PostgreSQL.prepare_counts`)."""
    with read(engine) as connection:
        dialect_of(engine).prepare_counts(connection)
        yield connection


def insert_returning_id(
    connection: sa.Connection, statement: sa.Insert, row: t.Mapping[str, object]
) -> int:
    """Insert one row; return its new primary key (RETURNING or the driver's last row id)."""
    return int(connection.execute(statement, row).inserted_primary_key[0])  # type: ignore[index]


def supports_returning(connection: sa.Connection | sa.Engine) -> bool:
    """Whether ``INSERT ... RETURNING`` works with several rows (PostgreSQL, SQLite 3.35+,
    MariaDB 10.5+; not MySQL)."""
    return bool(connection.dialect.insert_returning)


def supports_delete_returning(connection: sa.Connection | sa.Engine) -> bool:
    """Whether ``DELETE ... RETURNING`` works (PostgreSQL, SQLite 3.35+, MariaDB 10.5+)."""
    return bool(connection.dialect.delete_returning)


def dialect(connection: sa.Connection | sa.Engine) -> Dialect:
    """The dialect of ``connection``'s database (see
    :func:`flask_solidq.storage.dialects.dialect_of`)."""
    return dialect_of(connection if isinstance(connection, sa.Engine) else connection.engine)


def counts_from_index_alone(connection: sa.Connection | sa.Engine) -> bool:
    """Whether a count over a secondary index's range reads the index alone (see
    :attr:`flask_solidq.storage.dialects.base.Dialect.counts_from_index_alone`)."""
    return dialect(connection).counts_from_index_alone


def supports_listen_notify(connection: sa.Connection | sa.Engine) -> bool:
    """Whether processes can wake each other through the database: PostgreSQL's
    ``LISTEN``/``NOTIFY``, heard through psycopg 3; behind a pooler, only with a direct URL
    to listen on (see :func:`flask_solidq.storage.pooler.listen_engine`). Where they can't, nobody
    sends ``NOTIFY`` (a lock at commit for no listener) and this machine's sockets wake its
    processes instead."""
    engine = connection if isinstance(connection, sa.Engine) else connection.engine
    return dialect_of(engine).listens(engine)


def notify(connection: sa.Connection, channel: str, payload: str = "") -> None:
    """Wake the listeners of ``channel`` (:data:`READY_CHANNEL`, :data:`SCHEDULED_CHANNEL`)
    when the caller's transaction commits, where anyone listens; nothing elsewhere."""
    if supports_listen_notify(connection):
        dialect(connection).notify(connection, channel, payload)


# Any: the columns of a Table (not a mapped class) are untyped, and SQLAlchemy 2.0 and 2.1
# spell a typed row or select differently.
def for_update(statement: sa.Select[t.Any], *, skip_locked: bool) -> sa.Select[t.Any]:
    """Lock the selected rows: ``FOR UPDATE [SKIP LOCKED]``. SQLite has no row locks, and
    needs none: its ``BEGIN IMMEDIATE`` already holds the only write lock."""
    return statement.with_for_update(skip_locked=skip_locked)


# Any: as for for_update.
def forcing_index(query: sa.Select[t.Any], table: sa.Table, index: str) -> sa.Select[t.Any]:
    """``query`` reading ``table`` through ``index`` where the database takes an index hint
    (MySQL/MariaDB: see :func:`flask_solidq.storage.dialects.mysql.forcing_index`); the hint
    renders for those dialects only, so the statement may be built once for every engine."""
    return mysql.forcing_index(query, table, index)


def delete_by_ids(connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]) -> None:
    """Delete the rows of ``table`` whose ``id`` (its primary key) is in ``ids``, the way
    the database reads by the primary key whatever its statistics say (see
    :meth:`flask_solidq.storage.dialects.mysql.MySQL.delete_by_ids`)."""
    if ids:
        dialect(connection).delete_by_ids(connection, table, ids)


def insert_ignoring_duplicates(
    connection: sa.Connection, table: sa.Table, rows: t.Sequence[t.Mapping[str, object]]
) -> int:
    """Insert ``rows``, skipping any that would break a unique index; return how many were
    inserted."""
    if not rows:
        return 0
    return dialect(connection).insert_ignoring_duplicates(connection, table, rows)


def add_to_rows(
    connection: sa.Connection,
    table: sa.Table,
    rows: t.Sequence[t.Mapping[str, object]],
    *,
    keys: t.Sequence[str],
    maxima: t.Sequence[str] = (),
) -> None:
    """Insert ``rows``, or add their values to the rows already there with the same ``keys``
    (see :meth:`flask_solidq.storage.dialects.base.Dialect.add_to_rows`)."""
    if rows:
        dialect(connection).add_to_rows(connection, table, rows, keys=keys, maxima=maxima)


def is_deadlock(error: BaseException) -> bool:
    """Whether ``error`` is a deadlock or lock timeout that a fresh transaction may not hit:
    MySQL 1213/1205, PostgreSQL 40P01/40001, SQLite "database is locked"."""
    original = getattr(error, "orig", None)
    return original is not None and is_deadlock_error(original)


def is_deadlock_error(original: BaseException) -> bool:
    """:func:`is_deadlock` for a driver's own error (psycopg's, PyMySQL's, sqlite3's)."""
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if code in ("40P01", "40001"):
        return True
    args = getattr(original, "args", ())
    if args and args[0] in (1205, 1213):
        return True
    return "database is locked" in str(original)


def is_missing_table(error: BaseException, name: str) -> bool:
    """Whether ``error`` says the table ``name`` doesn't exist: PostgreSQL 42P01, MySQL
    1146, SQLite "no such table". The table's name must be in the message, so a statement
    that failed on another missing table isn't taken for this one."""
    original = getattr(error, "orig", None)
    if original is None or name not in str(original):
        return False
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if code == "42P01":
        return True
    args = getattr(original, "args", ())
    if args and args[0] == 1146:
        return True
    return "no such table" in str(original)


#: The first pause before a deadlocked operation runs again, in seconds; it doubles with each
#: attempt, up to :data:`DEADLOCK_BACKOFF_CAP`, and each pause is drawn at random below it.
DEADLOCK_BACKOFF = 0.005
DEADLOCK_BACKOFF_CAP = 0.25


def retrying_deadlocks(operation: t.Callable[[], T], *, attempts: int = 3) -> T:
    """Run ``operation`` (which opens and commits its own transaction), again if it dies in a
    deadlock, up to ``attempts`` times in all.

    Between attempts it waits a random time below an exponentially growing bound ("full
    jitter"): the transactions that deadlocked together retry at different moments instead of
    meeting again, as they would after equal pauses.

    Inside a caller's :func:`transaction` nothing is retried: the deadlock rolled the caller's
    whole transaction back, and only the caller can run it again.
    """
    for attempt in range(1, attempts + 1):
        try:
            return operation()
        except sa.exc.DBAPIError as error:
            if attempt == attempts or not is_deadlock(error) or _ambient.get():
                raise
            time.sleep(deadlock_pause(attempt))
    raise AssertionError("unreachable")


def deadlock_pause(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th deadlock (1 for the first)."""
    bound = min(DEADLOCK_BACKOFF_CAP, DEADLOCK_BACKOFF * 2 ** (attempt - 1))
    return random.uniform(0, bound)


def batched(rows: t.Sequence[T], size: int = INSERT_BATCH_SIZE) -> t.Iterator[t.Sequence[T]]:
    """Split ``rows`` into slices of at most ``size``."""
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def minutes_between(
    connection: sa.Connection,
    start: sa.ColumnElement[dt.datetime],
    end: sa.ColumnElement[dt.datetime],
) -> sa.ColumnElement[float]:
    """SQL for the whole minutes from ``start`` to ``end``, in ``connection``'s dialect (no
    portable form counts minutes between timestamps)."""
    return dialect(connection).minutes_between(start, end)

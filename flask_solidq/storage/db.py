"""The queue's transactions and the statements every dialect writes its own way.

How a transaction is opened for writing or reading (and joined: an explicit
:func:`transaction`, or the app's own, see :mod:`flask_solidq.storage.app_transaction`), row locking
with ``SKIP LOCKED``, inserts that ignore duplicates, deletes by id, and which errors are
deadlocks worth retrying. Operations call these helpers and never test the dialect. How the
engines are built is :mod:`flask_solidq.storage.engines`'; PostgreSQL's driver-level fast path is
:mod:`flask_solidq.storage.fast_path`'s.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import random
import time
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from flask_solidq.storage import pooler
from flask_solidq.storage.dialects import mysql
from flask_solidq.storage.dialects import postgres
from flask_solidq.storage.dialects import sqlite

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


def _writer(engine: sa.Engine) -> t.ContextManager[t.Any]:
    """SQLite's write lock, taken in this process first (see :func:`sqlite.writer_lock`)."""
    return sqlite.writer_lock(engine) or contextlib.nullcontext()


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
    """:func:`read`, for a page of counts over the executions.

    On PostgreSQL the transaction turns JIT compilation off for itself: such counts probe the
    jobs' primary key once per execution row, which the planner prices high enough to
    JIT-compile, and compiling cost 20-700 ms of a page that runs in tens of milliseconds
    without it.
    """
    with read(engine) as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(postgres.JIT_OFF)
        yield connection


def insert_returning_id(
    connection: sa.Connection, statement: sa.Insert, row: dict[str, t.Any]
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


def supports_insert_in_cte(connection: sa.Connection | sa.Engine) -> bool:
    """Whether an ``INSERT ... RETURNING`` can feed another ``INSERT`` in one statement
    (PostgreSQL's data-modifying CTEs), so an enqueue takes one round trip."""
    return connection.dialect.name == "postgresql"


def counts_from_index_alone(connection: sa.Connection | sa.Engine) -> bool:
    """Whether a count over a secondary index's range reads the index alone (InnoDB's and
    SQLite's indexes always answer so; PostgreSQL's only once VACUUM has set the visibility
    map, else each entry costs a visit to the row): where it does, two counts along two
    covering indexes beat one that visits every row."""
    return connection.dialect.name != "postgresql"


def supports_listen_notify(connection: sa.Connection | sa.Engine) -> bool:
    """Whether processes can wake each other through the database: PostgreSQL's
    ``LISTEN``/``NOTIFY``, heard through psycopg 3; behind a pooler, only with a direct URL
    to listen on (see :func:`flask_solidq.storage.pooler.listen_engine`). Where they can't, nobody
    sends ``NOTIFY`` (a lock at commit for no listener) and this machine's sockets wake its
    processes instead."""
    if connection.dialect.name != "postgresql" or connection.dialect.driver != "psycopg":
        return False
    return pooler.is_heard(connection if isinstance(connection, sa.Engine) else connection.engine)


def notify(connection: sa.Connection, channel: str, payload: str = "") -> None:
    """Wake the listeners of ``channel`` when the caller's transaction commits (PostgreSQL);
    nothing elsewhere."""
    if supports_listen_notify(connection):
        connection.execute(postgres.NOTIFY, {"channel": channel, "payload": payload})


def for_update(statement: sa.Select[t.Any], *, skip_locked: bool) -> sa.Select[t.Any]:
    """Lock the selected rows: ``FOR UPDATE [SKIP LOCKED]``. SQLite has no row locks, and
    needs none: its ``BEGIN IMMEDIATE`` already holds the only write lock."""
    return statement.with_for_update(skip_locked=skip_locked)


def delete_by_ids(connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]) -> None:
    """Delete the rows of ``table`` whose ``id`` (its primary key) is in ``ids``.

    MySQL/MariaDB: as a join of the ids, passed as one JSON array through ``JSON_TABLE``, with
    the table, which reads the table by its primary key whatever its statistics say. When
    InnoDB's statistics say a table holds a row or so (a ready table drained as fast as it
    fills), MariaDB 10.11 plans ``id IN`` of 3 or more ids as a full scan, and a scanning
    ``DELETE`` locks every row it passes, those other claims hold too: two claims deleting
    rows of their own waited for each other, and 12 workers beside two bulk enqueuers
    deadlocked 51-117 times a run (``bench/deadlock_stress.py``), none once joined. (MySQL 8
    and MariaDB 10.6, the oldest supported, have ``JSON_TABLE``.)
    """
    if not ids:
        return
    if connection.dialect.name in mysql.NAMES:
        connection.execute(mysql.delete_by_ids(table.name), {"ids": json.dumps(list(ids))})
    else:
        connection.execute(_delete_by_ids(table), {"ids": list(ids)})


@functools.cache
def _delete_by_ids(table: sa.Table) -> sa.Delete:
    return table.delete().where(table.c.id.in_(sa.bindparam("ids", expanding=True)))


def insert_ignoring_duplicates(
    connection: sa.Connection, table: sa.Table, rows: list[dict[str, t.Any]]
) -> int:
    """Insert ``rows``, skipping any that would break a unique index; return how many were
    inserted."""
    if not rows:
        return 0
    statement: t.Any
    name = connection.dialect.name
    if name in ("postgresql", "sqlite"):
        dialect_insert = postgresql.insert if name == "postgresql" else sqlite_dialect.insert
        # RETURNING counts what was inserted; the driver's rowcount doesn't, for many rows.
        key = next(iter(table.primary_key.columns))
        statement = dialect_insert(table).on_conflict_do_nothing().returning(key)
        return len(connection.execute(statement, rows).all())
    statement = mysql_dialect.insert(table).prefix_with("IGNORE")
    return int(connection.execute(statement, rows[0] if len(rows) == 1 else rows).rowcount)


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


def id_array(ids: t.Iterable[int]) -> str:
    """``ids`` as a PostgreSQL array literal, for ``ANY(CAST(:ids AS bigint[]))``.

    A plain string parameter: the driver's own list adapter quotes every element through a
    regular expression, which costs more than the statement it feeds.
    """
    return "{" + ",".join(str(int(id_)) for id_ in ids) + "}"


def batched(
    rows: t.Sequence[t.Any], size: int = INSERT_BATCH_SIZE
) -> t.Iterator[t.Sequence[t.Any]]:
    """Split ``rows`` into slices of at most ``size``."""
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def minutes_between(
    connection: sa.Connection, start: sa.ColumnElement[t.Any], end: sa.ColumnElement[t.Any]
) -> sa.ColumnElement[t.Any]:
    """SQL for the whole minutes from ``start`` to ``end``, in ``connection``'s dialect
    (each dialect module has its own: no portable form counts minutes between timestamps)."""
    name = connection.dialect.name
    if name == "postgresql":
        return postgres.minutes_between(start, end)
    if name in mysql.NAMES:
        return mysql.minutes_between(start, end)
    return sqlite.minutes_between(start, end)

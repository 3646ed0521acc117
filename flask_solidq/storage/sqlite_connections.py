"""How the queue's SQLite connections are set up, and this process's lock on their writes.

* Transactions are SQLAlchemy's alone: the ``sqlite3`` module would otherwise open deferred
  transactions behind its back. A queue write opens ``BEGIN IMMEDIATE``, taking the database's
  one write lock up front instead of failing to upgrade a read lock half-way (a deadlock
  SQLite reports at once, never waits out); a read opens a plain ``BEGIN``.
* Write-ahead logging, so the workers' reads don't wait for a writer nor a writer for them.
  WAL is a property of the file, kept once set, and setting it needs the database to itself:
  on a file made by ``flask db upgrade`` or ``db.create_all()`` the first queue connection of
  a web process often opens while the app's session holds the write lock (an enqueue after a
  flush, which joins the app's transaction). SQLite then refuses the switch at once with
  "database is locked"; the connection carries on in the file's current journal mode, which
  is correct, only slower under concurrency, and tries again each time it is checked out
  until some connection has switched the file. The engine listens to its checkouts only once
  a connection has failed to switch (:func:`_retry_on_checkout`): a listener costs every
  checkout about a microsecond, a twentieth of a single enqueue's pool round.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import weakref

import sqlalchemy as sa
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.pool import PoolProxiedConnection

logger = logging.getLogger("flask_solidq")

#: A pooled connection's ``info`` key: it couldn't switch the file to WAL yet.
WAL_PENDING = "solidq_wal_pending"


_writers: weakref.WeakKeyDictionary[sa.Engine, threading.RLock] = weakref.WeakKeyDictionary()

#: Held while an engine starts listening to its checkouts (two connections may fail at once).
_listening = threading.Lock()


def configure(engine: sa.Engine) -> None:
    """Set up every connection ``engine`` opens (see the module's docstring), and the
    process's own lock on its writes (:func:`writer_lock`)."""
    _writers[engine] = threading.RLock()

    def prepare(dbapi_connection: sqlite3.Connection, record: ConnectionPoolEntry) -> None:
        if not _prepare(dbapi_connection):
            record.info[WAL_PENDING] = True
            _retry_on_checkout(engine)

    sa.event.listen(engine, "connect", prepare)
    sa.event.listen(engine, "begin", _begin)


def writer_lock(engine: sa.Engine) -> threading.RLock | None:
    """The lock this process's writes on ``engine`` take before SQLite's own (None for an
    engine that isn't SQLite's).

    Threads of one process (a worker's claims and its finisher) that wait for SQLite's own
    lock wait in its busy handler, which sleeps 1, 2, 5, 10... milliseconds between tries; a
    process-wide lock hands the turn over the moment the holder commits. Other processes
    still meet in SQLite's lock.
    """
    return _writers.get(engine)


def _prepare(dbapi_connection: sqlite3.Connection) -> bool:
    """Set up a new connection; False when it couldn't switch the file to WAL."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        in_wal = _enter_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()
    return in_wal


def _retry_on_checkout(engine: sa.Engine) -> None:
    """Have ``engine`` try WAL again at each checkout of a connection that couldn't switch
    (:func:`_retry_wal`), from now on: a connection that already failed may be followed by
    others, and a listener is added once."""
    with _listening:
        if not sa.event.contains(engine, "checkout", _retry_wal):
            sa.event.listen(engine, "checkout", _retry_wal)


def _retry_wal(
    dbapi_connection: sqlite3.Connection,
    record: ConnectionPoolEntry,
    _proxy: PoolProxiedConnection,
) -> None:
    if not record.info.get(WAL_PENDING):
        return
    cursor = dbapi_connection.cursor()
    try:
        if _enter_wal(cursor):
            del record.info[WAL_PENDING]
    finally:
        cursor.close()


def _enter_wal(cursor: sqlite3.Cursor) -> bool:
    """Switch the file to WAL; False when another connection holds a lock that forbids it
    now."""
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
    except sqlite3.OperationalError as error:
        if "locked" not in str(error):
            raise
        logger.debug("SolidQ: the SQLite file is locked; WAL mode on a later connection")
        return False
    return True


def _begin(connection: sa.Connection) -> None:
    read_only = connection.get_execution_options().get("solidq_read_only")
    connection.connection.driver_connection.execute(  # type: ignore[union-attr]
        "BEGIN" if read_only else "BEGIN IMMEDIATE"
    )

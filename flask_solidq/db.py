"""The one module that knows database dialects.

Everything dialect-specific lives here: how the queue's engine is built (SQLite's WAL, busy
timeout and ``BEGIN IMMEDIATE``; MySQL's isolation level), how a transaction is opened for
writing or reading, row locking with ``SKIP LOCKED``, inserts that ignore duplicates, and which
errors are deadlocks worth retrying. Operations call these helpers and never test the dialect.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import json
import math
import random
import re
import threading
import time
import typing as t
import weakref

import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite

from flask_solidq import postgres
from flask_solidq import sqlite as sqlite_connections

T = t.TypeVar("T")

#: Seconds a SQLite connection waits for another process's write lock before it gives up with
#: "database is locked". Queue transactions are short, so a long wait means a real problem.
SQLITE_BUSY_TIMEOUT = 30.0

#: Rows per multi-row INSERT. PostgreSQL takes at most 65,535 parameters in one statement and
#: a job row has 12 columns; SQLite's default limit is 32,766.
INSERT_BATCH_SIZE = 1000


def is_sqlite(engine: sa.Engine | sa.Connection) -> bool:
    """Whether ``engine`` talks to SQLite."""
    return engine.dialect.name == "sqlite"


def is_memory_sqlite(url: sa.URL) -> bool:
    """Whether ``url`` is an in-memory SQLite database (which only one engine can see)."""
    if not url.drivername.startswith("sqlite"):
        return False
    return url.database in (None, "", ":memory:") or url.query.get("mode") == "memory"


@dataclasses.dataclass(frozen=True)
class ConnectionSettings:
    """How every connection of the queue's engines guards against a database that is slow,
    gone or silently cut off (the ``SOLIDQ_DATABASE_*`` keys; see :mod:`flask_solidq.config`).

    Seconds; None leaves the driver's or the operating system's behaviour.
    """

    #: A new connection fails if it isn't open by then.
    connect_timeout: float | None = 10.0
    #: A connection whose network path went silent is given up after this.
    dead_connection_timeout: float | None = 30.0
    #: The server cancels a statement of the queue's that runs longer.
    statement_timeout: float | None = 30.0
    #: Test a pooled connection before it is handed out.
    pre_ping: bool = False
    #: The connection pooler between the queue and PostgreSQL (``"pgbouncer"``), or None for
    #: a direct connection: see :func:`create_queue_engine`.
    pooler: str | None = None
    #: A URL that reaches PostgreSQL directly, past the pooler, for ``LISTEN`` (see
    #: :func:`listen_engine`); None: behind a pooler, processes poll instead.
    listen_url: sa.URL | None = None


def create_queue_engine(
    url: sa.URL,
    connect_args: dict[str, t.Any] | None = None,
    connections: ConnectionSettings | None = None,
) -> sa.Engine:
    """Build the engine the queue uses for ``url``, tuned for queue work.

    The queue has an engine (and so a connection pool) of its own, apart from the app's: its
    SQLite settings would change how the app's own transactions lock, and its workers must not
    starve the app's pool.

    * SQLite: WAL (readers don't block the writer), ``synchronous=NORMAL`` (safe with WAL),
      foreign keys on (executions cascade with their job), a busy timeout, and transactions
      that will write opened with ``BEGIN IMMEDIATE``: a deferred transaction that later needs
      the write lock fails at once with "database is locked" when another process holds it,
      busy timeout or not.
    * MySQL/MariaDB: ``READ COMMITTED``, which takes no gap locks on the executions' indexes,
      the source of most of Solid Queue's MySQL deadlocks.
    * Every server database: the timeouts of ``connections`` (see :func:`connection_args`),
      and ``pool_pre_ping``.
    * PostgreSQL behind a pooler (``connections.pooler``): see :func:`_configure_pooler`.
    * Every database: ``hide_parameters``, so no SQLAlchemy error's text (and so no log line
      or traceback) ever carries a job's arguments or keys.
    """
    connections = connections or ConnectionSettings()
    args = connection_args(url, connect_args, connections)
    options: dict[str, t.Any] = {"hide_parameters": True}
    if url.drivername.startswith("sqlite"):
        args.setdefault("timeout", SQLITE_BUSY_TIMEOUT)
        args.setdefault("check_same_thread", False)
    else:
        # A file database has no connection to lose; elsewhere one round trip per checkout
        # replaces a connection the server or the network closed while it sat in the pool.
        options["pool_pre_ping"] = connections.pre_ping
    if url.get_backend_name() in ("mysql", "mariadb"):
        options["isolation_level"] = "READ COMMITTED"
        options["pool_recycle"] = 3600
    engine = sa.create_engine(url, connect_args=args, **options)
    if is_sqlite(engine):
        _configure_sqlite(engine)
    _set_mysql_statement_timeout(engine, connections.statement_timeout)
    _configure_pooler(engine, connect_args, connections, _statement_timeout_prelude(connections))
    return engine


def create_claim_engine(
    url: sa.URL,
    connect_args: dict[str, t.Any] | None = None,
    connections: ConnectionSettings | None = None,
) -> sa.Engine | None:
    """The engine a worker claims through, when it should differ from the queue's engine;
    None when it shouldn't.

    PostgreSQL: a claim commits without waiting for its WAL to reach the disk
    (``synchronous_commit=off``), which takes the disk's flush, the largest part of a claim's
    cost, off every claim. What that risks is bounded: only a crash of the database server
    itself can lose the last claims (within ``wal_writer_delay``, 200 ms by default), and a
    lost claim only puts its job back to ready, to run again, as GoodJob's session locks do on
    a server crash. A finished job's commit is durable, and the write-ahead log is flushed in
    order, so no claim can be lost once its job's outcome is stored. Everything else commits
    durably. Its connections have the same timeouts as the queue engine's. Behind a pooler,
    ``synchronous_commit`` is set in each of its transactions, as the statement timeout is
    (see :func:`_configure_pooler`).
    """
    if url.get_backend_name() != "postgresql":
        return None
    connections = connections or ConnectionSettings()
    args = connection_args(url, connect_args, connections)
    if connections.pooler is None:
        args["options"] = f"{args.get('options', '')} -c synchronous_commit=off".strip()
    engine = sa.create_engine(
        url, connect_args=args, hide_parameters=True, pool_pre_ping=connections.pre_ping
    )
    prelude = _statement_timeout_prelude(connections) + "SET LOCAL synchronous_commit = off; "
    _configure_pooler(engine, connect_args, connections, prelude)
    return engine


#: Keepalive probes sent before a silent PostgreSQL connection is given up.
KEEPALIVE_PROBES = 4


def connection_args(
    url: sa.URL, connect_args: dict[str, t.Any] | None, connections: ConnectionSettings
) -> dict[str, t.Any]:
    """The DBAPI ``connect_args`` of the queue's engines: the app's own for its bind (which
    win: each of ours is only a default), plus the timeouts of ``connections``.

    * PostgreSQL (libpq: psycopg, psycopg2): ``connect_timeout`` (whole seconds, 2 at least);
      TCP keepalives, first probe after a third of the dead-connection timeout, then
      :data:`KEEPALIVE_PROBES` probes a sixth of it apart, so a path that went silent (no FIN,
      no RST) is noticed within that timeout, not after the kernel's two hours;
      ``tcp_user_timeout`` of the same length, for data sent and never acknowledged; and
      ``statement_timeout`` in ``options``, before the app's own options so a
      ``-c statement_timeout`` of the app's wins. Behind a pooler (``connections.pooler``),
      no ``options`` (PgBouncer refuses a connection that sends them; the statement timeout
      is set in each transaction instead, see :func:`_configure_pooler`), and psycopg's
      automatic prepared statements are off (``prepare_threshold=None``): a statement
      prepared on one server connection doesn't exist on the next transaction's.
    * MySQL/MariaDB (PyMySQL): ``connect_timeout``; PyMySQL exposes no TCP keepalive, so
      ``read_timeout`` and ``write_timeout`` detect a dead path instead: a reply may
      legitimately take as long as the statement timeout, so they are that plus the
      dead-connection timeout. (The statement timeout itself is set on connect, see
      :func:`_set_mysql_statement_timeout`.)
    * SQLite: nothing here; its busy timeout is set by :func:`create_queue_engine`.
    """
    args = dict(connect_args or {})
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if backend == "postgresql" and driver in ("psycopg", "psycopg2"):
        if connections.connect_timeout is not None:
            args.setdefault("connect_timeout", max(2, math.ceil(connections.connect_timeout)))
        dead = connections.dead_connection_timeout
        if dead is not None:
            args.setdefault("keepalives", 1)
            args.setdefault("keepalives_idle", max(1, round(dead / 3)))
            args.setdefault("keepalives_interval", max(1, round(dead / 6)))
            args.setdefault("keepalives_count", KEEPALIVE_PROBES)
            args.setdefault("tcp_user_timeout", max(1, round(dead * 1000)))
        if connections.pooler is not None:
            if driver == "psycopg":
                args.setdefault("prepare_threshold", None)
        elif connections.statement_timeout is not None:
            milliseconds = max(1, round(connections.statement_timeout * 1000))
            theirs = args.get("options", url.query.get("options", ""))
            args["options"] = f"-c statement_timeout={milliseconds} {theirs}".strip()
    elif backend in ("mysql", "mariadb") and driver == "pymysql":
        if connections.connect_timeout is not None:
            args.setdefault("connect_timeout", connections.connect_timeout)
        if connections.dead_connection_timeout is not None:
            reply = connections.dead_connection_timeout + (connections.statement_timeout or 0)
            args.setdefault("read_timeout", reply)
            args.setdefault("write_timeout", reply)
    return args


def _set_mysql_statement_timeout(engine: sa.Engine, seconds: float | None) -> None:
    """MySQL/MariaDB: limit each statement of the engine's connections to ``seconds``, set
    per session on connect: MariaDB's ``max_statement_time`` (every statement), MySQL's
    ``max_execution_time`` (SELECTs only; MySQL has no other)."""
    if seconds is None or engine.dialect.name not in ("mysql", "mariadb"):
        return

    @sa.event.listens_for(engine, "connect")
    def set_statement_timeout(dbapi_connection: t.Any, _record: t.Any) -> None:
        server = str(getattr(dbapi_connection, "get_server_info", lambda: "")())
        cursor = dbapi_connection.cursor()
        if "mariadb" in server.lower():
            cursor.execute(f"SET SESSION max_statement_time={seconds:.6f}")
        else:
            cursor.execute(f"SET SESSION max_execution_time={max(1, round(seconds * 1000))}")
        cursor.close()


#: What to do when PgBouncer refuses what only a direct connection carries: startup options,
#: or a prepared statement another server connection never saw.
POOLER_FIX = (
    "behind PgBouncer set SOLIDQ_DATABASE_POOLER = 'pgbouncer' (transaction pooling needs it:"
    " no startup options, no prepared statements)"
)

#: PgBouncer's errors that :data:`POOLER_FIX` fixes: its refusal of startup options, and the
#: server's about a prepared statement the connection it landed on doesn't have, has already,
#: or has for another statement ("does not exist", "already exists", "bind message supplies
#: 11 parameters, but prepared statement ... requires 3"); the queue prepares none itself.
_POOLER_ERRORS = re.compile(r'unsupported startup parameter|prepared statement "[^"]*"')

#: Behind a pooler without a direct URL to ``LISTEN`` on, the longest a dispatcher sleeps
#: between polls, in seconds: no notification from another machine can wake it earlier.
UNHEARD_POLLING_INTERVAL = 0.2


@dataclasses.dataclass
class _Pooled:
    """How an engine behind a pooler differs from one connected directly."""

    #: ``SET LOCAL`` statements that open each of its transactions, each ending in "; ".
    prelude: str
    connect_args: dict[str, t.Any] | None
    connections: ConnectionSettings
    #: The engine on the direct listen URL, once built (see :func:`listen_engine`).
    listener: sa.Engine | None = None


_pooled: weakref.WeakKeyDictionary[sa.Engine, _Pooled] = weakref.WeakKeyDictionary()
_pooled_lock = threading.Lock()


def _statement_timeout_prelude(connections: ConnectionSettings) -> str:
    """``SET LOCAL statement_timeout``, for a pooler's transactions ("" for no timeout)."""
    if connections.statement_timeout is None:
        return ""
    milliseconds = max(1, round(connections.statement_timeout * 1000))
    return f"SET LOCAL statement_timeout = {milliseconds}; "


def _configure_pooler(
    engine: sa.Engine,
    connect_args: dict[str, t.Any] | None,
    connections: ConnectionSettings,
    prelude: str,
) -> None:
    """PostgreSQL behind a pooler (``connections.pooler``): transaction pooling gives each
    transaction any server connection, so nothing the queue needs may live on a session.
    What :func:`connection_args` would send as startup options is set with ``SET LOCAL``
    (``prelude``) in each transaction instead: sent with its ``BEGIN`` (see
    :func:`_begin_with_prelude`), and before each statement of :func:`fetch_autocommitted`
    in the same round trip. ``LISTEN`` goes through :func:`listen_engine`.

    Connected directly: only a connection PgBouncer refuses for its startup options is told
    apart, its error naming the setting (:func:`_name_the_pooler_fix`)."""
    if engine.dialect.name != "postgresql":
        if connections.pooler is not None:
            raise ValueError(
                f"SOLIDQ_DATABASE_POOLER = {connections.pooler!r} is for PostgreSQL behind"
                f" PgBouncer, but the queue's database is {engine.dialect.name}: leave it unset."
            )
        return
    if connections.pooler is None:
        _name_the_pooler_fix(engine)
        return
    _pooled[engine] = _Pooled(prelude, connect_args, connections)
    if prelude:
        # The dialect is the engine's own: SQLAlchemy turns an error raised here into its
        # own (a lost connection invalidated), as for a statement's.
        engine.dialect.do_begin = functools.partial(  # type: ignore[method-assign]
            _begin_with_prelude, prelude.encode()
        )


def _begin_with_prelude(prelude: bytes, dbapi_connection: t.Any) -> None:
    """Begin a transaction that runs ``prelude`` first (a pooled engine's ``do_begin``).

    psycopg sends its ``BEGIN`` on the transaction's first statement, a round trip of its
    own; ``BEGIN`` and the ``SET LOCAL`` statements go in that same round trip instead, on the
    driver's libpq connection (psycopg reads the transaction's state from there, so it sends
    no second ``BEGIN``). An autocommit connection's statements commit on their own: the
    prelude travels with each (:func:`fetch_autocommitted`). Other drivers, or a connection
    with its own isolation level, take a round trip more."""
    driver = dbapi_connection.driver_connection
    if getattr(driver, "autocommit", False):
        return
    pgconn: t.Any = getattr(driver, "pgconn", None)
    plain = pgconn is not None and not (
        driver.isolation_level is not None
        or driver.read_only is not None
        or driver.deferrable is not None
    )
    if not plain:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(prelude)
        finally:
            cursor.close()
        return
    from psycopg import pq

    result = pgconn.exec_(b"BEGIN; " + prelude)
    if result.status != pq.ExecStatus.COMMAND_OK:
        raise _psycopg_error(pgconn, result)


def _psycopg_error(pgconn: t.Any, result: t.Any) -> Exception:
    """The psycopg error of a failed libpq ``result``: its SQLSTATE's class, or
    ``OperationalError`` when the connection itself failed (no SQLSTATE)."""
    import psycopg
    from psycopg import errors
    from psycopg import pq

    if result.error_field(pq.DiagnosticField.SQLSTATE):
        return errors.error_from_result(result, encoding=pgconn._encoding)
    message = result.get_error_message(pgconn._encoding) or "the connection failed"
    return psycopg.OperationalError(message.strip())


def _name_the_pooler_fix(engine: sa.Engine) -> None:
    """Connected directly as far as the queue knows: a connection PgBouncer refuses for its
    startup options fails with an error that says to set ``SOLIDQ_DATABASE_POOLER`` (a
    configuration to fix, not an outage: see :func:`is_pooler_error`)."""

    @sa.event.listens_for(engine, "do_connect")
    def connect(
        dialect: sa.Dialect, _record: t.Any, cargs: tuple[t.Any, ...], cparams: dict[str, t.Any]
    ) -> t.Any:
        try:
            return dialect.loaded_dbapi.connect(*cargs, **cparams)
        except dialect.loaded_dbapi.Error as error:
            if not is_pooler_error(error):
                raise
            raise _with_fix(error) from error


def is_pooler_error(error: BaseException) -> bool:
    """Whether ``error`` (a driver's, or SQLAlchemy's around one) is PgBouncer refusing what
    only a direct connection carries: startup options, or a prepared statement that the
    server connection of this transaction never saw. It means :data:`POOLER_FIX`."""
    original = getattr(error, "orig", None) or error
    return bool(_POOLER_ERRORS.search(str(original)))


def _with_fix(error: Exception) -> Exception:
    """The driver's ``error`` again (its class, so its SQLSTATE), its text ending with
    :data:`POOLER_FIX`."""
    text = str(error).rstrip()
    if POOLER_FIX in text:
        return error
    return type(error)(f"{text}: {POOLER_FIX}")


def is_pooled(engine: sa.Engine) -> bool:
    """Whether ``engine`` reaches PostgreSQL through a pooler (``SOLIDQ_DATABASE_POOLER``)."""
    return engine in _pooled


def listen_engine(engine: sa.Engine) -> sa.Engine | None:
    """The engine whose connections ``LISTEN`` for ``engine``'s wake-ups: ``engine`` itself
    when connected directly; behind a pooler (which hands each transaction any server
    connection, and drops the notifications of a session it doesn't keep), one on the direct
    listen URL (``SOLIDQ_DATABASE_LISTEN_URL``), built once; None behind a pooler without
    one: the processes poll."""
    pooled = _pooled.get(engine)
    if pooled is None:
        return engine
    url = pooled.connections.listen_url
    if url is None:
        return None
    with _pooled_lock:
        if pooled.listener is None:
            # No startup options either: the URL may be a session-pooling PgBouncer's.
            listening = dataclasses.replace(pooled.connections, listen_url=None)
            pooled.listener = create_queue_engine(url, pooled.connect_args, listening)
        return pooled.listener


def polling_interval(engine: sa.Engine, interval: float) -> float:
    """A dispatcher's ``interval`` between polls: at most :data:`UNHEARD_POLLING_INTERVAL`
    when ``engine``'s wake-ups from other machines can't be heard (behind a pooler, without
    a direct listen URL)."""
    pooled = _pooled.get(engine)
    if pooled is None or pooled.connections.listen_url is not None:
        return interval
    return min(interval, UNHEARD_POLLING_INTERVAL)


_sqlite_writers: weakref.WeakKeyDictionary[sa.Engine, threading.RLock] = weakref.WeakKeyDictionary()


def _configure_sqlite(engine: sa.Engine) -> None:
    _sqlite_writers[engine] = threading.RLock()
    sqlite_connections.configure(engine)


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
    :mod:`flask_solidq.app_transaction`), and :func:`after_commit` callbacks go to
    ``callbacks``, which that owner runs when it commits. Nothing here commits."""
    current = _ambient.get() or {}
    previous = connection.info.get("solidq_after_commit")
    connection.info["solidq_after_commit"] = callbacks
    token = _ambient.set({**current, engine: connection})
    try:
        yield connection
    finally:
        _ambient.reset(token)
        if previous is None:
            connection.info.pop("solidq_after_commit", None)
        else:
            connection.info["solidq_after_commit"] = previous


def after_commit(engine: sa.Engine, callback: t.Callable[[], None]) -> None:
    """Run ``callback`` once the open :func:`transaction` on ``engine`` commits (never, if it
    rolls back), or now when none is open."""
    ambient = (_ambient.get() or {}).get(engine)
    if ambient is None:
        callback()
    else:
        ambient.info["solidq_after_commit"].append(callback)


def in_transaction(engine: sa.Engine) -> bool:
    """Whether a :func:`transaction` block on ``engine`` is open in this context."""
    return engine in (_ambient.get() or {})


@contextlib.contextmanager
def write(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """A connection in a transaction that may write: joins the open :func:`transaction`, or
    begins one of its own that commits on exit (``BEGIN IMMEDIATE`` on SQLite)."""
    ambient = (_ambient.get() or {}).get(engine)
    if ambient is not None:
        yield ambient
        return
    with _writer(engine), engine.begin() as connection:
        yield connection


def _writer(engine: sa.Engine) -> t.ContextManager[t.Any]:
    """SQLite's write lock, taken in this process first.

    Threads of one process (a worker's claims and its finisher) that wait for SQLite's own
    lock wait in its busy handler, which sleeps 1, 2, 5, 10... milliseconds between tries; a
    process-wide lock hands the turn over the moment the holder commits. Other processes
    still meet in SQLite's lock.
    """
    return _sqlite_writers.get(engine) or contextlib.nullcontext()


@contextlib.contextmanager
def read(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """A connection for reading only: on SQLite its transaction takes no write lock."""
    with engine.connect() as connection:
        connection = connection.execution_options(solidq_read_only=True)
        with connection.begin():
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


def supports_listen_notify(connection: sa.Connection | sa.Engine) -> bool:
    """Whether processes can wake each other through the database: PostgreSQL's
    ``LISTEN``/``NOTIFY``, heard through psycopg 3; behind a pooler, only with a direct URL
    to listen on (see :func:`listen_engine`). Where they can't, nobody sends ``NOTIFY`` (a
    lock at commit for no listener) and this machine's sockets wake its processes instead."""
    if connection.dialect.name != "postgresql" or connection.dialect.driver != "psycopg":
        return False
    pooled = _pooled.get(connection if isinstance(connection, sa.Engine) else connection.engine)
    return pooled is None or pooled.connections.listen_url is not None


def notify(connection: sa.Connection, channel: str, payload: str = "") -> None:
    """Wake the listeners of ``channel`` when the caller's transaction commits (PostgreSQL);
    nothing elsewhere."""
    if supports_listen_notify(connection):
        connection.execute(postgres.NOTIFY, {"channel": channel, "payload": payload})


@contextlib.contextmanager
def autocommit(engine: sa.Engine) -> t.Iterator[sa.Connection]:
    """A connection outside any transaction: each statement commits on its own. For writes
    that are a single statement, it saves the round trips of ``BEGIN`` and ``COMMIT``."""
    with engine.connect() as connection:
        yield connection.execution_options(isolation_level="AUTOCOMMIT")


def fetch_autocommitted(
    engine: sa.Engine, statement: sa.Executable, params: dict[str, t.Any]
) -> list[tuple[t.Any, ...]]:
    """Run one statement in autocommit and return its rows as plain tuples.

    The hot statements of PostgreSQL (a single enqueue, a claim, a batch's finish) are one
    fixed statement each, whose Python cost through SQLAlchemy's Connection and result layers
    was several times the driver's own (measured: a single enqueue's store took 310-390 µs of
    CPU, 120-160 µs straight through a pooled psycopg connection; this path runs 40% fewer
    instructions than the Connection's, counted with callgrind). So, on psycopg only, they run
    on the pooled DBAPI connection itself, compiled once: the pool, its connect arguments
    (timeouts) and its events still apply; a driver error is raised as SQLAlchemy's
    (``sa.exc.DBAPIError`` and its subclasses; a lost connection invalidates the pool's
    connections of its generation, as SQLAlchemy's own handling does), so callers handle it
    as any other. Datetime parameters must be naive UTC (what
    :class:`~flask_solidq.models.base.UTCDateTime` would bind); the rows come back
    unprocessed (no result type converts them).

    Other drivers, and an engine whose statements something listens to (tracing, query
    recording: see :func:`_has_execution_listeners`), go through an ordinary autocommit
    connection, so the listeners hear every statement as SQLAlchemy tells them.

    Behind a pooler, the engine's ``SET LOCAL`` prelude (see :func:`_configure_pooler`) goes
    in the same query string, before the statement: one round trip, one implicit
    transaction, so the statement timeout holds on whichever server connection runs it. Its
    parameters are then bound by psycopg on the client (a query string of several
    statements can't carry them to the server), which costs no more CPU than binding on the
    server (measured); without a pooler nothing changes. Through an ordinary connection the
    prelude needs a transaction: the statement runs in one of its own.
    """
    pooled_settings = _pooled.get(engine)
    if not _fast_path(engine):
        if pooled_settings is not None and pooled_settings.prelude:
            with engine.begin() as connection:
                return [tuple(row) for row in connection.execute(statement, params)]
        with autocommit(engine) as connection:
            return [tuple(row) for row in connection.execute(statement, params)]
    sql = _driver_sql(engine.dialect, statement)
    prelude = pooled_settings.prelude if pooled_settings is not None else ""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        pooled = engine.raw_connection()
    except dbapi_error as error:  # a new connection that failed: SQLAlchemy's error too
        raise sa.exc.DBAPIError.instance(sql, params, error, dbapi_error) from error
    try:
        driver = pooled.driver_connection
        try:
            driver.autocommit = True  # type: ignore[union-attr]
            if prelude:
                return _fetch(engine, pooled, prelude + sql, params, client_side=True)
            return _fetch(engine, pooled, sql, params)
        finally:
            if pooled.is_valid:  # an invalidated connection is closed, never used again
                driver.autocommit = False  # type: ignore[union-attr]
    except dbapi_error as error:  # setting autocommit on a connection that broke
        lost = _invalidate_if_lost(engine, pooled, error)
        raise sa.exc.DBAPIError.instance(
            sql, params, error, dbapi_error, connection_invalidated=lost
        ) from error
    finally:
        pooled.close()


def fetch_in_transaction(
    connection: sa.Connection,
    statement: sa.Executable,
    params: dict[str, t.Any],
    *,
    binary: t.Collection[str] = (),
) -> list[tuple[t.Any, ...]]:
    """Run one statement in ``connection``'s transaction and return its rows as plain
    tuples; on psycopg, on the DBAPI connection itself, with the parameters named in
    ``binary`` sent in binary format.

    For a bulk enqueue's arrays: in the text format psycopg quotes every element of a text
    array through a regular expression, which took a third of ``perform_all_later``'s CPU;
    in binary, each element goes as its bytes and the server skips parsing them. What
    :func:`fetch_autocommitted` says of errors, listeners and values holds here too.
    """
    engine = connection.engine
    if not _fast_path(engine):
        return [tuple(row) for row in connection.execute(statement, params)]
    sql = _driver_sql(engine.dialect, statement, tuple(sorted(binary)))
    try:
        return _fetch(engine, connection.connection, sql, params)
    except sa.exc.DBAPIError as error:
        if error.connection_invalidated:
            connection.invalidate(error.orig)
        raise


def _fast_path(engine: sa.Engine) -> bool:
    """Whether :func:`fetch_autocommitted` and :func:`fetch_in_transaction` may run their
    statement on the DBAPI connection: on psycopg, with no execution listener to tell."""
    return engine.dialect.driver == "psycopg" and not _has_execution_listeners(engine)


#: The engine events a statement run through SQLAlchemy's Connection dispatches (and
#: ``handle_error``, a dialect event, when it fails).
_EXECUTION_EVENTS = (
    "before_execute",
    "after_execute",
    "before_cursor_execute",
    "after_cursor_execute",
)


def _has_execution_listeners(engine: sa.Engine) -> bool:
    """Whether anything listens to ``engine``'s statements (its own listeners, or ones on
    the Engine class): OpenTelemetry's and Sentry's SQLAlchemy instrumentation, Flask-
    SQLAlchemy's ``SQLALCHEMY_RECORD_QUERIES``, a test counting statements. Each pairs a
    ``before`` with an ``after`` and keeps state on the execution context, which only
    SQLAlchemy's Connection makes."""
    dispatch = engine.dispatch
    heard = any(getattr(dispatch, event) for event in _EXECUTION_EVENTS)
    return heard or bool(engine.dialect.dispatch.handle_error)


def _fetch(
    engine: sa.Engine,
    pooled: t.Any,
    sql: str,
    params: dict[str, t.Any],
    *,
    client_side: bool = False,
) -> list[tuple[t.Any, ...]]:
    """Execute ``sql`` on the pooled DBAPI connection ``pooled`` and return the rows of its
    last statement (``sql`` may hold several when ``client_side``: psycopg binds the
    parameters on the client); a driver error becomes SQLAlchemy's, and a lost connection
    invalidates the pool's connections of its generation (as SQLAlchemy's Connection does: a
    restarted server dropped them all). PgBouncer refusing a prepared statement says what to
    set (:data:`POOLER_FIX`)."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        cursor = _client_cursor(pooled) if client_side else pooled.cursor()
        cursor.execute(sql, params)
        while client_side and cursor.nextset():
            pass
        return list(cursor.fetchall()) if cursor.description else []
    except dbapi_error as error:
        lost = _invalidate_if_lost(engine, pooled, error)
        driver_error = _with_fix(error) if is_pooler_error(error) else error
        raise sa.exc.DBAPIError.instance(
            sql, params, driver_error, dbapi_error, connection_invalidated=lost
        ) from error


def _invalidate_if_lost(engine: sa.Engine, pooled: t.Any, error: Exception) -> bool:
    """Whether ``error`` lost ``pooled``'s connection; if so, invalidate the pool's
    connections of its generation."""
    lost = bool(engine.dialect.is_disconnect(error, pooled.dbapi_connection, None))  # type: ignore[arg-type]
    if lost and pooled.is_valid:
        engine.pool._invalidate(pooled, error)
    return lost


def _client_cursor(pooled: t.Any) -> t.Any:
    """A psycopg cursor that binds parameters on the client, so one query string may hold
    several statements (and no statement is ever prepared on the server)."""
    from psycopg import ClientCursor

    return ClientCursor(pooled.driver_connection)


_DRIVER_SQL: dict[tuple[str, int, tuple[str, ...]], str] = {}


def _driver_sql(dialect: sa.Dialect, statement: sa.Executable, binary: tuple[str, ...] = ()) -> str:
    """``statement`` compiled for ``dialect``'s driver, once (module-level statements only),
    the parameters named in ``binary`` marked for the binary format (psycopg's ``%(name)b``)."""
    key = (dialect.driver, id(statement), binary)
    sql = _DRIVER_SQL.get(key)
    if sql is None:
        sql = str(statement.compile(dialect=dialect))  # type: ignore[attr-defined]
        for name in binary:
            placeholder = f"%({name})s"
            if placeholder not in sql:
                raise ValueError(f"{name!r} isn't a parameter of the statement")
            sql = sql.replace(placeholder, f"%({name})b")
        _DRIVER_SQL[key] = sql
    return sql


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
    if connection.dialect.name in ("mysql", "mariadb"):
        connection.execute(_mysql_delete_by_ids(table.name), {"ids": json.dumps(list(ids))})
    else:
        connection.execute(_delete_by_ids(table), {"ids": list(ids)})


@functools.cache
def _mysql_delete_by_ids(table_name: str) -> sa.TextClause:
    return sa.text(
        f"DELETE t FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS k"
        f" STRAIGHT_JOIN {table_name} AS t ON t.id = k.id"
    )


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
        dialect_insert = postgresql.insert if name == "postgresql" else sqlite.insert
        # RETURNING counts what was inserted; the driver's rowcount doesn't, for many rows.
        key = next(iter(table.primary_key.columns))
        statement = dialect_insert(table).on_conflict_do_nothing().returning(key)
        return len(connection.execute(statement, rows).all())
    statement = mysql.insert(table).prefix_with("IGNORE")
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

"""The queue's engines: how each is built for the database it reaches.

The queue has engines (and so connection pools) of its own, apart from the app's: SQLite's
settings would change how the app's own transactions lock, and the workers must not starve the
app's pool. Each is tuned for its database here (:func:`create_queue_engine`), with the
guards of ``SOLIDQ_DATABASE_*`` against a database that is slow, gone or cut off
(:class:`ConnectionSettings`); SQLite's connection setup is
:mod:`flask_solidq.storage.sqlite_connections`'s,
a pooler's :mod:`flask_solidq.storage.pooler`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import typing as t

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

from flask_solidq.storage import pooler
from flask_solidq.storage import sqlite_connections

#: Seconds a SQLite connection waits for another process's write lock before it gives up with
#: "database is locked". Queue transactions are short, so a long wait means a real problem.
SQLITE_BUSY_TIMEOUT = 30.0


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
    #: :func:`flask_solidq.storage.pooler.listen_engine`); None: behind a pooler, processes poll
    #: instead.
    listen_url: sa.URL | None = None


def create_queue_engine(
    url: sa.URL,
    connect_args: t.Mapping[str, object] | None = None,
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
    * PostgreSQL behind a pooler (``connections.pooler``): see
      :func:`flask_solidq.storage.pooler.configure`.
    * Every database: ``hide_parameters``, so no SQLAlchemy error's text (and so no log line
      or traceback) ever carries a job's arguments or keys.
    """
    connections = connections or ConnectionSettings()
    args = connection_args(url, connect_args, connections)
    # Any: create_engine's keywords, each of its own type.
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
        sqlite_connections.configure(engine)
    _set_mysql_statement_timeout(engine, connections.statement_timeout)
    prelude = pooler.statement_timeout_prelude(connections.statement_timeout)
    _configure_pooler(engine, connect_args, connections, prelude)
    return engine


def warm(engine: sa.Engine, count: int) -> None:
    """Open ``count`` connections of ``engine``'s pool now (as many as it keeps, at most), so
    that the first jobs of a worker's threads don't each wait for a connection to be made: a
    MariaDB connection takes 60-100 ms to open here (its handshake and authentication), and
    a rate-limited job asks the database whether its budget is paused just before it starts,
    so a cold pool would start a fresh worker's first jobs that much after their admission.
    SQLite keeps no pool worth warming."""
    size = getattr(engine.pool, "size", None)
    if is_sqlite(engine) or not callable(size):
        return
    with contextlib.ExitStack() as opened:
        for _ in range(min(count, size())):
            opened.enter_context(engine.connect())


def create_claim_engine(
    url: sa.URL,
    connect_args: t.Mapping[str, object] | None = None,
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
    (see :func:`flask_solidq.storage.pooler.configure`).
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
    prelude = pooler.statement_timeout_prelude(connections.statement_timeout)
    prelude += "SET LOCAL synchronous_commit = off; "
    _configure_pooler(engine, connect_args, connections, prelude)
    return engine


def _configure_pooler(
    engine: sa.Engine,
    connect_args: t.Mapping[str, object] | None,
    connections: ConnectionSettings,
    prelude: str,
) -> None:
    """Record how ``engine`` reaches PostgreSQL (see :func:`flask_solidq.storage.pooler.configure`);
    behind a pooler, its listener is built on the direct listen URL, without startup options
    either (the URL may be a session-pooling PgBouncer's)."""
    build_listener = None
    url = connections.listen_url
    if connections.pooler is not None and url is not None:
        listening = dataclasses.replace(connections, listen_url=None)
        build_listener = functools.partial(create_queue_engine, url, connect_args, listening)
    pooler.configure(engine, connections.pooler, prelude, build_listener)


#: Keepalive probes sent before a silent PostgreSQL connection is given up.
KEEPALIVE_PROBES = 4


def connection_args(
    url: sa.URL, connect_args: t.Mapping[str, object] | None, connections: ConnectionSettings
) -> dict[str, object]:
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
      is set in each transaction instead, see :func:`flask_solidq.storage.pooler.configure`), and
      psycopg's
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
    def set_statement_timeout(
        dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry
    ) -> None:
        server = str(getattr(dbapi_connection, "get_server_info", lambda: "")())
        cursor = dbapi_connection.cursor()
        if "mariadb" in server.lower():
            cursor.execute(f"SET SESSION max_statement_time={seconds:.6f}")
        else:
            cursor.execute(f"SET SESSION max_execution_time={max(1, round(seconds * 1000))}")
        cursor.close()

"""PostgreSQL behind a connection pooler (PgBouncer), ``SOLIDQ_DATABASE_POOLER``.

Transaction pooling hands each transaction any server connection, so nothing the queue needs
may live on a session: no startup options (``SET LOCAL`` in each transaction instead), no
server-side prepared statements, and ``LISTEN`` only through a URL that reaches PostgreSQL
directly. Which engines are pooled is recorded here when :mod:`flask_solidq.storage.engines` builds
them; the transactions (:mod:`flask_solidq.storage.db`) and the driver-level fast path
(:mod:`flask_solidq.storage.fast_path`) ask this module what a pooled engine needs.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
import typing as t
import weakref

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

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
    #: Builds the engine on the direct listen URL (see :func:`listen_engine`); None without
    #: one.
    build_listener: t.Callable[[], sa.Engine] | None
    #: That engine, once built.
    listener: sa.Engine | None = None


_pooled: weakref.WeakKeyDictionary[sa.Engine, _Pooled] = weakref.WeakKeyDictionary()
_pooled_lock = threading.Lock()


def statement_timeout_prelude(seconds: float | None) -> str:
    """``SET LOCAL statement_timeout``, for a pooler's transactions ("" for no timeout)."""
    if seconds is None:
        return ""
    milliseconds = max(1, round(seconds * 1000))
    return f"SET LOCAL statement_timeout = {milliseconds}; "


def configure(
    engine: sa.Engine,
    pooler: str | None,
    prelude: str,
    build_listener: t.Callable[[], sa.Engine] | None,
) -> None:
    """PostgreSQL behind a pooler (``pooler``, ``SOLIDQ_DATABASE_POOLER``): transaction
    pooling gives each transaction any server connection, so nothing the queue needs may live
    on a session. What :func:`flask_solidq.storage.engines.connection_args` would send as startup
    options is set with ``SET LOCAL`` (``prelude``) in each transaction instead: sent with its
    ``BEGIN`` (see :func:`_begin_with_prelude`), and before each statement of
    :func:`flask_solidq.storage.fast_path.fetch_autocommitted` in the same round trip. ``LISTEN``
    goes through :func:`listen_engine`, on the engine ``build_listener`` builds.

    Connected directly: only a connection PgBouncer refuses for its startup options is told
    apart, its error naming the setting (:func:`_name_the_pooler_fix`)."""
    if engine.dialect.name != "postgresql":
        if pooler is not None:
            raise ValueError(
                f"SOLIDQ_DATABASE_POOLER = {pooler!r} is for PostgreSQL behind"
                f" PgBouncer, but the queue's database is {engine.dialect.name}: leave it unset."
            )
        return
    if pooler is None:
        _name_the_pooler_fix(engine)
        return
    _pooled[engine] = _Pooled(prelude, build_listener)
    if prelude:
        # The dialect is the engine's own: SQLAlchemy turns an error raised here into its
        # own (a lost connection invalidated), as for a statement's.
        engine.dialect.do_begin = functools.partial(  # type: ignore[method-assign]
            _begin_with_prelude, prelude.encode()
        )


# Any: the driver's objects (psycopg's, an optional dependency, or another driver's).
def _begin_with_prelude(prelude: bytes, dbapi_connection: t.Any) -> None:
    """Begin a transaction that runs ``prelude`` first (a pooled engine's ``do_begin``).

    psycopg sends its ``BEGIN`` on the transaction's first statement, a round trip of its
    own; ``BEGIN`` and the ``SET LOCAL`` statements go in that same round trip instead, on the
    driver's libpq connection (psycopg reads the transaction's state from there, so it sends
    no second ``BEGIN``). An autocommit connection's statements commit on their own: the
    prelude travels with each (:func:`flask_solidq.storage.fast_path.fetch_autocommitted`). Other
    drivers, or a connection with its own isolation level, take a round trip more."""
    driver = dbapi_connection.driver_connection
    if getattr(driver, "autocommit", False):
        return
    pgconn: t.Any = getattr(driver, "pgconn", None)  # psycopg's, as above
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


# Any: as for _begin_with_prelude (psycopg's libpq wrappers).
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
        dialect: sa.Dialect,
        _record: ConnectionPoolEntry,
        cargs: tuple[object, ...],
        cparams: dict[str, object],
    ) -> DBAPIConnection:
        try:
            return t.cast("DBAPIConnection", dialect.loaded_dbapi.connect(*cargs, **cparams))
        except dialect.loaded_dbapi.Error as error:
            if not is_pooler_error(error):
                raise
            raise with_fix(error) from error


def is_pooler_error(error: BaseException) -> bool:
    """Whether ``error`` (a driver's, or SQLAlchemy's around one) is PgBouncer refusing what
    only a direct connection carries: startup options, or a prepared statement that the
    server connection of this transaction never saw. It means :data:`POOLER_FIX`."""
    original = getattr(error, "orig", None) or error
    return bool(_POOLER_ERRORS.search(str(original)))


def with_fix(error: Exception) -> Exception:
    """The driver's ``error`` again (its class, so its SQLSTATE), its text ending with
    :data:`POOLER_FIX`."""
    text = str(error).rstrip()
    if POOLER_FIX in text:
        return error
    return type(error)(f"{text}: {POOLER_FIX}")


def is_pooled(engine: sa.Engine) -> bool:
    """Whether ``engine`` reaches PostgreSQL through a pooler (``SOLIDQ_DATABASE_POOLER``)."""
    return engine in _pooled


def prelude_of(engine: sa.Engine) -> str:
    """The ``SET LOCAL`` statements that must open each of ``engine``'s transactions ("" for
    an engine connected directly, or behind a pooler with nothing to set)."""
    pooled = _pooled.get(engine)
    return pooled.prelude if pooled is not None else ""


def is_heard(engine: sa.Engine) -> bool:
    """Whether ``engine``'s ``NOTIFY`` reaches a listener: connected directly, or behind a
    pooler with a direct URL to listen on."""
    pooled = _pooled.get(engine)
    return pooled is None or pooled.build_listener is not None


def listen_engine(engine: sa.Engine) -> sa.Engine | None:
    """The engine whose connections ``LISTEN`` for ``engine``'s wake-ups: ``engine`` itself
    when connected directly; behind a pooler (which hands each transaction any server
    connection, and drops the notifications of a session it doesn't keep), one on the direct
    listen URL (``SOLIDQ_DATABASE_LISTEN_URL``), built once; None behind a pooler without
    one: the processes poll."""
    pooled = _pooled.get(engine)
    if pooled is None:
        return engine
    if pooled.build_listener is None:
        return None
    with _pooled_lock:
        if pooled.listener is None:
            pooled.listener = pooled.build_listener()
        return pooled.listener


def polling_interval(engine: sa.Engine, interval: float) -> float:
    """A dispatcher's ``interval`` between polls: at most :data:`UNHEARD_POLLING_INTERVAL`
    when ``engine``'s wake-ups from other machines can't be heard (behind a pooler, without
    a direct listen URL)."""
    pooled = _pooled.get(engine)
    if pooled is None or pooled.build_listener is not None:
        return interval
    return min(interval, UNHEARD_POLLING_INTERVAL)

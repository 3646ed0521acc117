"""The driver-level fast path: PostgreSQL's hot statements run on psycopg's own connection.

A single enqueue, a claim and a batch's finish are one fixed statement each on PostgreSQL;
through SQLAlchemy's Connection and result layers their Python cost was several times the
driver's. Here they run on the pooled DBAPI connection, compiled once, with SQLAlchemy's
errors, pool and events kept (see :func:`fetch_autocommitted`). Any other driver, or an
engine something listens to, takes the ordinary way.
"""

from __future__ import annotations

import contextlib
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq.storage import pooler

if t.TYPE_CHECKING:
    import psycopg

#: A row as the driver returned it: no result type converted its values (Any: each column's
#: value is of the driver's type for it).
DriverRow = tuple[t.Any, ...]
#: A statement's parameters, by name.
Params = t.Mapping[str, object]


def fetch_autocommitted(
    engine: sa.Engine, statement: sa.Executable, params: Params
) -> list[DriverRow]:
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
    recording: see :func:`has_execution_listeners`), go through an ordinary autocommit
    connection, so the listeners hear every statement as SQLAlchemy tells them.

    Behind a pooler, the engine's ``SET LOCAL`` prelude (see :func:`pooler.configure`) goes
    in the same query string, before the statement: one round trip, one implicit
    transaction, so the statement timeout holds on whichever server connection runs it. Its
    parameters are then bound by psycopg on the client (a query string of several
    statements can't carry them to the server), which costs no more CPU than binding on the
    server (measured); without a pooler nothing changes. Through an ordinary connection the
    prelude needs a transaction: the statement runs in one of its own.
    """
    prelude = pooler.prelude_of(engine)
    if not _fast_path(engine):
        if prelude:
            with engine.begin() as connection:
                return [tuple(row) for row in connection.execute(statement, params)]
        with engine.connect() as connection:
            autocommitted = connection.execution_options(isolation_level="AUTOCOMMIT")
            return [tuple(row) for row in autocommitted.execute(statement, params)]
    sql = _driver_sql(engine.dialect, statement)
    dbapi_error = engine.dialect.loaded_dbapi.Error
    pooled = _checkout(engine, sql, params)
    try:
        driver = _psycopg(pooled)
        try:
            driver.autocommit = True
            if prelude:
                return _fetch(engine, pooled, prelude + sql, params, client_side=True)
            return _fetch(engine, pooled, sql, params)
        finally:
            if pooled.is_valid:  # an invalidated connection is closed, never used again
                driver.autocommit = False
    except dbapi_error as error:  # setting autocommit on a connection that broke
        lost = invalidate_if_lost(engine, pooled, error)
        raise sa.exc.DBAPIError.instance(
            sql, params, error, dbapi_error, connection_invalidated=lost
        ) from error
    finally:
        pooled.close()


def fetch_in_transaction(
    connection: sa.Connection,
    statement: sa.Executable,
    params: Params,
    *,
    binary: t.Collection[str] = (),
) -> list[DriverRow]:
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


#: A statement for :func:`fetch_pipelined`: its text, its parameters, and the names of those
#: sent in binary format.
Statement = tuple[sa.Executable, Params, t.Collection[str]]


def pipelines(engine: sa.Engine) -> bool:
    """Whether :func:`fetch_pipelined` may run on ``engine``: psycopg with a libpq that
    has pipeline mode, no execution listener to tell (see :func:`has_execution_listeners`),
    and no pooler prelude (its ``SET LOCAL`` statements would have to go first, as a query
    string of several statements, which pipeline mode refuses)."""
    return _fast_path(engine) and not pooler.prelude_of(engine) and _pipeline_mode_supported()


@functools.cache
def _pipeline_mode_supported() -> bool:
    from psycopg import Pipeline

    return bool(Pipeline.is_supported())


def fetch_pipelined(
    engine: sa.Engine, statements: t.Iterable[Statement]
) -> list[list[DriverRow]]:
    """Run ``statements`` in one transaction on a pooled psycopg connection in pipeline mode,
    and return each one's rows as plain tuples; only where :func:`pipelines` says so.

    Each statement is sent as soon as ``statements`` yields it, without waiting for the one
    before to come back, and ``COMMIT`` follows the last: the whole run costs one round trip,
    and a generator that builds each statement's parameters (a bulk enqueue's rows) does so
    while the server runs the statements already sent. The transaction is all-or-nothing:
    if a statement fails, or ``statements`` raises, it is rolled back and the error raised
    (a driver's error as SQLAlchemy's, as :func:`fetch_autocommitted` raises it).
    """
    dbapi_error = engine.dialect.loaded_dbapi.Error
    sql = ""
    params: Params = {}
    pooled = _checkout(engine, sql, params)
    driver = _psycopg(pooled)
    # Its connections may autocommit (an app's connect_args); the statements must share one
    # transaction, so it is off for them, and back on for the pool once they are done.
    autocommit = driver.autocommit
    try:
        cursors = []
        try:
            driver.autocommit = False
            with driver.pipeline():
                for statement, params, binary in statements:
                    sql = _driver_sql(engine.dialect, statement, tuple(sorted(binary)))
                    cursor = driver.cursor()
                    cursor.execute(sql, params)
                    cursors.append(cursor)
                driver.commit()
            return [list(cursor.fetchall()) for cursor in cursors]
        except BaseException:
            # Nothing is committed; a connection lost meanwhile is the error to tell.
            with contextlib.suppress(dbapi_error):
                driver.rollback()
            raise
        finally:
            if autocommit and pooled.is_valid:
                with contextlib.suppress(dbapi_error):  # lost: the error to tell is raised
                    driver.autocommit = True
    except dbapi_error as error:
        raise _sqlalchemy_error(engine, pooled, sql, params, error) from error
    finally:
        pooled.close()


def _checkout(
    engine: sa.Engine, sql: str, params: Params
) -> sa.PoolProxiedConnection:
    """A pooled DBAPI connection of ``engine``, for running ``sql``; a new connection that
    failed raises SQLAlchemy's error, as the Connection would."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        return engine.raw_connection()
    except dbapi_error as error:
        raise sa.exc.DBAPIError.instance(sql, params, error, dbapi_error) from error


def _fast_path(engine: sa.Engine) -> bool:
    """Whether :func:`fetch_autocommitted` and :func:`fetch_in_transaction` may run their
    statement on the DBAPI connection: on psycopg, with no execution listener to tell."""
    return engine.dialect.driver == "psycopg" and not has_execution_listeners(engine)


def has_execution_listeners(engine: sa.Engine) -> bool:
    """Whether anything listens to ``engine``'s statements (its own listeners, or ones on
    the Engine class): OpenTelemetry's and Sentry's SQLAlchemy instrumentation, Flask-
    SQLAlchemy's ``SQLALCHEMY_RECORD_QUERIES``, a test counting statements. Each pairs a
    ``before`` with an ``after`` and keeps state on the execution context, which only
    SQLAlchemy's Connection makes."""
    dispatch = engine.dispatch
    # The engine events a statement run through SQLAlchemy's Connection dispatches (and
    # ``handle_error``, a dialect event, when it fails); written out, as every enqueue asks.
    return bool(
        dispatch.before_execute
        or dispatch.after_execute
        or dispatch.before_cursor_execute
        or dispatch.after_cursor_execute
        or engine.dialect.dispatch.handle_error
    )


def _fetch(
    engine: sa.Engine,
    pooled: sa.PoolProxiedConnection,
    sql: str,
    params: Params,
    *,
    client_side: bool = False,
) -> list[DriverRow]:
    """Execute ``sql`` on the pooled DBAPI connection ``pooled`` and return the rows of its
    last statement (``sql`` may hold several when ``client_side``: psycopg binds the
    parameters on the client); a driver error becomes SQLAlchemy's, and a lost connection
    invalidates the pool's connections of its generation (as SQLAlchemy's Connection does: a
    restarted server dropped them all). PgBouncer refusing a prepared statement says what to
    set (:data:`flask_solidq.storage.pooler.POOLER_FIX`)."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        cursor = _client_cursor(pooled) if client_side else pooled.cursor()
        cursor.execute(sql, params)
        while client_side and cursor.nextset():
            pass
        return list(cursor.fetchall()) if cursor.description else []
    except dbapi_error as error:
        raise _sqlalchemy_error(engine, pooled, sql, params, error) from error


def _sqlalchemy_error(
    engine: sa.Engine, pooled: sa.PoolProxiedConnection, sql: str, params: Params, error: Exception
) -> sa.exc.StatementError:
    """The driver's ``error``, met running ``sql`` on ``pooled``, as SQLAlchemy's error; a
    lost connection invalidates the pool's connections of its generation first, and
    PgBouncer refusing a prepared statement says what to set."""
    lost = invalidate_if_lost(engine, pooled, error)
    driver_error = pooler.with_fix(error) if pooler.is_pooler_error(error) else error
    return sa.exc.DBAPIError.instance(
        sql, params, driver_error, engine.dialect.loaded_dbapi.Error, connection_invalidated=lost
    )


def invalidate_if_lost(
    engine: sa.Engine, pooled: sa.PoolProxiedConnection, error: Exception
) -> bool:
    """Whether ``error`` lost ``pooled``'s connection; if so, invalidate the pool's
    connections of its generation."""
    lost = bool(engine.dialect.is_disconnect(error, pooled.dbapi_connection, None))  # type: ignore[arg-type]
    if lost and pooled.is_valid:
        engine.pool._invalidate(pooled, error)
    return lost


def _client_cursor(pooled: sa.PoolProxiedConnection) -> psycopg.ClientCursor[DriverRow]:
    """A psycopg cursor that binds parameters on the client, so one query string may hold
    several statements (and no statement is ever prepared on the server)."""
    from psycopg import ClientCursor

    return ClientCursor(_psycopg(pooled))


def _psycopg(pooled: sa.PoolProxiedConnection) -> psycopg.Connection[DriverRow]:
    """The psycopg connection under ``pooled`` (only psycopg's engines take this path)."""
    return t.cast("psycopg.Connection[DriverRow]", pooled.driver_connection)


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

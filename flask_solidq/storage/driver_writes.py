"""Writes on SQLite's and MySQL/MariaDB's driver connection: the transport their dialects'
fast paths run on (:class:`flask_solidq.storage.dialects.driver.DriverDialect`).

A single enqueue is two fixed INSERTs (the job, then its ready or scheduled execution) in one
transaction. Through SQLAlchemy's Connection each statement paid its execution context, result
and event dispatch: of the 240 µs of CPU a ``perform_later`` took on SQLite, the two
``execute`` calls and the transaction's begin and commit took over half, for statements whose
text never changes. Here they run on the pooled DBAPI connection (``sqlite3``, PyMySQL), each
compiled once, their parameters converted by the columns' own bind processors (so a datetime
is stored in exactly the text SQLAlchemy stores, which the queue's comparisons on SQLite rely
on), in the transaction the ordinary path takes (:func:`transaction`): on SQLite this
process's writer lock (:func:`flask_solidq.storage.sqlite_connections.writer_lock`),
``BEGIN IMMEDIATE`` and ``COMMIT``; on MySQL the driver's own transaction, at the isolation
level the pool's connect set. Every error rolls back and is raised as SQLAlchemy's, and a lost
MySQL connection invalidates the pool's connections of its generation (as SQLAlchemy's
Connection does). The pool and its connect events (WAL, pragmas, timeouts) still apply.
PostgreSQL's fast paths run on psycopg's connection instead
(:mod:`flask_solidq.storage.fast_path`).

Only when nothing would miss it (:func:`applies`): an engine whose statements something
listens to (tracing, a test counting statements; see
:func:`flask_solidq.storage.fast_path.has_execution_listeners`) takes the ordinary way, and so
does a write inside the caller's transaction or one a control acts on (the caller decides
those).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
import typing as t

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import DBAPICursor
from sqlalchemy.sql.compiler import SQLCompiler

from flask_solidq.storage import fast_path
from flask_solidq.storage import sqlite_connections

#: What turns a value into the driver's parameter (a column type's bind processor). Any: it
#: takes its column's Python type, which a table of processors of every column can't say.
Processor = t.Callable[[t.Any], object]
#: The values of a statement's parameters, by name.
Values = t.Mapping[str, object]
#: A statement's parameters as the driver takes them: in order (``?``, ``%s``) or by name.
Parameters = tuple[object, ...] | dict[str, object]
#: The values converted so far for one statement pair, by processor and value identity.
Seen = dict[tuple[int, int], object]

#: The drivers this path knows how to run a transaction on.
DRIVERS = frozenset({"pysqlite", "pymysql"})


def applies(engine: sa.Engine) -> bool:
    """Whether ``engine``'s single enqueues may take this path: SQLite's own driver or
    PyMySQL, and no execution listener to tell."""
    return engine.dialect.driver in DRIVERS and not fast_path.has_execution_listeners(engine)


@dataclasses.dataclass(frozen=True)
class DriverStatement:
    """A statement compiled once for a driver, with what turns a dict of values into its
    parameters: a tuple for a positional paramstyle (``sqlite3``'s ``?``), a dict for a named
    one (PyMySQL's ``%(name)s``)."""

    sql: str
    names: tuple[str, ...]
    processors: tuple[Processor | None, ...]
    positional: bool

    @classmethod
    def of(cls, statement: sa.ClauseElement, dialect: sa.Dialect) -> DriverStatement:
        compiled = t.cast(SQLCompiler, statement.compile(dialect=dialect))
        positional = compiled.positiontup is not None
        names = tuple(compiled.positiontup or compiled.binds)
        processors = tuple(_shared_processor(compiled.binds[name].type, dialect) for name in names)
        return cls(str(compiled), names, processors, positional)

    @functools.cached_property
    def _values_of(self) -> t.Callable[[Values], tuple[object, ...]]:
        """What reads the statement's values out of a dict, in its order, in one call."""
        if len(self.names) == 1:
            (name,) = self.names
            return lambda values: (values[name],)
        return operator.itemgetter(*self.names)

    @functools.cached_property
    def _processed(self) -> tuple[tuple[int, Processor], ...]:
        """The positions of the values that have a processor, with it."""
        return tuple(
            (index, process) for index, process in enumerate(self.processors) if process is not None
        )

    def parameters(self, values: Values, seen: Seen) -> Parameters:
        """``values`` as the driver takes them. ``seen`` keeps each conversion of one
        enqueue's values: its three stamps and its execution's are one datetime, whose text
        took a quarter of this path's Python (columns of one type share one processor, see
        :func:`_shared_processor`, so the datetime is converted once)."""
        converted = list(self._values_of(values))
        for index, process in self._processed:
            value = converted[index]
            key = (id(process), id(value))
            if key not in seen:
                seen[key] = process(value)
            converted[index] = seen[key]
        if self.positional:
            return tuple(converted)
        return dict(zip(self.names, converted, strict=True))


# Any: a column's type, whose values are of its own Python type.
def bind_processor(type_: sa.types.TypeEngine[t.Any], dialect: sa.Dialect) -> Processor | None:
    """What turns a value of ``type_`` into the driver's parameter, as SQLAlchemy's
    Connection would: the dialect's own type under a TypeDecorator (SQLite's DATETIME, whose
    processor writes a datetime's text with its microseconds)."""
    return type_.dialect_impl(dialect).bind_processor(dialect)


_PROCESSORS: dict[tuple[str, type, str], Processor | None] = {}


# Any: as for bind_processor.
def _shared_processor(type_: sa.types.TypeEngine[t.Any], dialect: sa.Dialect) -> Processor | None:
    """:func:`bind_processor` of ``type_``, one for every column of an equal type (the same
    class, the same arguments: the same conversion), so that :meth:`DriverStatement.parameters`
    converts a value the statements bind to several such columns once."""
    key = (dialect.name, type(type_), repr(type_))
    if key not in _PROCESSORS:
        _PROCESSORS[key] = bind_processor(type_, dialect)
    return _PROCESSORS[key]


_COMPILED: dict[tuple[str, int], DriverStatement] = {}


def _compiled(dialect: sa.Dialect, statement: sa.ClauseElement) -> DriverStatement:
    """``statement`` (a module-level one: cached by identity) compiled for ``dialect``."""
    key = (dialect.name, id(statement))
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = DriverStatement.of(statement, dialect)
    return found


def insert_with_execution(
    engine: sa.Engine,
    job: sa.ClauseElement,
    job_values: Values,
    execution: sa.ClauseElement,
    execution_values: Values,
) -> int:
    """Insert the job row, then its execution row (``job_id`` filled in with the job's new
    id), in one write transaction; return the job's id.

    :raises sqlalchemy.exc.DBAPIError: the database refused or failed; nothing was stored.
    """
    dialect = engine.dialect
    insert_job, insert_execution = _compiled(dialect, job), _compiled(dialect, execution)
    seen: Seen = {}
    job_parameters = insert_job.parameters(job_values, seen)
    sqlite_lock = sqlite_connections.writer_lock(engine)
    if sqlite_lock is None:
        return _insert_pair(
            engine, insert_job, job_parameters, insert_execution, execution_values, seen
        )
    with sqlite_lock:
        return _insert_pair(
            engine,
            insert_job,
            job_parameters,
            insert_execution,
            execution_values,
            seen,
            sqlite=True,
        )


def _insert_pair(
    engine: sa.Engine,
    insert_job: DriverStatement,
    job_parameters: Parameters,
    insert_execution: DriverStatement,
    execution_values: Values,
    seen: Seen,
    *,
    sqlite: bool = False,
) -> int:
    """:func:`insert_with_execution`'s transaction, what :func:`transaction` does written out
    in one function: the single enqueue runs it for every job, and the generator-based
    context manager's layers cost it more than its two inserts' Python."""
    sql = "BEGIN IMMEDIATE"
    committed = False
    pooled = engine.raw_connection()
    try:
        cursor = pooled.cursor()
        try:
            if sqlite:
                cursor.execute(sql)
            sql = insert_job.sql
            cursor.execute(sql, job_parameters)
            job_id = int(cursor.lastrowid)
            sql = insert_execution.sql
            values = {**execution_values, "job_id": job_id}
            cursor.execute(sql, insert_execution.parameters(values, seen))
            sql = "COMMIT"
            if sqlite:
                cursor.execute(sql)
            else:
                pooled.commit()
            committed = True
        except BaseException:
            _roll_back(pooled, cursor, sqlite=sqlite)
            raise
        finally:
            cursor.close()
    except engine.dialect.loaded_dbapi.Error as error:
        raise _as_sqlalchemy_error(engine, pooled, sql, error) from error
    finally:
        _check_in(pooled, committed=committed)
    return job_id


#: Runs one statement in a :func:`transaction`; returns the cursor, to read its rows.
Run = t.Callable[[str, Parameters], DBAPICursor]


@contextlib.contextmanager
def transaction(engine: sa.Engine) -> t.Iterator[Run]:
    """A write transaction on a pooled DBAPI connection, committed on exit: on SQLite this
    process's writer lock and ``BEGIN IMMEDIATE``, on MySQL the driver's own transaction.
    It yields a function that runs one statement (the driver's SQL and parameters) on the
    transaction's cursor.

    :raises sqlalchemy.exc.DBAPIError: the database refused or failed (as SQLAlchemy's
        Connection raises it, so :func:`flask_solidq.storage.db.retrying_deadlocks` knows a
        deadlock);
        the transaction was rolled back.
    """
    sqlite_lock = sqlite_connections.writer_lock(engine)
    with sqlite_lock or contextlib.nullcontext():
        yield from _in_transaction(engine, sqlite=sqlite_lock is not None)


def _in_transaction(engine: sa.Engine, *, sqlite: bool) -> t.Iterator[Run]:
    """:func:`transaction`'s body, under SQLite's writer lock when ``sqlite``."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    sql = "BEGIN IMMEDIATE"
    committed = False
    pooled = engine.raw_connection()
    try:
        cursor = pooled.cursor()

        def run(statement: str, parameters: Parameters) -> DBAPICursor:
            nonlocal sql
            sql = statement
            cursor.execute(statement, parameters)
            return cursor

        try:
            if sqlite:
                cursor.execute(sql)
            yield run
            sql = "COMMIT"
            if sqlite:
                cursor.execute(sql)
            else:
                pooled.commit()
            committed = True
        except BaseException:
            _roll_back(pooled, cursor, sqlite=sqlite)
            raise
        finally:
            cursor.close()
    except dbapi_error as error:
        raise _as_sqlalchemy_error(engine, pooled, sql, error) from error
    finally:
        _check_in(pooled, committed=committed)


def _as_sqlalchemy_error(
    engine: sa.Engine, pooled: sa.PoolProxiedConnection, sql: str, error: Exception
) -> sa.exc.StatementError:
    """The driver's ``error`` in ``sql`` as SQLAlchemy's Connection raises it; a lost
    connection invalidates the pool's connections of its generation."""
    lost = fast_path.invalidate_if_lost(engine, pooled, error)
    return sa.exc.DBAPIError.instance(
        sql, None, error, engine.dialect.loaded_dbapi.Error, connection_invalidated=lost
    )


def _check_in(pooled: sa.PoolProxiedConnection, *, committed: bool) -> None:
    """Give the connection back to the pool; after a commit, without the pool's rollback.

    The pool rolls back every connection it takes back (``reset_on_return``), which PyMySQL
    sends to the server even with no transaction open: a fourth round trip on a single
    enqueue's three (measured: ``Com_rollback`` one a job, a quarter of a ``perform_later``'s
    wall time on MariaDB). SQLAlchemy's own Connection skips it when it has just ended the
    transaction, through the fairy's ``_close_special``; so does this, the pool's ``reset``
    event still told. Any other way out (an error, an interrupt) takes the rollback.
    """
    close_special = getattr(pooled, "_close_special", None)
    if committed and close_special is not None:
        close_special(transaction_reset=True)
    else:
        pooled.close()


def _roll_back(pooled: sa.PoolProxiedConnection, cursor: DBAPICursor, *, sqlite: bool) -> None:
    """Roll back what the transaction wrote, if it is still open (a failed COMMIT, or a lost
    connection, may have ended it); an error here would hide the one that matters."""
    try:
        if sqlite:
            cursor.execute("ROLLBACK")
        else:
            pooled.rollback()
    except Exception:  # noqa: BLE001, S110 - the transaction or the connection is gone
        pass

"""The protocol every database's module implements: what the operations ask of a database
that SQLAlchemy Core doesn't render the same way everywhere.

One module per database holds its statements, hints and fast paths
(:mod:`~flask_solidq.storage.dialects.postgresql`, :mod:`~flask_solidq.storage.dialects.sqlite`,
:mod:`~flask_solidq.storage.dialects.mysql`), and :func:`flask_solidq.storage.dialects.dialect_of`
picks one per engine: the operations call its methods and never test the dialect. Storage
knows no table, so the statements a method needs built from the queue's tables come from the
caller (:class:`EnqueueStatements`); the rest are written in each module as text with bound
parameters.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq.storage.fast_path import DriverRow as DriverRow

#: The channels ``LISTEN``/``NOTIFY`` wake-ups travel on (see
#: :mod:`flask_solidq.processes.job_notices`): jobs became ready (workers listen), a job was
#: scheduled for the time in the payload (dispatchers listen).
READY_CHANNEL = "solidq_ready"
SCHEDULED_CHANNEL = "solidq_scheduled"

#: A job's row as the enqueue stores it: its columns by name. Any: each column has a type of
#: its own, which the statements' parameters take as they come.
Row = t.Mapping[str, t.Any]


@dataclasses.dataclass(frozen=True)
class EnqueueStatements:
    """A single enqueue's statements, built once from the queue's tables by the caller, each
    column a parameter named after it: the job's insert and its execution's (ready or
    scheduled, ``job_id`` the job's new id), and the same two chained in one statement that
    returns the job's id (``execution_created_at`` the execution's ``created_at``)."""

    job: sa.Insert
    ready: sa.Insert
    scheduled: sa.Insert
    job_with_ready: sa.Insert
    job_with_scheduled: sa.Insert


class Dialect(t.Protocol):
    """What one database does its own way. Each method takes the engine or connection it
    runs on; the dialect object itself is stateless, one per database."""

    #: SQLAlchemy's name of the database (``"postgresql"``, ``"sqlite"``, ``"mysql"``).
    name: str

    #: Whether an ``INSERT ... RETURNING`` can feed other statements in one (PostgreSQL's
    #: data-modifying CTEs): a claim, a bulk enqueue's chunk and a batch's finish are then
    #: one statement each (:meth:`claim_in_one_statement`, :meth:`insert_all`).
    writes_in_one_statement: bool

    #: Whether a count over a secondary index's range reads the index alone (InnoDB's and
    #: SQLite's always; PostgreSQL's only once VACUUM has set the visibility map): where it
    #: does, two counts along two covering indexes beat one that visits every row.
    counts_from_index_alone: bool

    #: The query that reads the server's clock (see
    #: :mod:`flask_solidq.storage.database_clock`); None where this host's clock is the
    #: database's (SQLite: a file on one host).
    clock: sa.TextClause | None

    def listens(self, engine: sa.Engine) -> bool:
        """Whether processes can wake each other through ``engine``'s database
        (``LISTEN``/``NOTIFY``)."""
        ...

    def notify(self, connection: sa.Connection, channel: str, payload: str) -> None:
        """Wake the listeners of ``channel`` when ``connection``'s transaction commits."""
        ...

    def prepare_counts(self, connection: sa.Connection) -> None:
        """Set up ``connection``'s read transaction for a page of counts over the
        executions."""
        ...

    def minutes_between(
        self, start: sa.ColumnElement[dt.datetime], end: sa.ColumnElement[dt.datetime]
    ) -> sa.ColumnElement[float]:
        """SQL for the whole minutes from ``start`` to ``end``."""
        ...

    def counts_per_slot(
        self,
        stamp: sa.Column[dt.datetime],
        since: dt.datetime,
        slots: int,
        slot_minutes: int,
        where: t.Sequence[sa.ColumnElement[bool]],
    ) -> sa.Select[int, int] | None:
        """``(slot, rows)`` per slot of ``slot_minutes`` from ``since``, one count over
        ``stamp``'s index range each; None where counting grouped by minute is cheaper (an
        index answers it alone)."""
        ...

    def insert_ignoring_duplicates(
        self, connection: sa.Connection, table: sa.Table, rows: t.Sequence[t.Mapping[str, object]]
    ) -> int:
        """Insert ``rows``, skipping any a unique index refuses; return how many were."""
        ...

    def delete_by_ids(
        self, connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]
    ) -> None:
        """Delete the rows of ``table`` whose primary key ``id`` is in ``ids`` (not empty)."""
        ...

    def add_to_rows(
        self,
        connection: sa.Connection,
        table: sa.Table,
        rows: t.Sequence[t.Mapping[str, object]],
        *,
        keys: t.Sequence[str],
        maxima: t.Sequence[str],
    ) -> None:
        """Insert ``rows``; where a row with the same ``keys`` (a unique constraint's
        columns) exists, add each other column's value to it instead, keeping the greater
        value for the columns of ``maxima``. One atomic statement per row: writers adding to
        one row at once all count."""
        ...

    def insert_with_execution(
        self, engine: sa.Engine, statements: EnqueueStatements, row: Row, now: dt.datetime
    ) -> int | None:
        """Store one job and its execution (ready if due at ``now``, else scheduled) in a
        transaction of their own, the database's fastest way; return its id, or None (nothing
        written) where this engine has no such way (the caller then takes SQLAlchemy's)."""
        ...

    def insert_all_autocommitted(
        self, engine: sa.Engine, rows: t.Sequence[Row], holds: t.Sequence[bool], now: dt.datetime
    ) -> list[int] | None:
        """Store the jobs and their executions in one autocommitted statement and return
        their ids in order, when one statement takes them all and none is keyed or held
        (``holds``); None (nothing written) otherwise."""
        ...

    def insert_all(
        self,
        connection: sa.Connection,
        rows: t.Sequence[Row],
        holds: t.Sequence[bool],
        now: dt.datetime,
    ) -> list[int]:
        """Where :attr:`writes_in_one_statement`: store the jobs and their executions in
        ``connection``'s transaction, one statement per many thousand jobs, due jobs that
        ``holds`` marks without their ready row; return their ids in order."""
        ...

    def pipelines(self, engine: sa.Engine) -> bool:
        """Whether :meth:`insert_pipelined` may run on ``engine``."""
        ...

    def insert_pipelined(
        self, engine: sa.Engine, chunks: t.Iterable[t.Sequence[Row]], now: dt.datetime
    ) -> list[int]:
        """Store the jobs of ``chunks`` (no job keyed or held), a statement a chunk, in one
        pipelined transaction; return their ids in order. Each chunk is taken from
        ``chunks`` while the server inserts the one before."""
        ...

    def claim_in_one_statement(
        self,
        engine: sa.Engine,
        params: t.Mapping[str, object],
        *,
        skip_locked: bool,
        checked: frozenset[str],
    ) -> list[DriverRow]:
        """Where :attr:`writes_in_one_statement`: lock, delete, claim and read up to
        ``:limit`` ready jobs in one autocommitted statement (see
        :mod:`flask_solidq.storage.dialects.postgresql`)."""
        ...

    def finish_held(
        self,
        engine: sa.Engine,
        process_id: int,
        job_ids: t.Sequence[int],
        now: dt.datetime,
        *,
        preserve_finished: bool,
        stamp_type: sa.types.TypeEngine[dt.datetime],
    ) -> set[int] | None:
        """Release the claims ``process_id`` still holds on ``job_ids`` and finish those jobs
        at ``now`` (marked finished, each started when its claim was made, or deleted unless
        ``preserve_finished``), in one transaction of its own; return the ids of the jobs it
        finished. None (nothing written) where this engine has no such way.
        ``stamp_type`` is the type of ``finished_at``, which binds the time.

        :raises sqlalchemy.exc.DBAPIError: the database failed (a deadlock among them, which
            the caller tries again); nothing was stored.
        """
        ...


def insert_counted(
    connection: sa.Connection,
    statement: sa.Insert,
    table: sa.Table,
    rows: t.Sequence[t.Mapping[str, object]],
) -> int:
    """Run ``statement``, an insert of ``table`` that skips duplicates, for ``rows``; return
    how many were inserted, counted by ``RETURNING`` their primary key (the driver's
    rowcount doesn't count them, for many rows)."""
    key = next(iter(table.primary_key.columns))
    return len(connection.execute(statement.returning(key), rows).all())


def delete_in(connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]) -> None:
    """Delete the rows of ``table`` whose ``id`` is in ``ids``, with an expanding ``IN``
    (what PostgreSQL and SQLite plan by the primary key whatever their statistics)."""
    connection.execute(_delete_in(table), {"ids": list(ids)})


@functools.cache
def _delete_in(table: sa.Table) -> sa.Delete:
    return table.delete().where(table.c.id.in_(sa.bindparam("ids", expanding=True)))


def added_values(
    table: sa.Table,
    new: sa.ColumnCollection[str, t.Any],
    keys: t.Sequence[str],
    maxima: t.Sequence[str],
    greatest: t.Callable[..., sa.ColumnElement[t.Any]],
) -> dict[str, sa.ColumnElement[t.Any]]:
    """The assignments of :meth:`Dialect.add_to_rows`' update: each column the stored value
    plus ``new``'s (the row being inserted), the columns of ``maxima`` the ``greatest`` of
    the two; the primary key and ``keys`` stay."""
    fixed = set(keys) | {column.name for column in table.primary_key.columns}
    return {
        column.name: (
            greatest(column, new[column.name])
            if column.name in maxima
            else column + new[column.name]
        )
        for column in table.columns
        if column.name not in fixed
    }

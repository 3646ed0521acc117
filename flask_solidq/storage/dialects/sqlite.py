"""SQLite's :class:`~flask_solidq.storage.dialects.base.Dialect`: the minute bucket, inserts
that skip duplicates, and the fast paths on ``sqlite3``'s own connection it shares with MySQL
(:class:`~flask_solidq.storage.dialects.driver.DriverDialect`).

How its connections are set up (WAL, ``BEGIN IMMEDIATE``, this process's writer lock) is
:mod:`flask_solidq.storage.sqlite_connections`'.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from flask_solidq.storage.dialects.base import added_values
from flask_solidq.storage.dialects.base import delete_in
from flask_solidq.storage.dialects.base import insert_counted
from flask_solidq.storage.dialects.driver import DriverDialect


class SQLite(DriverDialect):
    """SQLite (see the module's docstring)."""

    name = "sqlite"
    placeholder = "?"
    #: SQLite has no row locks, and needs none: ``BEGIN IMMEDIATE`` holds the only write lock.
    claims_lock = ""
    #: This host's: a SQLite database is a file on one host, and every process that opens it
    #: reads that host's clock.
    clock: sa.TextClause | None = None

    def minutes_between(
        self, start: sa.ColumnElement[dt.datetime], end: sa.ColumnElement[dt.datetime]
    ) -> sa.ColumnElement[float]:
        """Julian days (fractional) apart, times the minutes in a day."""
        return sa.cast((sa.func.julianday(end) - sa.func.julianday(start)) * 1440, sa.Integer)

    def insert_ignoring_duplicates(
        self, connection: sa.Connection, table: sa.Table, rows: t.Sequence[t.Mapping[str, object]]
    ) -> int:
        """``ON CONFLICT DO NOTHING``, counted by its ``RETURNING``."""
        statement = sqlite.insert(table).on_conflict_do_nothing()
        return insert_counted(connection, statement, table, rows)

    def delete_by_ids(
        self, connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]
    ) -> None:
        delete_in(connection, table, ids)

    def add_to_rows(
        self,
        connection: sa.Connection,
        table: sa.Table,
        rows: t.Sequence[t.Mapping[str, object]],
        *,
        keys: t.Sequence[str],
        maxima: t.Sequence[str],
    ) -> None:
        """``ON CONFLICT DO UPDATE``; SQLite's ``max()`` of two values is its greatest."""
        statement = sqlite.insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=list(keys),
            set_=added_values(table, statement.excluded, keys, maxima, sa.func.max),
        )
        connection.execute(statement, list(rows))


#: SQLite's dialect.
DIALECT = SQLite()

"""MySQL's and MariaDB's :class:`~flask_solidq.storage.dialects.base.Dialect`: their index
hint, their delete by ids, inserts that skip duplicates, the minute bucket, and the fast paths
on PyMySQL's own connection they share with SQLite
(:class:`~flask_solidq.storage.dialects.driver.DriverDialect`).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from flask_solidq.storage.dialects.base import added_values
from flask_solidq.storage.dialects.driver import DriverDialect

#: The dialect names SQLAlchemy gives these servers.
NAMES = ("mysql", "mariadb")


# Any: a select of any columns (see flask_solidq.storage.db.for_update).
def forcing_index(query: sa.Select[t.Any], table: sa.Table, index: str) -> sa.Select[t.Any]:
    """``query`` reading ``table`` through ``index`` (``FORCE INDEX``), on these servers only:
    the hint is scoped to their dialects, so PostgreSQL and SQLite never see it, and a
    statement built once serves every engine."""
    for name in NAMES:
        query = query.with_hint(table, f"FORCE INDEX ({index})", dialect_name=name)
    return query


@functools.cache
def _delete_by_ids(table_name: str) -> sa.TextClause:
    """``DELETE`` the rows of ``table_name`` whose ids the JSON array ``:ids`` lists, joined
    from the list so the server reads the table by its primary key."""
    return sa.text(
        f"DELETE t FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS k"
        f" STRAIGHT_JOIN {table_name} AS t ON t.id = k.id"
    )


class MySQL(DriverDialect):
    """MySQL and MariaDB (see the module's docstring)."""

    name = "mysql"
    placeholder = "%s"
    #: No ``DELETE ... RETURNING`` on MySQL: the claims are read locked, then deleted.
    claims_lock = " FOR UPDATE"
    #: ``UTC_TIMESTAMP(6)``, read when its statement starts.
    clock: sa.TextClause | None = sa.text("SELECT UTC_TIMESTAMP(6)")

    def minutes_between(
        self, start: sa.ColumnElement[dt.datetime], end: sa.ColumnElement[dt.datetime]
    ) -> sa.ColumnElement[float]:
        return sa.func.timestampdiff(sa.literal_column("MINUTE"), start, end)

    def insert_ignoring_duplicates(
        self, connection: sa.Connection, table: sa.Table, rows: t.Sequence[t.Mapping[str, object]]
    ) -> int:
        """``INSERT IGNORE``; the driver's rowcount counts what was inserted."""
        statement = mysql.insert(table).prefix_with("IGNORE")
        return int(connection.execute(statement, rows[0] if len(rows) == 1 else rows).rowcount)

    def add_to_rows(
        self,
        connection: sa.Connection,
        table: sa.Table,
        rows: t.Sequence[t.Mapping[str, object]],
        *,
        keys: t.Sequence[str],
        maxima: t.Sequence[str],
    ) -> None:
        """``ON DUPLICATE KEY UPDATE`` (``keys`` is the table's one unique key but its
        primary key)."""
        statement = mysql.insert(table)
        statement = statement.on_duplicate_key_update(
            added_values(table, statement.inserted, keys, maxima, sa.func.greatest)
        )
        connection.execute(statement, list(rows))

    def delete_by_ids(
        self, connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]
    ) -> None:
        """As a join of the ids, passed as one JSON array through ``JSON_TABLE``, with the
        table, which reads the table by its primary key whatever its statistics say. When
        InnoDB's statistics say a table holds a row or so (a ready table drained as fast as
        it fills), MariaDB 10.11 plans ``id IN`` of 3 or more ids as a full scan, and a
        scanning ``DELETE`` locks every row it passes, those other claims hold too: two
        claims deleting rows of their own waited for each other, and 12 workers beside two
        bulk enqueuers deadlocked 51-117 times a run (``bench/deadlock_stress.py``), none
        once joined. (MySQL 8 and MariaDB 10.6, the oldest supported, have ``JSON_TABLE``.)
        """
        connection.execute(_delete_by_ids(table.name), {"ids": json.dumps(list(ids))})


#: MySQL's and MariaDB's dialect.
DIALECT = MySQL()

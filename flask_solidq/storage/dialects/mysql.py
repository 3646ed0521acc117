"""What MySQL and MariaDB need that SQLAlchemy Core doesn't render for them on its own.

The statements and hints that only these two take, in one place beside
:mod:`~flask_solidq.storage.dialects.postgres` and :mod:`~flask_solidq.storage.dialects.sqlite`;
:mod:`flask_solidq.storage.db` picks
between them, so the operations never test the dialect.
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

import sqlalchemy as sa

#: The dialect names SQLAlchemy gives these servers.
NAMES = ("mysql", "mariadb")


def forcing_index(query: sa.Select[t.Any], table: sa.Table, index: str) -> sa.Select[t.Any]:
    """``query`` reading ``table`` through ``index`` (``FORCE INDEX``), on these servers only:
    the hint is scoped to their dialects, so PostgreSQL and SQLite never see it."""
    for name in NAMES:
        query = query.with_hint(table, f"FORCE INDEX ({index})", dialect_name=name)
    return query


@functools.cache
def delete_by_ids(table_name: str) -> sa.TextClause:
    """``DELETE`` the rows of ``table_name`` whose ids the JSON array ``:ids`` lists, joined
    from the list so the server reads the table by its primary key (see
    :func:`flask_solidq.storage.db.delete_by_ids`)."""
    return sa.text(
        f"DELETE t FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id BIGINT PATH '$')) AS k"
        f" STRAIGHT_JOIN {table_name} AS t ON t.id = k.id"
    )


def minutes_between(
    start: sa.ColumnElement[dt.datetime], end: sa.ColumnElement[dt.datetime]
) -> sa.ColumnElement[t.Any]:
    """Whole minutes from ``start`` to ``end``."""
    return sa.func.timestampdiff(sa.literal_column("MINUTE"), start, end)

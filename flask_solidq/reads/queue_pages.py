"""A page of the queues for the dashboard's overview: the queues after a keyset cursor (the
last name of the previous page), in the order of their names, optionally only those whose name
contains a text; then the figures of those queues alone
(:func:`~flask_solidq.reads.queue_figures.queue_counts` with ``names``).

A queue is listed while it has jobs stored or is paused. Without a search, the page's names
are found by a loose index scan of the jobs' ``(queue_name, finished_at)`` and the pauses'
names (each name the least past the last, one statement of two index seeks, as many as the
page has rows), so the page costs the same at the 20,000th queue as at the first, and a queue
with a million jobs costs one seek. A search (case-insensitive, anywhere in the name) can't
seek: it reads that index past the cursor until it has a page, so its cost follows the jobs
stored, as ``SELECT DISTINCT`` does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import sqlalchemy as sa

from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PAUSES
from flask_solidq.reads import queue_figures
from flask_solidq.reads import throughput

#: Queues per page of the overview.
PAGE_SIZE = 50
#: The longest text the queue search takes (a queue's name has at most 255 characters).
MAX_QUERY = 255


@dataclasses.dataclass(frozen=True)
class QueuePage:
    """A page of queues with their figures (``finished``: those of the last hour)."""

    queues: list[queue_figures.QueueCounts]
    #: The keyset cursor of the next page (``after``), or None on the last one.
    next_after: str | None


def queue_page(
    connection: sa.Connection,
    now: dt.datetime,
    finished_since: dt.datetime,
    *,
    after: str | None = None,
    text: str | None = None,
    limit: int = PAGE_SIZE,
) -> QueuePage:
    """Up to ``limit`` queues named after ``after`` (and containing ``text``), with their
    jobs per state and those finished from ``finished_since``."""
    names = page_names(connection, after=after, text=text, limit=limit + 1)
    shown, more = names[:limit], len(names) > limit
    finished = throughput.finished_by_queue(connection, finished_since, shown)
    counts = queue_figures.queue_counts(connection, now, names=shown, finished=finished)
    return QueuePage(counts, shown[-1] if more and shown else None)


def page_names(
    connection: sa.Connection, *, after: str | None, text: str | None, limit: int
) -> list[str]:
    """The first ``limit`` queue names after ``after`` (containing ``text``), in the
    database's order of names: the order the cursor's ``>`` follows."""
    if text is None:
        return walk_names(connection, after, limit)
    # Each part its own derived table: SQLite allows no LIMIT in a UNION's parts.
    parts = [
        _matching(JOBS.c.queue_name, after, text, limit).distinct().subquery(),
        _matching(PAUSES.c.queue_name, after, text, limit).subquery(),
    ]
    both = sa.union(*(sa.select(part.c.name) for part in parts)).subquery("names")
    statement = sa.select(both.c.name).order_by(both.c.name).limit(limit)
    return list(connection.scalars(statement))


def walk_names(connection: sa.Connection, after: str | None, limit: int) -> list[str]:
    """The ``limit`` least queue names past ``after`` (any with None), of the jobs or the
    pauses: each the
    least past the last, a seek along each table's index on the name (a loose index scan, as
    :func:`flask_solidq.reads.search.queue_names` does). Not one recursive statement: in one,
    MariaDB reads the index from its start at every step (bench/many_queues.py)."""
    names: list[str] = []
    last = after
    while len(names) < limit:
        name = connection.scalar(_least_past(last))
        if name is None:
            break
        names.append(name)
        last = name
    return names


def _least_past(last: str | None) -> sa.Select[str]:
    """The least queue name past ``last`` (any with None) among the jobs and the pauses."""
    parts = []
    for column in (JOBS.c.queue_name, PAUSES.c.queue_name):
        least = sa.select(sa.func.min(column).label("name"))
        parts.append(least if last is None else least.where(column > last))
    both = sa.union_all(*parts).subquery("least")
    return sa.select(sa.func.min(both.c.name))


def _matching(column: sa.Column[str], after: str | None, text: str, limit: int) -> sa.Select[str]:
    """The first ``limit`` values of ``column`` past ``after`` containing ``text``."""
    statement = sa.select(column.label("name")).where(column.icontains(text, autoescape=True))
    if after is not None:
        statement = statement.where(column > after)
    return statement.order_by(column).limit(limit)

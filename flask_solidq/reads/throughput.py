"""Jobs finished per minute over a recent window: the dashboard overview's chart and its
"finished in the last hour" counts per queue, from one grouped query.

The query reads the jobs finished since the window's start along ``finished_at``'s index and
groups them by queue and by minute, so its cost follows the jobs finished in the window, never
the table's size. Each database names "minutes since" its own way; all three give the whole
minutes elapsed from the window's start.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import JOBS
from flask_solidq.storage import db


@dataclasses.dataclass(frozen=True)
class Throughput:
    """Jobs finished from ``since``: per minute (``per_minute[0]`` is the window's first
    minute) and per queue."""

    since: dt.datetime
    per_minute: list[int]
    per_queue: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.per_minute)


def finished_per_minute(
    connection: sa.Connection, since: dt.datetime, minutes: int = 60, *, by_queue: bool = True
) -> Throughput:
    """Jobs finished in the ``minutes`` minutes from ``since``, counted per minute and, unless
    ``by_queue`` is False (``per_queue`` is then empty: see :func:`finished_by_queue`), per
    queue. A job stamped after the window (a clock ahead) counts in its last minute."""
    since_param = sa.bindparam("since", since, type_=JOBS.c.finished_at.type)
    minute = db.minutes_between(connection, since_param, JOBS.c.finished_at).label("minute")
    if not by_queue:
        return Throughput(since, _per_minute(connection, since_param, minute, minutes), {})
    if db.counts_from_index_alone(connection):
        return _from_two_indexes(connection, since, since_param, minute, minutes)
    statement = (
        sa.select(JOBS.c.queue_name, minute, sa.func.count())
        .where(JOBS.c.finished_at >= since_param)
        .group_by(JOBS.c.queue_name, minute)
    )
    per_minute = [0] * minutes
    per_queue: dict[str, int] = {}
    for queue_name, index, count in connection.execute(statement):
        per_minute[_slot(index, minutes)] += int(count)
        per_queue[queue_name] = per_queue.get(queue_name, 0) + int(count)
    return Throughput(since, per_minute, per_queue)


def _from_two_indexes(
    connection: sa.Connection,
    since: dt.datetime,
    since_param: sa.BindParameter[dt.datetime],
    minute: sa.Label[float],
    minutes: int,
) -> Throughput:
    """The same figures where an index answers a count alone (MariaDB, SQLite): per minute
    along ``finished_at``'s index, per queue along ``(queue_name, finished_at)``, one range
    per queue (the names found one index seek each). Grouping by both from one index made
    MariaDB read each finished job's row for its queue, twice as slow at a million jobs
    (bench/dashboard.py)."""
    per_minute = _per_minute(connection, since_param, minute, minutes)
    names = _queue_names(connection)
    per_queue = (
        connection.execute(
            sa.select(JOBS.c.queue_name, sa.func.count())
            .where(JOBS.c.queue_name.in_(names), JOBS.c.finished_at >= since_param)
            .group_by(JOBS.c.queue_name)
        ).all()
        if names
        else []
    )
    return Throughput(since, per_minute, {name: int(count) for name, count in per_queue})


def _per_minute(
    connection: sa.Connection,
    since_param: sa.BindParameter[dt.datetime],
    minute: sa.Label[float],
    minutes: int,
) -> list[int]:
    """Jobs finished per minute of the window, every queue, along ``finished_at``'s index."""
    per_minute = [0] * minutes
    statement = (
        sa.select(minute, sa.func.count()).where(JOBS.c.finished_at >= since_param).group_by(minute)
    )
    for index, count in connection.execute(statement):
        per_minute[_slot(index, minutes)] += int(count)
    return per_minute


def finished_by_queue(
    connection: sa.Connection, since: dt.datetime, names: t.Collection[str]
) -> dict[str, int]:
    """Jobs of the queues ``names`` finished from ``since``: one range of
    ``(queue_name, finished_at)``'s index per queue, so the cost follows these queues' jobs
    of the window, whatever the number of queues."""
    if not names:
        return {}
    statement = (
        sa.select(JOBS.c.queue_name, sa.func.count())
        .where(JOBS.c.queue_name.in_(names), JOBS.c.finished_at >= since)
        .group_by(JOBS.c.queue_name)
    )
    return {name: int(count) for name, count in connection.execute(statement)}


def finished_since(connection: sa.Connection, since: dt.datetime) -> int:
    """Jobs of every queue finished from ``since``, along ``finished_at``'s index."""
    statement = sa.select(sa.func.count()).where(JOBS.c.finished_at >= since)
    return int(connection.scalar(statement) or 0)


def _slot(index: t.SupportsInt | None, minutes: int) -> int:
    """A minute's place in the window; a stamp after the window counts in its last minute."""
    return min(max(int(index or 0), 0), minutes - 1)


def _queue_names(connection: sa.Connection) -> list[str]:
    """Every queue name the jobs have, one seek along ``(queue_name, finished_at)`` each (a
    loose index scan: queues are named in the app's code, so they stay few)."""
    names: list[str] = []
    while True:
        query = sa.select(sa.func.min(JOBS.c.queue_name))
        if names:
            query = query.where(JOBS.c.queue_name > names[-1])
        name = connection.scalar(query)
        if name is None:
            return names
        names.append(name)

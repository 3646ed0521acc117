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

import sqlalchemy as sa

from flask_solidq import db
from flask_solidq.models.tables import JOBS


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
    connection: sa.Connection, since: dt.datetime, minutes: int = 60
) -> Throughput:
    """Jobs finished in the ``minutes`` minutes from ``since``, counted per minute and per
    queue. A job stamped after the window (a clock ahead) counts in its last minute."""
    since_param = sa.bindparam("since", since, type_=JOBS.c.finished_at.type)
    minute = db.minutes_between(connection, since_param, JOBS.c.finished_at).label("minute")
    statement = (
        sa.select(JOBS.c.queue_name, minute, sa.func.count())
        .where(JOBS.c.finished_at >= since_param)
        .group_by(JOBS.c.queue_name, minute)
    )
    per_minute = [0] * minutes
    per_queue: dict[str, int] = {}
    for queue_name, index, count in connection.execute(statement):
        per_minute[min(max(int(index or 0), 0), minutes - 1)] += int(count)
        per_queue[queue_name] = per_queue.get(queue_name, 0) + int(count)
    return Throughput(since, per_minute, per_queue)

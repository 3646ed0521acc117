"""Jobs finished and failed per slot of time (a minute, a quarter hour), for the dashboard's
charts: of every queue, or of one.

Both counts are grouped queries over a bounded window. Finished jobs are read along an index
on ``finished_at`` (``(queue_name, finished_at)`` for one queue), so their cost follows the
jobs finished in the window, never the table's size. Failed ones are the failed executions
stamped in the window, joined to their jobs for the queue: a failed job that was retried or
discarded since no longer counts (it is no longer failed). ``solidq_failed_executions`` has no
index on ``created_at``: the table holds the jobs waiting for a human, which stay few.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import db
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS


@dataclasses.dataclass(frozen=True)
class Activity:
    """Per slot (``finished[0]`` is the slot starting at ``since``): jobs finished and
    failed."""

    since: dt.datetime
    slot: dt.timedelta
    finished: list[int]
    failed: list[int]


def activity(
    connection: sa.Connection,
    since: dt.datetime,
    *,
    slots: int,
    slot_minutes: int = 1,
    queue: str | None = None,
) -> Activity:
    """Jobs finished and failed in ``slots`` slots of ``slot_minutes`` from ``since``, of
    ``queue`` (every queue when None). A time stamped after the window (a clock ahead)
    counts in its last slot."""
    window = Window(since, slots, slot_minutes)
    return Activity(
        since=since,
        slot=dt.timedelta(minutes=slot_minutes),
        finished=window.count(connection, JOBS.c.finished_at, queue),
        failed=failed(connection, window, queue),
    )


@dataclasses.dataclass(frozen=True)
class Window:
    """``slots`` slots of ``slot_minutes`` from ``since``."""

    since: dt.datetime
    slots: int
    slot_minutes: int = 1

    def count(
        self, connection: sa.Connection, stamp: sa.Column[t.Any], queue: str | None
    ) -> list[int]:
        """Rows stamped in the window (or after it: in its last slot), counted per slot."""
        query = _counts(connection, stamp, self.since, queue)
        counts = [0] * self.slots
        for minute, count in connection.execute(query):
            index = min(max(int(minute or 0), 0) // self.slot_minutes, self.slots - 1)
            counts[index] += int(count)
        return counts


def failed(connection: sa.Connection, window: Window, queue: str | None = None) -> list[int]:
    """Jobs failed per slot of ``window`` (still failed: a retried job no longer counts)."""
    return window.count(connection, FAILED.c.created_at, queue)


def _counts(
    connection: sa.Connection, stamp: sa.Column[t.Any], since: dt.datetime, queue: str | None
) -> sa.Select[t.Any]:
    """Rows stamped since ``since``, counted per whole minute from it; a failed execution's
    row is joined to its job's, which has the queue."""
    since_param = sa.bindparam("since", since, type_=stamp.type)
    minute = db.minutes_between(connection, since_param, stamp).label("minute")
    query = sa.select(minute, sa.func.count()).where(stamp >= since_param).group_by(minute)
    if stamp.table is FAILED:
        query = query.select_from(FAILED.join(JOBS, JOBS.c.id == FAILED.c.job_id))
    if queue is not None:
        query = query.where(JOBS.c.queue_name == queue)
    return query

"""Jobs finished and failed per slot of time (a minute, a quarter hour), for the dashboard's
charts: of every queue, or of one.

Both counts are grouped queries over a bounded window. Finished jobs are read along an index
on ``finished_at`` (``(queue_name, finished_at)`` for one queue), so their cost follows the
jobs finished in the window, never the table's size. Failed ones are the failed executions
stamped in the window (of one queue: their jobs' queue, looked up by primary key): a failed
job that was retried or discarded since no longer counts (it is no longer failed).
``solidq_failed_executions`` has no index on ``created_at``: the table holds the jobs waiting
for a human, which stay few.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.storage import db


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


def activities(
    connection: sa.Connection,
    until: dt.datetime,
    shapes: t.Sequence[tuple[int, int]],
    *,
    queue: str | None = None,
) -> list[Activity]:
    """:func:`activity` of several windows that all end at ``until``, one per ``(slots,
    slot_minutes)`` of ``shapes``: a queue's page shows its last hour and its last day. The
    failures, and where an index answers a grouped count alone the finished jobs too, are
    counted once per minute over the longest window and summed into each (no second pass
    over the hour's rows); on PostgreSQL each window's finished jobs are counted per slot
    along the index (:meth:`flask_solidq.storage.dialects.base.Dialect.counts_per_slot`).
    ``until`` is a whole minute, as every window is whole minutes."""
    minutes = max(slots * slot_minutes for slots, slot_minutes in shapes)
    window = Window(until - dt.timedelta(minutes=minutes), minutes)
    failures = failed(connection, window, queue)
    per_minute = (
        None
        if _counted_by_ranges(connection)
        else window.count(connection, JOBS.c.finished_at, queue)
    )
    found = []
    for slots, slot_minutes in shapes:
        span = slots * slot_minutes
        since = until - dt.timedelta(minutes=span)
        finished = (
            _slots(per_minute[-span:], slot_minutes)
            if per_minute is not None
            else Window(since, slots, slot_minutes).count(connection, JOBS.c.finished_at, queue)
        )
        found.append(
            Activity(
                since=since,
                slot=dt.timedelta(minutes=slot_minutes),
                finished=finished,
                failed=_slots(failures[-span:], slot_minutes),
            )
        )
    return found


def _slots(per_minute: list[int], slot_minutes: int) -> list[int]:
    return [
        sum(per_minute[start : start + slot_minutes])
        for start in range(0, len(per_minute), slot_minutes)
    ]


@dataclasses.dataclass(frozen=True)
class Window:
    """``slots`` slots of ``slot_minutes`` from ``since``."""

    since: dt.datetime
    slots: int
    slot_minutes: int = 1

    def count(
        self, connection: sa.Connection, stamp: sa.Column[dt.datetime], queue: str | None
    ) -> list[int]:
        """Rows stamped in the window (or after it: in its last slot), counted per slot."""
        if stamp is JOBS.c.finished_at:
            where = [] if queue is None else [JOBS.c.queue_name == queue]
            by_ranges = db.dialect(connection).counts_per_slot(
                stamp, self.since, self.slots, self.slot_minutes, where
            )
            if by_ranges is not None:
                return [int(count) for _slot, count in connection.execute(by_ranges)]
        per_minute = _counts(connection, stamp, self.since, queue)
        counts = [0] * self.slots
        for minute, count in connection.execute(per_minute):
            index = min(max(int(minute or 0), 0) // self.slot_minutes, self.slots - 1)
            counts[index] += int(count)
        return counts


def _counted_by_ranges(connection: sa.Connection) -> bool:
    """Whether finished jobs are counted one index range per slot
    (:meth:`flask_solidq.storage.dialects.base.Dialect.counts_per_slot`): where a count visits
    every row anyway (PostgreSQL); where an index answers alone, the grouped count reads only
    the index."""
    return not db.counts_from_index_alone(connection)


def failed(connection: sa.Connection, window: Window, queue: str | None = None) -> list[int]:
    """Jobs failed per slot of ``window`` (still failed: a retried job no longer counts)."""
    return window.count(connection, FAILED.c.created_at, queue)


def _counts(
    connection: sa.Connection, stamp: sa.Column[dt.datetime], since: dt.datetime, queue: str | None
) -> sa.Select[float, int]:
    """Rows stamped since ``since``, counted per whole minute from it. A failed execution's
    queue is its job's, looked up along the jobs' primary key and only for one queue: every
    failed execution has its job (a foreign key), and a join let PostgreSQL scan a million
    finished jobs to count the failures of the last hour (bench/dashboard.py)."""
    since_param = sa.bindparam("since", since, type_=stamp.type)
    minute = db.minutes_between(connection, since_param, stamp).label("minute")
    query = sa.select(minute, sa.func.count()).where(stamp >= since_param).group_by(minute)
    if queue is not None:
        query = query.where(_queue_of(stamp.table) == queue)
    return query


def _queue_of(table: sa.FromClause) -> sa.ColumnElement[str]:
    """The queue of a row of ``table``: the jobs' own column, or a failed execution's job's."""
    if table is FAILED:
        return sa.select(JOBS.c.queue_name).where(JOBS.c.id == FAILED.c.job_id).scalar_subquery()
    return JOBS.c.queue_name

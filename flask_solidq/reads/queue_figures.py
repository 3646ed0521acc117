"""The figures of the queues that ``flask solidq status``, the dashboard and the metrics show:
jobs per queue and state, the paused queues, the latest failures, the blocked jobs per
concurrency key, the semaphores and the coalescing job definitions. Read-only; pausing and
resuming are :mod:`flask_solidq.operations.queues`.

The figures come from the execution tables, one grouped query per table, so their cost
doesn't grow with the number of queues.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.controls.rate_limit.budgets import DEFERRED_KEY
from flask_solidq.definitions.stored_errors import parse_error
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PAUSES
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.models.tables import SEMAPHORES
from flask_solidq.timing import utcnow


@dataclasses.dataclass(frozen=True)
class QueueCounts:
    """How many jobs of one queue are in each state, how long its oldest ready job has
    waited (``latency``, in seconds; 0 with none ready) and whether it is paused."""

    queue_name: str
    ready: int = 0
    #: Scheduled executions, deferred ones included.
    scheduled: int = 0
    #: Of the scheduled ones, those a rate limit deferred.
    deferred: int = 0
    claimed: int = 0
    blocked: int = 0
    failed: int = 0
    finished: int = 0
    latency: float = 0.0
    paused: bool = False


@dataclasses.dataclass(frozen=True)
class FailedJob:
    """A failed job as status lists it: the error parsed out of its JSON."""

    job_id: int
    active_job_id: str | None
    class_name: str
    queue_name: str
    error_class: str
    message: str
    failed_at: dt.datetime


class BlockedCount(t.NamedTuple):
    """How many jobs wait on one concurrency key."""

    concurrency_key: str
    size: int


class SemaphoreState(t.NamedTuple):
    """A concurrency key's semaphore: its free slots and when its lease runs out."""

    key: str
    value: int
    expires_at: dt.datetime


def paused_queues(connection: sa.Connection, names: t.Collection[str] | None = None) -> set[str]:
    """The names of the paused queues (of ``names`` only, when given)."""
    statement = sa.select(PAUSES.c.queue_name)
    if names is not None:
        statement = statement.where(PAUSES.c.queue_name.in_(names))
    return set(connection.scalars(statement))


def queue_counts(
    connection: sa.Connection,
    now: dt.datetime | None = None,
    *,
    names: t.Sequence[str] | None = None,
    finished: t.Mapping[str, int] | None = None,
    deferred: t.Mapping[str, int] | None = None,
    failed: t.Mapping[str, int] | None = None,
) -> list[QueueCounts]:
    """Every queue that has jobs or is paused, by name, with its jobs counted per state.

    :param now: the time latency is measured to; the current time by default.
    :param names: only these queues, one row each in this order (a page of the dashboard's
        overview, the largest queues of the metrics): each grouped query counts their rows
        alone, so the figures cost what these queues hold, not what every queue does.
    :param finished: the finished jobs per queue when the caller counted them already (the
        dashboard counts those of the last hour, an index range, where counting every
        finished job of a big queue reads them all); otherwise every finished job counts.
    :param deferred: the deferred jobs per queue, and ``failed`` the failed ones, when the
        caller counted them already along with other figures (the metrics do); otherwise
        they are counted here.
    """
    now = now or utcnow()
    ready, oldest_ready = _ready_by_queue(connection, names)
    scheduled = _count_by_queue(connection, SCHEDULED.c.queue_name, names=names)
    if deferred is None:
        deferred = _count_by_queue(
            connection, SCHEDULED.c.queue_name, DEFERRED_KEY.is_not(None), names=names
        )
    claimed = _count_by_queue(connection, JOBS.c.queue_name, join=CLAIMED, names=names)
    blocked = _count_by_queue(connection, BLOCKED.c.queue_name, names=names)
    if failed is None:
        failed = _count_by_queue(connection, JOBS.c.queue_name, join=FAILED, names=names)
    if finished is None:
        finished = _count_by_queue(
            connection, JOBS.c.queue_name, JOBS.c.finished_at.is_not(None), names=names
        )
    paused = paused_queues(connection, names)
    listed = (
        sorted(paused.union(ready, scheduled, claimed, blocked, failed, finished))
        if names is None
        else names
    )
    return [
        QueueCounts(
            queue_name=name,
            ready=ready.get(name, 0),
            scheduled=scheduled.get(name, 0),
            deferred=deferred.get(name, 0),
            claimed=claimed.get(name, 0),
            blocked=blocked.get(name, 0),
            failed=failed.get(name, 0),
            finished=finished.get(name, 0),
            latency=_seconds_since(oldest_ready.get(name), now),
            paused=name in paused,
        )
        for name in listed
    ]


def _count_by_queue(
    connection: sa.Connection,
    queue_column: sa.Column[str],
    *where: sa.ColumnElement[bool],
    join: sa.Table | None = None,
    names: t.Collection[str] | None = None,
) -> dict[str, int]:
    """Rows per queue name of ``queue_column``'s table (of the queues ``names`` only, when
    given); claimed and failed executions copy no queue name, so each row of ``join`` looks
    its job's up, along the jobs' primary key: the cost follows the executions counted, never
    the jobs table (a join let PostgreSQL's planner scan a million finished jobs to count
    twenty thousand failed ones)."""
    if join is not None:
        queue_name = (
            sa.select(JOBS.c.queue_name).where(JOBS.c.id == join.c.job_id).scalar_subquery()
        )
        if names is not None:
            where = (queue_name.in_(names), *where)
        statement = (
            sa.select(queue_name.label("queue_name"), sa.func.count())
            .select_from(join)
            .where(*where)
            .group_by(sa.literal_column("queue_name"))
        )
    else:
        if names is not None:
            # First: MariaDB tests the conditions in the order written, and the deferred
            # jobs' condition looks each row's job up.
            where = (queue_column.in_(names), *where)
        statement = (
            sa.select(queue_column, sa.func.count())
            .select_from(queue_column.table)
            .where(*where)
            .group_by(queue_column)
        )
    return {name: int(size) for name, size in connection.execute(statement)}


def _ready_by_queue(
    connection: sa.Connection, names: t.Collection[str] | None = None
) -> tuple[dict[str, int], dict[str, dt.datetime]]:
    """Ready executions per queue, and the oldest one's time (the latency), in one pass."""
    statement = sa.select(
        READY.c.queue_name, sa.func.count(), sa.func.min(READY.c.created_at)
    ).group_by(READY.c.queue_name)
    if names is not None:
        statement = statement.where(READY.c.queue_name.in_(names))
    rows = connection.execute(statement).all()
    return (
        {name: int(size) for name, size, _ in rows},
        {name: oldest for name, _, oldest in rows},
    )


def _seconds_since(moment: dt.datetime | None, now: dt.datetime) -> float:
    if moment is None:
        return 0.0
    return max(0.0, (now - moment).total_seconds())


def failed_jobs(connection: sa.Connection, limit: int = 20) -> list[FailedJob]:
    """The ``limit`` latest failed jobs, newest first."""
    statement = (
        sa.select(
            JOBS.c.id,
            JOBS.c.active_job_id,
            JOBS.c.class_name,
            JOBS.c.queue_name,
            FAILED.c.error,
            FAILED.c.created_at,
        )
        .select_from(FAILED.join(JOBS, JOBS.c.id == FAILED.c.job_id))
        .order_by(FAILED.c.created_at.desc(), FAILED.c.id.desc())
        .limit(limit)
    )
    return [_failed_job(row) for row in connection.execute(statement).mappings()]


def _failed_job(row: sa.RowMapping) -> FailedJob:
    error_class, message = parse_error(row["error"])
    return FailedJob(
        job_id=row["id"],
        active_job_id=row["active_job_id"],
        class_name=row["class_name"],
        queue_name=row["queue_name"],
        error_class=error_class,
        message=message,
        failed_at=row["created_at"],
    )


def blocked_summary(connection: sa.Connection) -> list[BlockedCount]:
    """How many jobs wait on each concurrency key, the most crowded first."""
    size = sa.func.count().label("size")
    statement = (
        sa.select(BLOCKED.c.concurrency_key, size)
        .group_by(BLOCKED.c.concurrency_key)
        .order_by(size.desc(), BLOCKED.c.concurrency_key)
    )
    return [BlockedCount(key, int(count)) for key, count in connection.execute(statement)]


def semaphores(connection: sa.Connection) -> list[SemaphoreState]:
    """Every concurrency key's semaphore, by key."""
    statement = sa.select(SEMAPHORES.c.key, SEMAPHORES.c.value, SEMAPHORES.c.expires_at).order_by(
        SEMAPHORES.c.key
    )
    return [SemaphoreState(*row) for row in connection.execute(statement)]


class CoalesceSummary(t.NamedTuple):
    """One coalescing job definition's figures: keys with an open job, and the calls of
    collecting jobs still waiting to run."""

    class_name: str
    open_keys: int
    waiting_calls: int
    oldest_call_at: dt.datetime | None


def coalesce_summary(connection: sa.Connection) -> list[CoalesceSummary]:
    """Per job name: its open coalesce keys, and its waiting collected calls with the oldest
    one's time (``CoalescedCall.waiting()``), by name. Two grouped queries, each looking a
    row's job name up along the jobs' primary key: joined, SQLite scanned the million
    finished jobs to probe the (empty) keys (bench/dashboard.py)."""
    key_job = _job_name_of(COALESCE_KEYS.c.job_id)
    open_keys: dict[str, int] = dict(
        connection.execute(
            sa.select(key_job, sa.func.count())
            .select_from(COALESCE_KEYS)
            .group_by(sa.literal_column("class_name"))
        ).all()
    )
    waiting = models.CoalescedCall.waiting().subquery()
    calls = {
        name: (int(count), oldest)
        for name, count, oldest in connection.execute(
            sa.select(
                _job_name_of(waiting.c.job_id), sa.func.count(), sa.func.min(waiting.c.created_at)
            )
            .select_from(waiting)
            .group_by(sa.literal_column("class_name"))
        )
    }
    return [
        CoalesceSummary(name, int(open_keys.get(name, 0)), *calls.get(name, (0, None)))
        for name in sorted(set(open_keys) | set(calls))
    ]


def _job_name_of(job_id: sa.ColumnElement[int]) -> sa.Label[str]:
    """The name of the job ``job_id`` is, looked up by primary key, labelled ``class_name``."""
    return (
        sa.select(JOBS.c.class_name)
        .where(JOBS.c.id == job_id)
        .scalar_subquery()
        .label("class_name")
    )

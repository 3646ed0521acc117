"""The queues the metrics label, and the figures of the rest summed as one.

``/metrics`` labels at most ``SOLIDQ_METRICS_MAX_QUEUES`` queues (each labelled queue is a
time series Prometheus keeps), the largest: those with the most jobs its gauges count (waiting
in any state, failed, or finished in the last hour; then paused queues without jobs, if there
is room). They are ranked in one grouped statement that keeps the first ``limit``
(:func:`largest`); the rest are summed by ungrouped counts that leave those
queues out (:func:`the_rest`), so the metrics read every queue once and return a bounded
number of rows, whatever the number of queues.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import db
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PAUSES
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.reads import queue_figures
from flask_solidq.reads import throughput

#: The ``queue`` label of the figures summed over every queue not labelled.
OTHER = "other"


@dataclasses.dataclass(frozen=True)
class Rest:
    """The queues not labelled, summed: their jobs per state (``finished``: in the last
    hour; ``latency``: the oldest ready job's wait among them), how many of them are
    paused, and their failed executions of the last hour."""

    counts: queue_figures.QueueCounts
    paused: int
    failed_last_hour: int


def largest(connection: sa.Connection, since: dt.datetime, limit: int) -> list[str]:
    """The ``limit`` queues with the most jobs waiting, failed, or finished from ``since``,
    the largest first (ties by name); then, if there is room, the paused queues that have
    none, by name."""
    if db.counts_from_index_alone(connection):
        ranking = _ranked_by_jobs(since)
    else:
        sizes = _sizes(since)
        ranking = (
            sa.select(sizes.c.queue_name)
            .group_by(sizes.c.queue_name)
            .order_by(sa.func.sum(sizes.c.size).desc(), sizes.c.queue_name)
        )
    named = list(connection.scalars(ranking.limit(limit)))
    if len(named) < limit:
        paused = (
            sa.select(PAUSES.c.queue_name)
            .where(PAUSES.c.queue_name.not_in(named))
            .order_by(PAUSES.c.queue_name)
            .limit(limit - len(named))
        )
        named.extend(connection.scalars(paused))
    return named


def _sizes(since: dt.datetime) -> sa.Subquery:
    """Per queue, the rows of each execution table and its jobs finished from ``since`` (a
    row per queue and table): their cost follows the jobs waiting and those of the last
    hour, never the finished jobs kept."""
    parts: list[sa.Select[str, int]] = [
        _grouped(column) for column in (READY.c.queue_name, SCHEDULED.c.queue_name)
    ]
    parts.append(_grouped(BLOCKED.c.queue_name))
    parts.extend(_grouped(_job_queue(table), table) for table in (CLAIMED, FAILED))
    parts.append(_grouped(JOBS.c.queue_name).where(JOBS.c.finished_at >= since))
    return sa.union_all(*parts).subquery("sizes")


def _ranked_by_jobs(since: dt.datetime) -> sa.Select[str]:
    """The same ranking read from the jobs alone where an index answers a count (MariaDB,
    SQLite): a job not finished is in one execution table, so the unfinished jobs and those
    finished from ``since`` are counted along ``(queue_name, finished_at)``, in the index's
    order, with no temporary table. Summing the execution tables' groups there made MariaDB
    group 80,000 rows in a temporary table on disk: 550 ms at 20,000 queues, against 20."""
    finished_at = JOBS.c.finished_at
    return (
        sa.select(JOBS.c.queue_name)
        .where(sa.or_(finished_at.is_(None), finished_at >= since))
        .group_by(JOBS.c.queue_name)
        .order_by(sa.func.count().desc(), JOBS.c.queue_name)
    )


def _grouped(
    queue_name: sa.ColumnElement[str], table: sa.Table | None = None
) -> sa.Select[str, int]:
    statement = sa.select(queue_name.label("queue_name"), sa.func.count().label("size"))
    if table is not None:
        statement = statement.select_from(table)
    return statement.group_by(sa.literal_column("queue_name"))


def _job_queue(execution: sa.Table) -> sa.ScalarSelect[str]:
    """The queue of an execution that copies none (claimed, failed): its job's, by primary
    key."""
    return sa.select(JOBS.c.queue_name).where(JOBS.c.id == execution.c.job_id).scalar_subquery()


def the_rest(
    connection: sa.Connection,
    now: dt.datetime,
    since: dt.datetime,
    named: list[str],
    *,
    deferred: int,
    named_finished: t.Mapping[str, int],
) -> Rest:
    """Every queue but ``named``, summed. ``deferred`` is their deferred jobs, counted by the
    caller with the rate limits' figures; ``named_finished`` the jobs of the ``named`` queues
    finished from ``since``."""
    ready, oldest = connection.execute(
        sa.select(sa.func.count(), sa.func.min(READY.c.created_at)).where(
            READY.c.queue_name.not_in(named)
        )
    ).one()
    failed, failed_recently = _failed(connection, since, named)
    counts = queue_figures.QueueCounts(
        queue_name=OTHER,
        ready=int(ready),
        scheduled=_count(connection, SCHEDULED.c.queue_name.not_in(named)),
        deferred=deferred,
        claimed=_count(connection, _job_queue(CLAIMED).not_in(named), CLAIMED),
        blocked=_count(connection, BLOCKED.c.queue_name.not_in(named)),
        failed=failed,
        finished=throughput.finished_since(connection, since) - sum(named_finished.values()),
        latency=max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0,
    )
    paused = _count(connection, PAUSES.c.queue_name.not_in(named))
    return Rest(counts, paused, failed_recently)


def _count(
    connection: sa.Connection, where: sa.ColumnElement[bool], table: sa.Table | None = None
) -> int:
    statement = sa.select(sa.func.count()).where(where)
    if table is not None:
        statement = statement.select_from(table)
    return int(connection.scalar(statement) or 0)


def _failed(connection: sa.Connection, since: dt.datetime, named: list[str]) -> tuple[int, int]:
    """The failed executions of the queues not ``named``: all, and those created from
    ``since``."""
    recent = sa.func.sum(sa.case((FAILED.c.created_at >= since, 1), else_=0))
    statement = (
        sa.select(sa.func.count(), recent)
        .select_from(FAILED)
        .where(_job_queue(FAILED).not_in(named))
    )
    size, recently = connection.execute(statement).one()
    return int(size), int(recently or 0)

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

from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PAUSES
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.reads import queue_figures
from flask_solidq.reads import queue_pages
from flask_solidq.reads import throughput

#: The ``queue`` label of the figures summed over every queue not labelled.
OTHER = "other"


@dataclasses.dataclass(frozen=True)
class Ranking:
    """The queues to label, and whether they are every queue there is (then none is left
    for :data:`OTHER`; some may hold nothing to report: only finished jobs of long ago)."""

    names: list[str]
    every: bool


@dataclasses.dataclass(frozen=True)
class Rest:
    """The queues not labelled, summed: their jobs per state (``finished``: in the last
    hour; ``latency``: the oldest ready job's wait among them), how many of them are
    paused, and their failed executions of the last hour."""

    counts: queue_figures.QueueCounts
    paused: int
    failed_last_hour: int


def largest(connection: sa.Connection, since: dt.datetime, limit: int) -> Ranking:
    """The ``limit`` queues with the most jobs waiting, failed, or finished from ``since``,
    the largest first (ties by name); then, if there is room, the paused queues that have
    none, by name.

    When there are no more than ``limit`` queues (jobs stored or paused), they are all
    labelled and nothing is ranked: the names are found by ``limit + 1`` index seeks
    (:func:`~flask_solidq.reads.queue_pages.walk_names`), whatever the number of jobs.

    A job not finished is in one execution table, so the jobs counted are those not finished
    and those finished from ``since``: one grouped read of the jobs, which the planners answer
    from ``finished_at``'s index or one scan. Summing the execution tables' groups instead
    took 4 to 25 times as long at 20,000 queues (MariaDB grouped 80,000 rows in a temporary
    table on disk; PostgreSQL looked up each failed execution's job)."""
    every = queue_pages.walk_names(connection, None, limit + 1)
    if len(every) <= limit:
        return Ranking(every, every=True)
    finished = JOBS.c.finished_at
    ranking = (
        sa.select(JOBS.c.queue_name)
        .where(sa.or_(finished.is_(None), finished >= since))
        .group_by(JOBS.c.queue_name)
        .order_by(sa.func.count().desc(), JOBS.c.queue_name)
        .limit(limit)
    )
    named = list(connection.scalars(ranking))
    if len(named) < limit:
        paused = (
            sa.select(PAUSES.c.queue_name)
            .where(PAUSES.c.queue_name.not_in(named))
            .order_by(PAUSES.c.queue_name)
            .limit(limit - len(named))
        )
        named.extend(connection.scalars(paused))
    return Ranking(named, every=False)


def job_queue(execution: sa.Table) -> sa.ScalarSelect[str]:
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
    failed: tuple[int, int],
    named_finished: t.Mapping[str, int],
) -> Rest:
    """Every queue but ``named``, summed. The caller counted some figures with others: their
    ``deferred`` jobs (with the rate limits' figures), their ``failed`` executions (all, and
    those created from ``since``: with the named queues'), and ``named_finished``, the jobs
    of the ``named`` queues finished from ``since``."""
    ready, oldest = connection.execute(
        sa.select(sa.func.count(), sa.func.min(READY.c.created_at)).where(
            READY.c.queue_name.not_in(named)
        )
    ).one()
    failed_count, failed_recently = failed
    counts = queue_figures.QueueCounts(
        queue_name=OTHER,
        ready=int(ready),
        scheduled=_count(connection, SCHEDULED.c.queue_name.not_in(named)),
        deferred=deferred,
        claimed=_count(connection, job_queue(CLAIMED).not_in(named), CLAIMED),
        blocked=_count(connection, BLOCKED.c.queue_name.not_in(named)),
        failed=failed_count,
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

"""What a ``flask solidq work --once`` run left waiting, and why: the jobs of the queues it
worked that it could not run (scheduled later, deferred by their rate limit, blocked by a
concurrency limit, ready in a paused queue, running in another process), and those of the
queues it doesn't work."""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.controls.rate_limit.budgets import IS_DEFERRED
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PAUSES
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.timing import as_utc

if t.TYPE_CHECKING:
    from flask_solidq.operations.queue_selector import QueueSelector


@dataclasses.dataclass(frozen=True)
class Waiting:
    """Scheduled executions waiting: how many, and when the earliest is due."""

    count: int = 0
    next_at: dt.datetime | None = None


@dataclasses.dataclass(frozen=True)
class Leftovers:
    """The jobs a ``--once`` run left, by why it left them."""

    #: Deferred by their rate limit, to a slot after now.
    deferred: Waiting
    #: Scheduled for later (``wait=``, a retry's wait, a debounce).
    scheduled: Waiting
    #: Waiting for a concurrency slot that a job running elsewhere holds (or a lease).
    blocked: int
    #: Ready, in a paused queue.
    paused: int
    #: Ready in an unpaused queue: the run was stopped first (or they came after it looked).
    ready: int
    #: Claimed by another process.
    running_elsewhere: int
    #: Ready, scheduled or blocked in queues the run doesn't work.
    other_queues: int

    @property
    def total(self) -> int:
        """The jobs left in the queues the run works (other queues aside)."""
        waiting = self.deferred.count + self.scheduled.count + self.blocked
        return waiting + self.paused + self.ready + self.running_elsewhere


def read(connection: sa.Connection, selectors: t.Sequence[QueueSelector]) -> Leftovers:
    """The jobs left in the queues of ``selectors`` (each a worker's queues), by reason."""

    def worked(table: sa.Table) -> sa.ColumnElement[bool]:
        return sa.or_(*(selector.clause(table.c.queue_name) for selector in selectors))

    paused = READY.c.queue_name.in_(sa.select(PAUSES.c.queue_name))
    others = 0
    if not any(selector.all_queues for selector in selectors):
        others = sum(
            _count(connection, table, sa.not_(worked(table)))
            for table in (READY, SCHEDULED, BLOCKED)
        )
    return Leftovers(
        deferred=_scheduled(connection, worked(SCHEDULED), IS_DEFERRED),
        scheduled=_scheduled(connection, worked(SCHEDULED), sa.not_(IS_DEFERRED)),
        blocked=_count(connection, BLOCKED, worked(BLOCKED)),
        paused=_count(connection, READY, worked(READY), paused),
        ready=_count(connection, READY, worked(READY), sa.not_(paused)),
        running_elsewhere=_count(
            connection, CLAIMED.join(JOBS, JOBS.c.id == CLAIMED.c.job_id), worked(JOBS)
        ),
        other_queues=others,
    )


def _scheduled(
    connection: sa.Connection, worked: sa.ColumnElement[bool], which: sa.ColumnElement[bool]
) -> Waiting:
    row = connection.execute(
        sa.select(sa.func.count(), sa.func.min(SCHEDULED.c.scheduled_at))
        .select_from(SCHEDULED.join(JOBS, JOBS.c.id == SCHEDULED.c.job_id))
        .where(worked, which)
    ).one()
    return Waiting(int(row[0]), as_utc(row[1]) if row[1] is not None else None)


def _count(connection: sa.Connection, table: sa.FromClause, *where: sa.ColumnElement[bool]) -> int:
    return int(connection.scalar(sa.select(sa.func.count()).select_from(table).where(*where)) or 0)

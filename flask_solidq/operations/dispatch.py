"""Dispatch: due jobs become ready (or are held back by a control's DISPATCH hook).

A job becomes due at enqueue when it has no wait, or later when the dispatcher finds its
scheduled execution's time has passed. Both paths end in :func:`make_ready`.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import controls
from flask_solidq.controls.base import Dispatched
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.operations import job_ends
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.transitions import executions
from flask_solidq.values import JobRef


def make_ready(connection: sa.Connection, jobs: list[JobRef], now: dt.datetime) -> Dispatched:
    """Give the due ``jobs`` ready executions, except those a control holds back (blocked;
    discarded, or failed with its work kept: see :func:`job_ends.hold_back`); say which
    became ready and which were discarded. In the caller's transaction."""
    dispatched = controls.dispatch(connection, jobs)
    if dispatched.discarded or dispatched.failed:
        failures = sorted(dispatched.failed.items())
        job_ends.hold_back(connection, sorted(dispatched.discarded), failures, now)
    executions.make_ready(connection, dispatched.ready, now)
    return dispatched


def place(connection: sa.Connection, jobs: list[JobRef], now: dt.datetime) -> set[int]:
    """Give freshly stored ``jobs`` their first execution: ready when due (or blocked, by a
    control), else scheduled. Return the ids of the jobs still stored (a control may have
    discarded others)."""
    due = [job for job in jobs if job.scheduled_at is None or job.scheduled_at <= now]
    later = [job for job in jobs if job.scheduled_at is not None and job.scheduled_at > now]
    executions.schedule(connection, later, now)
    discarded = make_ready(connection, due, now).discarded
    return {job.id for job in jobs} - discarded


def dispatch_due(engine: sa.Engine, batch_size: int, *, skip_locked: bool = True) -> int:
    """Make up to ``batch_size`` due scheduled jobs ready (or blocked, or discarded, as the
    controls decide), in one transaction; return how many left the scheduled table. On
    PostgreSQL the transaction notifies the listening workers as it commits.

    Due by the database's clock, read in the transaction: a dispatcher whose host clock runs
    ahead would run jobs early (and hand rate-limited ones back to their budget before their
    slot), one running behind would run them late."""
    with db.write(engine) as connection:
        now = database_clock.now(connection)
        due = connection.execute(
            db.for_update(
                sa.select(
                    SCHEDULED.c.id, SCHEDULED.c.job_id, SCHEDULED.c.queue_name, SCHEDULED.c.priority
                )
                .where(SCHEDULED.c.scheduled_at <= now)
                .order_by(SCHEDULED.c.scheduled_at, SCHEDULED.c.priority, SCHEDULED.c.job_id)
                .limit(batch_size),
                skip_locked=skip_locked,
            )
        ).all()
        if not due:
            return 0
        details = {
            row.id: row
            for row in connection.execute(
                sa.select(JOBS.c.id, JOBS.c.class_name, JOBS.c.concurrency_key).where(
                    JOBS.c.id.in_([row.job_id for row in due])
                )
            )
        }
        refs = [
            JobRef(
                id=row.job_id,
                queue_name=row.queue_name,
                priority=row.priority,
                class_name=details[row.job_id].class_name,
                concurrency_key=details[row.job_id].concurrency_key,
                scheduled_at=None,
            )
            for row in due
        ]
        make_ready(connection, refs, now)
        executions.take_due(connection, [row.id for row in due])
        db.notify(connection, db.READY_CHANNEL)
    return len(due)


def next_due_in(engine: sa.Engine) -> float | None:
    """Seconds until the earliest scheduled job comes due by the database's clock (0 when it
    is due), or None when nothing is scheduled."""
    with db.read(engine) as connection:
        due_at = t.cast(
            "dt.datetime | None",
            connection.scalar(sa.select(sa.func.min(SCHEDULED.c.scheduled_at))),
        )
        if due_at is None:
            return None
        return max(0.0, (due_at - database_clock.now(connection)).total_seconds())

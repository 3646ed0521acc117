"""Dispatch: due jobs become ready (or are held back by a control's DISPATCH hook).

A job becomes due at enqueue when it has no wait, or later when the dispatcher finds its
scheduled execution's time has passed. Both paths end in :func:`make_ready`.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import controls
from flask_solidq import models
from flask_solidq.operations.rows import JobRef

READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)

INSERT_READY = READY.insert()
INSERT_SCHEDULED = SCHEDULED.insert()


def make_ready(connection: sa.Connection, jobs: list[JobRef], now: dt.datetime) -> list[JobRef]:
    """Give the due ``jobs`` ready executions, except those a control holds back; return the
    jobs that became ready. Runs in the caller's transaction."""
    ready = controls.dispatch(connection, jobs)
    if ready:
        connection.execute(
            INSERT_READY,
            [
                {
                    "job_id": job.id,
                    "queue_name": job.queue_name,
                    "priority": job.priority,
                    "created_at": now,
                }
                for job in ready
            ],
        )
    return ready


def schedule(connection: sa.Connection, jobs: list[JobRef], now: dt.datetime) -> None:
    """Give ``jobs``, due later, scheduled executions. Runs in the caller's transaction."""
    if jobs:
        connection.execute(
            INSERT_SCHEDULED,
            [
                {
                    "job_id": job.id,
                    "queue_name": job.queue_name,
                    "priority": job.priority,
                    "scheduled_at": job.scheduled_at,
                    "created_at": now,
                }
                for job in jobs
            ],
        )


def place(connection: sa.Connection, jobs: list[JobRef], now: dt.datetime) -> set[int]:
    """Give freshly stored ``jobs`` their first execution: ready when due, else scheduled.
    Return the ids of the jobs that got one (a control may have discarded the others)."""
    due = [job for job in jobs if job.scheduled_at is None or job.scheduled_at <= now]
    later = [job for job in jobs if job.scheduled_at is not None and job.scheduled_at > now]
    schedule(connection, later, now)
    placed = {job.id for job in later}
    placed.update(job.id for job in make_ready(connection, due, now))
    return placed

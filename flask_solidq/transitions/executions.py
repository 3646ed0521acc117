"""The writers of a job's waiting executions: ready, scheduled and blocked.

Each function is one change of where a job waits, in the caller's transaction; the callers
decide when (the controls' hooks, the dispatcher, a person's action) and these say how.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.storage import db
from flask_solidq.values import JobRef


class Blocked(t.Protocol):
    """A blocked execution as read: its id and what its ready execution copies."""

    @property
    def id(self) -> int: ...
    @property
    def job_id(self) -> int: ...
    @property
    def queue_name(self) -> str: ...
    @property
    def priority(self) -> int: ...


def make_ready(connection: sa.Connection, jobs: t.Sequence[JobRef], now: dt.datetime) -> None:
    """Give ``jobs`` ready executions as they are (a control may have asked first)."""
    if jobs:
        connection.execute(_INSERT_READY, [_ready_row(job.id, job, now) for job in jobs])


def schedule(connection: sa.Connection, jobs: t.Sequence[JobRef], now: dt.datetime) -> None:
    """Give ``jobs`` scheduled executions, each due at its ``scheduled_at``."""
    if jobs:
        connection.execute(
            _INSERT_SCHEDULED,
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


def take_due(connection: sa.Connection, scheduled_ids: t.Sequence[int]) -> None:
    """Delete the scheduled executions ``scheduled_ids``: their jobs became due (the caller
    made them ready, or a control held them back)."""
    connection.execute(SCHEDULED.delete().where(SCHEDULED.c.id.in_(list(scheduled_ids))))


def due_now(connection: sa.Connection, job_ids: t.Sequence[int], now: dt.datetime) -> None:
    """Make scheduled jobs due at once: their scheduled executions go, their rows say
    ``now`` (the caller makes them ready)."""
    ids = list(job_ids)
    connection.execute(SCHEDULED.delete().where(SCHEDULED.c.job_id.in_(ids)))
    connection.execute(_SCHEDULED_AT.where(JOBS.c.id.in_(ids)), {"at": now, "now": now})


def reschedule(
    connection: sa.Connection, scheduled_id: int, job_id: int, at: dt.datetime, now: dt.datetime
) -> None:
    """Move a scheduled job's time to ``at`` (its execution and its row)."""
    connection.execute(
        SCHEDULED.update().where(SCHEDULED.c.id == scheduled_id).values(scheduled_at=at)
    )
    connection.execute(_SCHEDULED_AT.where(JOBS.c.id == job_id), {"at": at, "now": now})


def block(
    connection: sa.Connection,
    job_id: int,
    queue_name: str,
    priority: int,
    key: str,
    expires_at: dt.datetime,
    now: dt.datetime,
) -> None:
    """Make a job wait for a slot of its concurrency ``key``, as a blocked execution."""
    connection.execute(
        _INSERT_BLOCKED,
        {
            "job_id": job_id,
            "queue_name": queue_name,
            "priority": priority,
            "concurrency_key": key,
            "expires_at": expires_at,
            "created_at": now,
        },
    )


def unblock(connection: sa.Connection, blocked: Blocked, now: dt.datetime) -> None:
    """Move a blocked execution to ready: its job took a slot."""
    connection.execute(_INSERT_READY, [_ready_row(blocked.job_id, blocked, now)])
    connection.execute(BLOCKED.delete().where(BLOCKED.c.id == blocked.id))


def take_ready(connection: sa.Connection, ready_ids: t.Sequence[int]) -> None:
    """Delete the ready executions ``ready_ids``, by primary key: a claim took their jobs
    (deleting by job id deadlocked on MySQL, Solid Queue PR #240)."""
    if ready_ids:
        db.delete_by_ids(connection, READY, ready_ids)


class _Waiting(t.Protocol):
    """What a ready execution copies from the job or the execution it replaces."""

    @property
    def queue_name(self) -> str: ...
    @property
    def priority(self) -> int: ...


def _ready_row(job_id: int, waiting: _Waiting, now: dt.datetime) -> dict[str, object]:
    return {
        "job_id": job_id,
        "queue_name": waiting.queue_name,
        "priority": waiting.priority,
        "created_at": now,
    }


_INSERT_READY = READY.insert()
_INSERT_SCHEDULED = SCHEDULED.insert()
_INSERT_BLOCKED = BLOCKED.insert()
_SCHEDULED_AT = JOBS.update().values(
    scheduled_at=sa.bindparam("at", type_=JOBS.c.scheduled_at.type), updated_at=sa.bindparam("now")
)

"""Queues: pausing and resuming them.

A queue exists only as the ``queue_name`` its jobs carry; pausing one is a row in
``solidq_pauses``, which workers consult when they claim. What ``flask solidq status``, the
dashboard and the metrics read of the queues (jobs per state, paused queues, blocked jobs,
semaphores, coalescing) is :mod:`flask_solidq.reads.queue_figures`.
"""

from __future__ import annotations

import sqlalchemy as sa

from flask_solidq import identifiers
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PAUSES
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

#: The longest queue name the tables take.
MAX_QUEUE_NAME_LENGTH = identifiers.MAX_NAME_LENGTH


def pause(engine: sa.Engine, queue_name: str) -> bool:
    """Pause ``queue_name``: workers claim nothing from it until it is resumed; enqueues and
    dispatching go on. Return whether it was running (pausing a paused queue does nothing).

    :raises TypeError, ValueError: ``queue_name`` isn't a queue name the tables take.
    """
    _check_queue_name(queue_name)
    row = {"queue_name": queue_name, "created_at": utcnow()}
    with db.write(engine) as connection:
        # The insert's row count can't tell: PostgreSQL reports -1 for it. So ask first; two
        # pauses racing may both answer True, and the unique index still keeps one row.
        was_paused = connection.scalar(
            sa.select(sa.exists().where(PAUSES.c.queue_name == queue_name))
        )
        db.insert_ignoring_duplicates(connection, PAUSES, [row])
    return not was_paused


def has_jobs(engine: sa.Engine, queue_name: str) -> bool:
    """Whether any job, in any state (finished ones still kept included), is in
    ``queue_name``: a queue with none may be a misspelled name, so a pause says so."""
    with db.read(engine) as connection:
        return bool(
            connection.scalar(sa.select(sa.exists().where(JOBS.c.queue_name == queue_name)))
        )


def resume(engine: sa.Engine, queue_name: str) -> bool:
    """Let workers claim from ``queue_name`` again. Return whether it was paused (resuming a
    running queue does nothing)."""
    with db.write(engine) as connection:
        deleted = connection.execute(PAUSES.delete().where(PAUSES.c.queue_name == queue_name))
    return deleted.rowcount > 0


def _check_queue_name(queue_name: object) -> None:
    if not isinstance(queue_name, str) or not queue_name.strip():
        raise TypeError(f"A queue name must be a non-empty string, not {queue_name!r}.")
    if identifiers.has_nul(queue_name):
        raise ValueError(
            f"A queue name can't hold a NUL character (\\x00), which no database column keeps:"
            f" {queue_name!r}."
        )
    if len(queue_name) > MAX_QUEUE_NAME_LENGTH:
        raise ValueError(f"A queue name must be at most {MAX_QUEUE_NAME_LENGTH} characters.")

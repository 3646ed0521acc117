"""The writers of a job's own row: its insert, the payload and keys a run or a retry leaves
it with, and its deletion when it never counted or was cleared long after it finished.

A job's end (finished, failed, discarded) is not here: :mod:`.ends` writes it, and only
:mod:`flask_solidq.operations.job_ends` calls that, with the hooks every end runs.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import JOBS

#: A job row's insert (the enqueue's statements for the dialects' fast paths are in
#: :mod:`.enqueue_statements`).
INSERT_JOB = JOBS.insert()
#: The same, returning what a bulk insert matches its rows by.
INSERT_JOB_RETURNING = JOBS.insert().returning(JOBS.c.active_job_id, JOBS.c.id)


def delete_unplaced(connection: sa.Connection, job_id: int) -> None:
    """Delete a job inserted in this transaction that lost its coalesce key's race: it was
    never placed, nor counted anywhere."""
    connection.execute(JOBS.delete().where(JOBS.c.id == job_id))


def prune(connection: sa.Connection, job_ids: t.Sequence[int]) -> int:
    """Delete jobs finished (and counted) long ago; return how many rows went."""
    return int(connection.execute(JOBS.delete().where(JOBS.c.id.in_(list(job_ids)))).rowcount)


def replace_arguments(
    connection: sa.Connection, job_id: int, payload: str, now: dt.datetime
) -> None:
    """Give a waiting job a new payload (a coalesced call replacing it)."""
    save_arguments(connection, [(job_id, payload)], now)


def save_arguments(
    connection: sa.Connection, payloads: t.Sequence[tuple[int, str | None]], now: dt.datetime
) -> None:
    """Store each ``(job_id, payload)``: a run's step progress, kept with its outcome."""
    if payloads:
        connection.execute(
            _SET_ARGUMENTS,
            [
                {"job_id": job_id, "new_arguments": payload, "now": now}
                for job_id, payload in payloads
            ],
        )


def save_held_arguments(
    connection: sa.Connection, job_id: int, process_id: int, payload: str, now: dt.datetime
) -> bool:
    """Store a running job's payload if ``process_id`` still holds its claim; return whether
    it did."""
    params = {"job_id": job_id, "process_id": process_id, "saved_arguments": payload, "now": now}
    return bool(connection.execute(_SAVE_HELD, params).rowcount)


def set_keys(
    connection: sa.Connection, job_id: int, keys: t.Mapping[str, str | None], now: dt.datetime
) -> None:
    """Give a job control keys it was stored without (``concurrency_key``,
    ``rate_limit_key``)."""
    connection.execute(JOBS.update().where(JOBS.c.id == job_id).values(**keys, updated_at=now))


def reset_for_retry(
    connection: sa.Connection, payloads: t.Sequence[tuple[int, str | None]], now: dt.datetime
) -> None:
    """A failed job retried by hand: its new payload, due ``now``."""
    if payloads:
        connection.execute(
            _RESET,
            [{"job": job_id, "arguments": payload, "now": now} for job_id, payload in payloads],
        )


class RetryRow(t.NamedTuple):
    """What a retry by a job's own rules changes in its row."""

    job_id: int
    arguments: str | None
    scheduled_at: dt.datetime
    queue_name: str
    priority: int
    rate_limit_key: str | None


def retry(connection: sa.Connection, retries: t.Sequence[RetryRow], now: dt.datetime) -> None:
    """Give jobs retried by their own rules their next attempt's row (the same row going on:
    its id, calls and keys stay; one stored without a rate-limit key takes its current one)."""
    if retries:
        connection.execute(
            _UPDATE_RETRIED,
            [
                {
                    "job_id": row.job_id,
                    "new_arguments": row.arguments,
                    "new_scheduled_at": row.scheduled_at,
                    "new_queue_name": row.queue_name,
                    "new_priority": row.priority,
                    "new_rate_limit_key": row.rate_limit_key,
                    "now": now,
                }
                for row in retries
            ],
        )


_SET_ARGUMENTS = (
    JOBS.update()
    .where(JOBS.c.id == sa.bindparam("job_id"))
    .values(arguments=sa.bindparam("new_arguments"), updated_at=sa.bindparam("now"))
)
_SAVE_HELD = (
    JOBS.update()
    .where(
        JOBS.c.id == sa.bindparam("job_id"),
        sa.exists().where(
            CLAIMED.c.job_id == sa.bindparam("job_id"),
            CLAIMED.c.process_id == sa.bindparam("process_id"),
        ),
    )
    .values(arguments=sa.bindparam("saved_arguments"), updated_at=sa.bindparam("now"))
)
_RESET = (
    JOBS.update()
    .where(JOBS.c.id == sa.bindparam("job"))
    .values(
        arguments=sa.bindparam("arguments"),
        scheduled_at=sa.bindparam("now"),
        updated_at=sa.bindparam("now"),
    )
)
_UPDATE_RETRIED = (
    JOBS.update()
    .where(JOBS.c.id == sa.bindparam("job_id"))
    .values(
        arguments=sa.bindparam("new_arguments"),
        scheduled_at=sa.bindparam("new_scheduled_at"),
        queue_name=sa.bindparam("new_queue_name"),
        priority=sa.bindparam("new_priority"),
        rate_limit_key=sa.bindparam("new_rate_limit_key"),
        updated_at=sa.bindparam("now"),
    )
)

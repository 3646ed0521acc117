"""Semaphores: the concurrency limit's rows, and moving blocked jobs to ready.

One row per concurrency key; ``value`` counts its free slots (the limit itself lives in the
job's declaration). ``wait`` takes a slot and ``signal`` gives one back, each inside the
caller's transaction; the semaphore's row lock is what keeps a job that is being blocked and a
job that is finishing from missing each other (Solid Queue issue #456): the finishing job's
signal waits for the blocking transaction to commit, and then finds the blocked job.

``expires_at`` is a lease: every wait and signal pushes it to now + duration, and a semaphore
whose holders all died stops counting once it expires (the dispatcher's maintenance deletes
it and releases the blocked jobs of its key).
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import SEMAPHORES
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.transitions import executions

_LOCK = db.for_update(
    sa.select(SEMAPHORES.c.value).where(SEMAPHORES.c.key == sa.bindparam("semaphore_key")),
    skip_locked=False,
)
_TAKE = (
    SEMAPHORES.update()
    .where(SEMAPHORES.c.key == sa.bindparam("semaphore_key"), SEMAPHORES.c.value > 0)
    .values(
        value=SEMAPHORES.c.value - 1,
        expires_at=sa.bindparam("expires_at"),
        updated_at=sa.bindparam("now"),
    )
)
_GIVE = (
    SEMAPHORES.update()
    .where(
        SEMAPHORES.c.key == sa.bindparam("semaphore_key"),
        SEMAPHORES.c.value < sa.bindparam("semaphore_limit"),
    )
    .values(
        value=SEMAPHORES.c.value + 1,
        expires_at=sa.bindparam("expires_at"),
        updated_at=sa.bindparam("now"),
    )
)


def wait(
    connection: sa.Connection, key: str, limit: int, duration: float, now: dt.datetime
) -> bool:
    """Take a slot of ``key``'s semaphore, creating it if missing; return whether one was free.

    Locks the semaphore's row until the caller's transaction ends.
    """
    expires_at = now + dt.timedelta(seconds=duration)
    value = connection.scalar(_LOCK, {"semaphore_key": key})
    if value is None:
        row = {
            "key": key,
            "value": limit - 1,
            "expires_at": expires_at,
            "created_at": now,
            "updated_at": now,
        }
        if db.insert_ignoring_duplicates(connection, SEMAPHORES, [row]):
            return True
        if limit == 1:  # another transaction created it, taking the only slot
            return False
        value = connection.scalar(_LOCK, {"semaphore_key": key})
    if not value or value <= 0:
        return False
    result = connection.execute(_TAKE, {"semaphore_key": key, "expires_at": expires_at, "now": now})
    return bool(result.rowcount)


def signal(
    connection: sa.Connection, key: str, limit: int, duration: float, now: dt.datetime
) -> bool:
    """Give a slot of ``key``'s semaphore back; return whether there was a semaphore below its
    limit to give it to (an expired, deleted one can't take it: maintenance unblocks instead)."""
    expires_at = now + dt.timedelta(seconds=duration)
    result = connection.execute(
        _GIVE,
        {"semaphore_key": key, "semaphore_limit": limit, "expires_at": expires_at, "now": now},
    )
    return bool(result.rowcount)


def release_one(engine: sa.Engine, key: str, limit: int, duration: float) -> int | None:
    """Move the next blocked job of ``key`` (by priority, then id) to ready if it gets a slot;
    return its id. Its own transaction; sends ``release_blocked``. The dispatcher's
    maintenance uses it for keys whose holders are gone."""
    with db.write(engine) as connection:
        release = _release_next(connection, key, limit, duration, database_clock.now(connection))
    return _announce(key, release)


def hand_over(engine: sa.Engine, key: str, limit: int, duration: float) -> int | None:
    """Give back a slot of ``key`` and, in the same transaction, move the next blocked job of
    the key to ready with it; return that job's id.

    One transaction, so the slot can't be taken in between by a job enqueued at that moment:
    it waits on the semaphore's row lock and then finds the slot already handed on, and the
    blocked jobs of a busy key aren't overtaken by a stream of newer ones.
    """
    with db.write(engine) as connection:
        now = database_clock.now(connection)
        if not signal(connection, key, limit, duration, now):
            return None
        release = _release_next(connection, key, limit, duration, now)
    return _announce(key, release)


def _release_next(
    connection: sa.Connection, key: str, limit: int, duration: float, now: dt.datetime
) -> tuple[int, bool] | None:
    blocked = connection.execute(_NEXT_BLOCKED, {"semaphore_key": key}).first()
    if blocked is None:
        return None
    released = wait(connection, key, limit, duration, now)
    if released:
        executions.unblock(connection, blocked, now)
    return blocked.job_id, released


def _announce(key: str, release: tuple[int, bool] | None) -> int | None:
    """Send ``release_blocked`` for a committed release; return the released job's id."""
    if release is None:
        return None
    job_id, released = release
    signals.release_blocked.send(None, job_id=job_id, concurrency_key=key, released=released)
    return job_id if released else None


def expire_all(engine: sa.Engine, batch_size: int) -> int:
    """Delete expired semaphores in batches; return how many."""
    deleted = 0
    while True:
        with db.write(engine) as connection:
            ids = list(
                connection.scalars(
                    sa.select(SEMAPHORES.c.id)
                    .where(SEMAPHORES.c.expires_at < database_clock.now(connection))
                    .limit(batch_size)
                )
            )
            if ids:
                connection.execute(SEMAPHORES.delete().where(SEMAPHORES.c.id.in_(ids)))
        deleted += len(ids)
        if len(ids) < batch_size:
            return deleted


def releasable_keys(engine: sa.Engine, batch_size: int) -> list[str]:
    """Keys with blocked jobs past their expiry whose semaphore is gone or has a free slot:
    what a dead holder left stuck (expired by the database's clock)."""
    query = (
        sa.select(BLOCKED.c.concurrency_key)
        .where(BLOCKED.c.expires_at < sa.bindparam("now"))
        .where(
            ~sa.exists().where(
                SEMAPHORES.c.key == BLOCKED.c.concurrency_key, SEMAPHORES.c.value <= 0
            )
        )
        .distinct()
        .order_by(BLOCKED.c.concurrency_key)
        .limit(batch_size)
    )
    with db.read(engine) as connection:
        return list(connection.scalars(query, {"now": database_clock.now(connection)}))


_NEXT_BLOCKED = db.for_update(
    sa.select(BLOCKED.c.id, BLOCKED.c.job_id, BLOCKED.c.queue_name, BLOCKED.c.priority)
    .where(BLOCKED.c.concurrency_key == sa.bindparam("semaphore_key"))
    .order_by(BLOCKED.c.priority, BLOCKED.c.job_id)
    .limit(1),
    skip_locked=True,
)

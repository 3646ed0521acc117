"""Coalesced enqueues: calls with one key share one pending job.

``solidq_coalesce_keys`` holds a row per key that has an *open* job, the one later calls join.
An admission locks that row (``SELECT ... FOR UPDATE``) for the rest of its transaction, so
enqueues of one key take turns, across processes and machines; inside the app's transaction
or :meth:`SolidQ.transaction` the lock lasts until that commits. A key without a row gets one
by inserting it after the job it points at, ignoring a duplicate: a racing admission that
inserted first wins, this one deletes the job it just wrote (nothing else saw it) and goes
round to lock the winner's row. A worker starting the job deletes the row (see
:mod:`~flask_solidq.controls.coalesce.coalesce_start`), so a call during the run opens the next job.

What a call does when its key has an open job (``on_conflict``):

* ``discard``: nothing is written; the open job runs with its first call's arguments;
* ``replace``: the call's whole payload is written over the open job's, which keeps its id,
  queue, priority, keys and schedule;
* ``collect``: the call is stored in ``solidq_coalesced_calls``; the call that brings the job to
  ``max_calls`` seals it (deletes the key's row), and with ``on_full="dispatch"`` makes it
  ready at once if it was waiting for its time.

With ``debounce``, calls also move a scheduled job later (:mod:`~flask_solidq.controls.
coalesce_timing`). How a job was opened is recorded first in its payload
(``{"coalesce": "collect", ...}``), so a worker knows even if the definition changed since,
and so a call can tell a key's open job was opened another way (after a deploy switched
``on_conflict``): it then takes the key over with a new job (docs/coalescing.md's table).

Bulk enqueues admit each key's calls in one transaction per job (:func:`admit_all`).
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq.controls.coalesce import coalesce_calls
from flask_solidq.controls.coalesce import coalesce_timing as timing
from flask_solidq.controls.coalesce.coalesce_calls import Decision
from flask_solidq.controls.coalesce.coalesce_calls import Pending
from flask_solidq.definitions.arguments import dumps
from flask_solidq.definitions.coalescing import OnConflict
from flask_solidq.definitions.coalescing import OnFull
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import COALESCED_CALLS
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.storage import db
from flask_solidq.transitions import executions
from flask_solidq.transitions import jobs as job_rows
from flask_solidq.values import MARKER_PREFIX
from flask_solidq.values import CoalesceStatus
from flask_solidq.values import JobRef

if t.TYPE_CHECKING:
    from flask_solidq.controls.base import JobStore
    from flask_solidq.definitions.coalescing import Coalesce


#: How many times an admission goes round after losing the race for a new key's row. Each
#: round that loses means another admission committed that key meanwhile; the next round
#: usually finds its row, unless a worker started that job in between and freed the key
#: again, which a hot key with idle workers can repeat a few times. Far more rounds than that
#: means something else is wrong.
MAX_ROUNDS = 100
#: How many times an admission outside a caller's transaction is tried when MySQL/MariaDB
#: picks it as a deadlock's victim: a hot key's admissions, sealing collecting jobs and
#: workers freeing keys can deadlock several times in a row under load.
DEADLOCK_ATTEMPTS = 10

_LOCK_KEY = (
    sa.select(
        COALESCE_KEYS.c.id,
        COALESCE_KEYS.c.job_id,
        COALESCE_KEYS.c.calls_count,
        COALESCE_KEYS.c.created_at,
    )
    .where(COALESCE_KEYS.c.key == sa.bindparam("key"))
    .with_for_update()
)


def admit_all(
    engine: sa.Engine,
    groups: list[list[Pending]],
    now: dt.datetime,
    store: JobStore,
    *,
    bulk: bool,
    announce: bool = True,
) -> list[Decision]:
    """Admit each group's calls, key after key, one transaction per job a key's calls land
    in (all in the caller's transaction, when one is open), and record each call's outcome
    as its transaction commits; return the decisions.

    With ``announce``, each decision is announced (``signals.coalesce``) as it is recorded;
    without, the caller announces them (:func:`coalesce_calls.announce_all`) once it is past its own
    handling of database errors: a receiver's error is the receiver's, never a failed
    enqueue of a call that committed.

    :raises sqlalchemy.exc.SQLAlchemyError: the database failed; the calls admitted before
        keep their outcomes (they are committed, unless a caller's transaction rolls back).
    """
    decided: list[Decision] = []
    for group in groups:
        remaining = group
        while remaining:
            admission = functools.partial(_admit_in_transaction, engine, remaining, now, store)
            decisions = db.retrying_deadlocks(admission, attempts=DEADLOCK_ATTEMPTS)
            for decision in decisions:
                coalesce_calls.record(decision, bulk=bulk)
                if announce:
                    coalesce_calls.announce(decision)
            decided.extend(decisions)
            remaining = remaining[len(decisions) :]
    return decided


def _admit_in_transaction(
    engine: sa.Engine, calls: list[Pending], now: dt.datetime, store: JobStore
) -> list[Decision]:
    with db.write(engine) as connection:
        return admit(connection, calls, now, store)


def admit(
    connection: sa.Connection, calls: list[Pending], now: dt.datetime, store: JobStore
) -> list[Decision]:
    """Admit a prefix of ``calls`` (one key's, in order) into one job, in ``connection``'s
    transaction; return a decision for each call of that prefix."""
    first = calls[0]
    declaration = first.declaration
    for _round in range(MAX_ROUNDS):
        open_job = connection.execute(_LOCK_KEY, {"key": first.key}).first()
        if open_job is None:
            decisions = _open(connection, calls, now, store, key_row=None)
        elif _takes_over(connection, open_job, declaration):
            decisions = _open(connection, calls, now, store, key_row=open_job.id)
        else:
            return _join(connection, open_job, calls, now, store)
        if decisions is not None:
            return decisions
    raise errors.EnqueueError(
        f"Coalescing {type(first.job).job_name}: the key's row kept changing hands; tried"
        f" {MAX_ROUNDS} times."
    )


def _takes_over(connection: sa.Connection, open_job: t.Any, declaration: Coalesce) -> bool:
    """Whether a call opens a new job that takes the key over instead of joining the open
    one: the open job was opened another way (a deploy switched ``on_conflict``), or it is a
    collecting job already full (``max_calls`` was lowered)."""
    mode = declaration.on_conflict
    collecting: bool = open_job.calls_count > 0
    if mode is OnConflict.COLLECT:
        return not collecting or open_job.calls_count >= t.cast(int, declaration.max_calls)
    if mode is OnConflict.DISCARD:
        return collecting
    if collecting:
        return True
    payload = connection.scalar(sa.select(JOBS.c.arguments).where(JOBS.c.id == open_job.job_id))
    return not (payload or "").startswith(f'{MARKER_PREFIX}"{OnConflict.REPLACE.value}"')


def _open(
    connection: sa.Connection,
    calls: list[Pending],
    now: dt.datetime,
    store: JobStore,
    *,
    key_row: int | None,
) -> list[Decision] | None:
    """Open a new job for a prefix of ``calls`` and point the key at it (its row
    ``key_row``, or a new one). Returns None when another admission inserted the key's row
    first: this job is deleted again, and the caller goes round to lock that row."""
    declaration = calls[0].declaration
    mode = declaration.on_conflict
    if mode is OnConflict.REPLACE:
        # Only the last call is admitted; the ones before it are superseded.
        taken, creator = calls, calls[-1]
    elif mode is OnConflict.COLLECT:
        taken = calls[: t.cast(int, declaration.max_calls)]
        creator = taken[0]
    else:
        taken, creator = calls, calls[0]
    full = mode is OnConflict.COLLECT and len(taken) >= t.cast(int, declaration.max_calls)
    scheduled_at = _new_job_time(declaration, creator, taken, now, full=full)
    row = store.new_row(creator.job, now, creator.marked_payload())
    row["scheduled_at"] = scheduled_at or now
    job_id = store.insert(connection, row)
    calls_count = len(taken) if mode is OnConflict.COLLECT else 0
    if not _point_key(connection, creator.key, job_id, calls_count, now, key_row, sealed=full):
        job_rows.delete_unplaced(connection, job_id)
        return None
    if not store.place(connection, job_id, row, now):
        # A concurrency limit with on_conflict="discard" destroyed it (its key row with it).
        return [Decision(pending, None, None) for pending in taken]
    creator.job.scheduled_at = scheduled_at
    if mode is OnConflict.COLLECT:
        _store_calls(connection, job_id, taken, now)
    joined = CoalesceStatus.COLLECTED if mode is OnConflict.COLLECT else CoalesceStatus.DISCARDED
    return [
        Decision(pending, CoalesceStatus.CREATED if pending is creator else joined, job_id)
        for pending in taken
    ]


def _new_job_time(
    declaration: Coalesce, creator: Pending, taken: list[Pending], now: dt.datetime, *, full: bool
) -> dt.datetime | None:
    """When a new job comes due: its creating call's own schedule; with ``debounce`` the
    latest time its calls ask for, capped at ``max_wait``; now for a collecting job full
    from the start with ``on_full="dispatch"``."""
    if full and declaration.on_full is OnFull.DISPATCH:
        return None
    if declaration.debounce is None:
        return creator.wanted_at
    return timing.for_new_job(declaration, timing.latest(p.wanted_at for p in taken), now)


def _point_key(
    connection: sa.Connection,
    key: str,
    job_id: int,
    calls_count: int,
    now: dt.datetime,
    key_row: int | None,
    *,
    sealed: bool,
) -> bool:
    """Make ``job_id`` the key's open job (or, ``sealed``, leave the key with no open job);
    False when a new row lost the race to another admission's."""
    if sealed:
        if key_row is not None:
            connection.execute(COALESCE_KEYS.delete().where(COALESCE_KEYS.c.id == key_row))
        return True
    values = {"job_id": job_id, "calls_count": calls_count, "created_at": now, "updated_at": now}
    if key_row is not None:
        connection.execute(
            COALESCE_KEYS.update().where(COALESCE_KEYS.c.id == key_row).values(values)
        )
        return True
    return db.insert_ignoring_duplicates(connection, COALESCE_KEYS, [{"key": key, **values}]) == 1


def _join(
    connection: sa.Connection,
    open_job: t.Any,
    calls: list[Pending],
    now: dt.datetime,
    store: JobStore,
) -> list[Decision]:
    """Admit a prefix of ``calls`` into the key's open job."""
    declaration = calls[0].declaration
    mode = declaration.on_conflict
    job_id = open_job.job_id
    dispatched = False
    if mode is OnConflict.COLLECT:
        room = t.cast(int, declaration.max_calls) - open_job.calls_count
        taken = calls[:room]
        _store_calls(connection, job_id, taken, now)
        count = open_job.calls_count + len(taken)
        if count >= t.cast(int, declaration.max_calls):
            connection.execute(COALESCE_KEYS.delete().where(COALESCE_KEYS.c.id == open_job.id))
            if declaration.on_full is OnFull.DISPATCH:
                dispatched = _dispatch_now(connection, job_id, now, store)
                if dispatched:
                    taken[-1].job.scheduled_at = now
        else:
            connection.execute(
                COALESCE_KEYS.update()
                .where(COALESCE_KEYS.c.id == open_job.id)
                .values(calls_count=count, updated_at=now)
            )
        decisions = [Decision(pending, CoalesceStatus.COLLECTED, job_id) for pending in taken]
    elif mode is OnConflict.REPLACE:
        taken, last = calls, calls[-1]
        job_rows.replace_arguments(connection, job_id, dumps(last.marked_payload()), now)
        decisions = [
            Decision(
                pending,
                CoalesceStatus.REPLACED if pending is last else CoalesceStatus.DISCARDED,
                job_id,
            )
            for pending in taken
        ]
    else:
        taken = calls
        decisions = [Decision(pending, CoalesceStatus.DISCARDED, job_id) for pending in taken]
    if not dispatched:
        wanted_at = timing.latest(pending.wanted_at for pending in taken)
        target = timing.for_joined_job(declaration, wanted_at, open_job.created_at)
        _move_later(connection, job_id, target, now)
    return decisions


def _store_calls(
    connection: sa.Connection, job_id: int, calls: list[Pending], now: dt.datetime
) -> None:
    connection.execute(
        COALESCED_CALLS.insert(),
        [
            {"job_id": job_id, "arguments": pending.call_arguments, "created_at": now}
            for pending in calls
        ],
    )


def _locked_schedule(connection: sa.Connection, job_id: int) -> t.Any:
    """The job's scheduled execution, locked, or None: the job isn't scheduled, or the
    dispatcher or a discard holds that row (skipped rather than waited for: the key is held
    until the job starts, so the job still covers the call)."""
    return connection.execute(
        db.for_update(
            sa.select(SCHEDULED.c.id, SCHEDULED.c.scheduled_at).where(SCHEDULED.c.job_id == job_id),
            skip_locked=True,
        )
    ).first()


def _move_later(
    connection: sa.Connection, job_id: int, target: dt.datetime | None, now: dt.datetime
) -> None:
    """Debounce: move the scheduled job to ``target`` if that is later by more than a
    second; a job that is ready, blocked or claimed stays as it is."""
    if target is None:
        return
    scheduled = _locked_schedule(connection, job_id)
    if scheduled is None or not timing.moves(scheduled.scheduled_at, target):
        return
    executions.reschedule(connection, scheduled.id, job_id, target, now)


def _dispatch_now(
    connection: sa.Connection, job_id: int, now: dt.datetime, store: JobStore
) -> bool:
    """``on_full="dispatch"``: a full job waiting for its time becomes due now (ready, or
    blocked by its concurrency limit). Returns whether it was moved."""
    scheduled = _locked_schedule(connection, job_id)
    if scheduled is None:
        return False
    job = connection.execute(
        sa.select(
            JOBS.c.queue_name, JOBS.c.priority, JOBS.c.class_name, JOBS.c.concurrency_key
        ).where(JOBS.c.id == job_id)
    ).one()
    executions.due_now(connection, [job_id], now)
    ref = JobRef(job_id, job.queue_name, job.priority, job.class_name, job.concurrency_key, None)
    store.make_ready(connection, ref, now)
    return True

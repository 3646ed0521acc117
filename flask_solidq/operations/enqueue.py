"""Enqueue: store a job record and its first execution in one transaction.

The hot path of every web request that enqueues, so it uses SQLAlchemy Core statements built
once, and everything that can fail on bad input (arguments that won't serialize, a key
callable that raises) runs before the transaction opens: a failed enqueue writes nothing.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import batches
from flask_solidq import controls
from flask_solidq import current
from flask_solidq import errors
from flask_solidq.models.tables import JOBS
from flask_solidq.operations import dispatch
from flask_solidq.operations import job_rows
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from flask_solidq.transitions import enqueue_statements
from flask_solidq.transitions.jobs import INSERT_JOB
from flask_solidq.transitions.jobs import INSERT_JOB_RETURNING
from flask_solidq.values import JobRef

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import JobRow
    from flask_solidq.values import JSONValue

build_row = job_rows.build_row
_ref = job_rows.ref


def enqueue(engine: sa.Engine, job: Job) -> None:
    """Store ``job``, ready or scheduled, and record the outcome on it.

    Joins an open :func:`flask_solidq.storage.db.transaction`; otherwise commits before returning.

    :raises flask_solidq.SerializationError: an argument can't be stored; nothing was.
    :raises flask_solidq.EnqueueError: the database failed; the cause is chained.
    """
    controlled = controls.concern_enqueue(type(job))
    try:
        if controlled:
            now = _enqueue_time(engine, [job])
            split = controls.prepare_enqueue([job], now, bulk=False)
        else:  # what every control would say: this host's clock, none takes it over
            now = utcnow()
            split = controls.Enqueue([job], [])
        if split.taken:
            announce = controls.enqueue(engine, split, now, STORE, bulk=False)
        else:
            row = build_row(job, now, controlled=controlled)
            job_id, placed = db.retrying_deadlocks(lambda: _store(engine, row, now, controlled))
    except sa.exc.SQLAlchemyError as exc:
        job.successfully_enqueued = False
        raise errors.EnqueueError(
            f"Enqueuing {type(job).job_name} failed: {_describe(exc)}"
        ) from exc
    if split.taken:
        # Past the database's errors: what a signal receiver raises is its own, and the
        # call it heard about stays admitted and reported so.
        announce()
        return
    _record_outcome(job, job_id, placed)


def _enqueue_time(engine: sa.Engine, jobs: t.Sequence[Job]) -> dt.datetime:
    """The time an enqueue stamps its jobs with: this host's clock, unless a job debounces
    (its run is timed from its calls, and the dispatcher reads the database's clock), which
    costs one round trip (none on SQLite)."""
    if controls.reads_database_clock(jobs):
        return database_clock.read_now(engine)
    return utcnow()


def _describe(error: sa.exc.SQLAlchemyError) -> str:
    """What went wrong, without values from the job: the database's error class and the
    first line of its message (PostgreSQL quotes a duplicate key on a later line), except for
    a constraint that failed, whose message quotes the offending value on MySQL."""
    cause = getattr(error, "orig", None) or error
    if isinstance(error, sa.exc.IntegrityError):
        return f"{type(cause).__name__}: a constraint of the queue's tables refused the row"
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"


def _store(
    engine: sa.Engine, row: JobRow, now: dt.datetime, controlled: bool = True
) -> tuple[int, bool]:
    """Insert one job and its first execution; return its id and whether it got one
    (``controlled``: whether a control may concern it, see :func:`_fits_own_transaction`)."""
    if _fits_own_transaction(engine, row, controlled):
        dialect = db.dialect(engine)
        job_id = dialect.insert_with_execution(engine, enqueue_statements.STATEMENTS, row, now)
        if job_id is not None:
            current.count_stored(1)
            return job_id, True
    with db.write(engine) as connection:
        job_id = db.insert_returning_id(connection, INSERT_JOB, row)
        placed = job_id in dispatch.place(connection, [_ref(job_id, row, now)], now)
        current.count_stored(1)
        return job_id, placed


def enqueue_all(engine: sa.Engine, jobs: t.Sequence[Job]) -> None:
    """Store ``jobs`` and record each outcome: the ordinary ones in one transaction, with
    multi-row inserts; then the ones a control takes over (coalesced calls: key after key in
    sorted order, one transaction per job their calls land in, see
    :func:`flask_solidq.controls.coalesce.coalesce_admission.admit_all`). Inside the caller's
    transaction it is all one, all-or-nothing.

    Every payload and key is built before anything is committed (on PostgreSQL, the rows
    of a bulk enqueue no control concerns are built while the server inserts the ones built
    before: see :func:`_insert_pipelined`). A deadlock outside the caller's own transaction
    is tried again (nothing was committed); other database errors propagate as SQLAlchemy
    raised them (as Solid Queue's bulk enqueue does).
    """
    now = _enqueue_time(engine, jobs)
    split = controls.prepare_enqueue(jobs, now, bulk=True)
    if split.plain:
        ids, placed = _store_plain(engine, split.plain, now)
        for job, job_id in zip(split.plain, ids, strict=True):
            _record_outcome(job, job_id, job_id in placed)
    if split.taken:
        controls.enqueue(engine, split, now, STORE, bulk=True)()


def _store_plain(
    engine: sa.Engine, jobs: list[Job], now: dt.datetime
) -> tuple[list[int], set[int]]:
    """Store the jobs no control takes over; return their ids and the ids still stored."""
    if _pipelines(engine, jobs):
        chunks = _RowChunks(jobs, now)
        ids = db.retrying_deadlocks(lambda: _insert_pipelined(engine, chunks, now))
        current.count_stored(len(ids))
        return ids, set(ids)
    rows = job_rows.build_rows(jobs, now)
    return db.retrying_deadlocks(lambda: _store_all(engine, rows, now))


#: How many jobs each statement of a pipelined bulk enqueue inserts (see
#: :func:`_insert_pipelined`); a bulk enqueue of at most this many is one statement.
PIPELINED_CHUNK = 250


def _pipelines(engine: sa.Engine, jobs: list[Job]) -> bool:
    """Whether ``jobs`` are stored by :func:`_insert_pipelined`: where the dialect pipelines
    (PostgreSQL's fast path), more than one chunk of them, no caller's transaction open, and
    no control concerned with any of them (so no row gets a key, and none is held back)."""
    return (
        len(jobs) > PIPELINED_CHUNK
        and db.dialect(engine).pipelines(engine)
        and not db.in_transaction(engine)
        and not any(map(controls.concern_enqueue, {type(job) for job in jobs}))
    )


class _RowChunks:
    """A bulk enqueue's rows, built a chunk at a time as they are iterated, and kept: an
    attempt tried again after a deadlock sends the rows the first one built."""

    def __init__(self, jobs: list[Job], now: dt.datetime) -> None:
        self._jobs = jobs
        self._now = now
        self._built: list[list[JobRow]] = []

    def __iter__(self) -> t.Iterator[list[JobRow]]:
        for index, first in enumerate(range(0, len(self._jobs), PIPELINED_CHUNK)):
            if index == len(self._built):
                jobs = self._jobs[first : first + PIPELINED_CHUNK]
                self._built.append(job_rows.build_rows(jobs, self._now, controlled=False))
            yield self._built[index]


def _insert_pipelined(engine: sa.Engine, chunks: _RowChunks, now: dt.datetime) -> list[int]:
    """Insert the jobs and their executions, :data:`PIPELINED_CHUNK` a statement, in one
    pipelined transaction; return their ids (see
    :meth:`flask_solidq.storage.dialects.base.Dialect.insert_pipelined`).

    The client's share of a bulk enqueue (building the rows: payloads, ids) was a third of
    its time, spent while the server waited for the statement. Pipelined, each chunk's rows
    are built while the server inserts the chunk before. A row that can't be built (a
    :class:`~flask_solidq.SerializationError`) rolls back what was sent: nothing is
    committed, as before.
    """
    return db.dialect(engine).insert_pipelined(engine, chunks, now)


def _store_all(
    engine: sa.Engine, rows: list[JobRow], now: dt.datetime
) -> tuple[list[int], set[int]]:
    """Insert the jobs and their first executions in one transaction; return their ids and
    the ids still stored (a concurrency limit may discard some).

    Where the dialect writes jobs with their executions in one statement (PostgreSQL), with
    no caller's transaction open, the jobs are inserted in one autocommitted statement when
    one takes them all (at most one chunk, none a control keys, and their columns fit): a
    statement is atomic and durable as a transaction of its own, which saves the round trips
    of ``BEGIN`` and ``COMMIT``.
    """
    dialect = db.dialect(engine)
    holds = (
        [controls.act_on_dispatch(row) for row in rows] if dialect.writes_in_one_statement else []
    )
    if dialect.writes_in_one_statement and not db.in_transaction(engine):
        ids = dialect.insert_all_autocommitted(engine, rows, holds, now)
        if ids is not None:
            current.count_stored(len(ids))
            return ids, set(ids)
    with db.write(engine) as connection:
        if dialect.writes_in_one_statement:
            ids, placed = _insert_all_in_one_statement(connection, rows, holds, now)
        else:
            ids = _insert_jobs(connection, rows)
            # One call for every job, so the controls lock their keys in one sorted order.
            refs = [_ref(job_id, row, now) for job_id, row in zip(ids, rows, strict=True)]
            placed = dispatch.place(connection, refs, now)
        current.count_stored(len(ids))
        return ids, placed


def _insert_all_in_one_statement(
    connection: sa.Connection, rows: list[JobRow], holds: list[bool], now: dt.datetime
) -> tuple[list[int], set[int]]:
    """Insert the jobs and their executions with the dialect's chained statements
    (:meth:`flask_solidq.storage.dialects.base.Dialect.insert_all`). Due jobs a control may
    hold back (``holds``) are stored without their ready row and dispatched afterwards, one by
    one."""
    ids = db.dialect(connection).insert_all(connection, rows, holds, now)
    placed: set[int] = set()
    held: list[JobRef] = []
    for job_id, row, hold in zip(ids, rows, holds, strict=True):
        if hold and row["scheduled_at"] <= now:
            held.append(_ref(job_id, row, now))
        else:
            placed.add(job_id)
    discarded = dispatch.make_ready(connection, held, now).discarded
    placed.update(job.id for job in held if job.id not in discarded)
    return ids, placed


def _fits_own_transaction(engine: sa.Engine, row: JobRow, controlled: bool = True) -> bool:
    """Whether the enqueue can take a way of its own, without the controls' dispatch: no
    caller's transaction is open, and no control will act when it becomes ready. The dialect
    then stores it its own way
    (:meth:`flask_solidq.storage.dialects.base.Dialect.insert_with_execution`: on PostgreSQL
    one autocommitted statement, on SQLite and MySQL two inserts on the driver's connection).
    A job no control concerns (``controlled`` false) has no hook to ask."""
    return not db.in_transaction(engine) and not (controlled and controls.act_on_dispatch(row))


def _insert_jobs(connection: sa.Connection, rows: list[JobRow]) -> list[int]:
    """Insert ``rows`` into ``solidq_jobs`` with multi-row inserts; return their ids, in order.

    New rows are matched to their ids through ``active_job_id``: RETURNING in input order
    would cost SQLite one statement per row, and MySQL has no RETURNING at all.
    """
    by_job_id: dict[str, int] = {}
    for batch in db.batched(rows):
        if db.supports_returning(connection):
            by_job_id.update(
                {
                    job_id: id_
                    for job_id, id_ in connection.execute(INSERT_JOB_RETURNING, list(batch))
                }
            )
        else:
            connection.execute(INSERT_JOB, list(batch))
            query = (
                sa.select(JOBS.c.active_job_id, JOBS.c.id)
                .where(JOBS.c.active_job_id.in_([row["active_job_id"] for row in batch]))
                # An instance enqueued before has older rows with its job id: the newest wins.
                .order_by(JOBS.c.id)
            )
            by_job_id.update({job_id: id_ for job_id, id_ in connection.execute(query)})
    return [by_job_id[row["active_job_id"]] for row in rows]


def _record_outcome(job: Job, job_id: int, stored: bool) -> None:
    job.provider_job_id = job_id if stored else None
    job.successfully_enqueued = stored


class _Store:
    """The enqueue's way of storing a job, lent to the controls that store jobs their own way
    (:class:`flask_solidq.controls.base.JobStore`): coalescing's admission opens its jobs
    through it, so a coalesced job's row and its way to ready are the plain enqueue's."""

    def new_row(self, job: Job, now: dt.datetime, payload: dict[str, JSONValue]) -> JobRow:
        return build_row(job, now, payload)

    def insert(self, connection: sa.Connection, row: JobRow) -> int:
        return db.insert_returning_id(connection, INSERT_JOB, row)

    def place(self, connection: sa.Connection, job_id: int, row: JobRow, now: dt.datetime) -> bool:
        placed = job_id in dispatch.place(connection, [_ref(job_id, row, now)], now)
        current.count_stored(1)
        return placed

    def make_ready(self, connection: sa.Connection, job: JobRef, now: dt.datetime) -> None:
        dispatch.make_ready(connection, [job], now)


#: The store the controls' ENQUEUE hooks write through.
STORE = _Store()

#: A finished batch's callbacks are enqueued by this module's enqueue (see there).
batches.ENQUEUE.fill(enqueue)

"""Release: the claims of a stopping or dead process go back to ready, or fail.

A worker that stops gracefully releases the jobs it couldn't finish in time: they go back to
ready as they are, still holding any concurrency slot they took (they never gave it back).
The claims of a worker that died (killed, pruned for silence, or gone without a trace) follow
``SOLIDQ_ON_WORKER_DEATH``: ``"fail"`` keeps each as a failed execution naming the process
(Solid Queue's behaviour), ``"release"`` runs it again. Either way nothing is lost.

The jobs a worker claimed ahead of its threads and never started (``prefetch``) go back to
ready whenever their worker stops or dies where a supervisor sees it, never failed
(:func:`release_never_started`); only a worker lost without its supervisor (pruned for
silence) leaves them to ``SOLIDQ_ON_WORKER_DEATH`` with the rest, since nobody knows then
which had started.

A live worker also releases its own *stray* claims (:func:`release_strays`): claims of its
process that none of its threads holds, left by a claim that committed on the server while
the worker saw an error (its reply was lost).

Claims put back to ready send ``signals.release`` once that committed, one per process, with
the :class:`ReleaseReason`.
"""

from __future__ import annotations

import enum
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.config import OnWorkerDeath
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PROCESSES
from flask_solidq.operations import job_ends
from flask_solidq.steps import lost as lost_steps
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from flask_solidq.transitions import claims
from flask_solidq.transitions import executions
from flask_solidq.values import JobRef


class ReleaseReason(str, enum.Enum):
    """Why claims went back to ready: ``reason`` in ``signals.release``."""

    #: The worker stopped before these jobs finished (its shutdown timeout ran out).
    SHUTDOWN = "shutdown"
    #: Claims of a live worker that none of its threads held (a claim's reply was lost).
    STRAY = "stray"
    #: Their process is gone (died, pruned for silence, no longer registered) and
    #: ``SOLIDQ_ON_WORKER_DEATH`` is ``"release"``; or a supervisor cleared up after a child
    #: that quit while stopping.
    PROCESS_GONE = "process_gone"


def release_all(
    engine: sa.Engine,
    process_ids: t.Collection[int | None],
    *,
    reason: ReleaseReason = ReleaseReason.SHUTDOWN,
) -> int:
    """Put every job claimed by ``process_ids`` back to ready; return how many.

    ``None`` in ``process_ids`` stands for claims without a process.
    """
    with db.write(engine) as connection:
        released = {
            process_id: requeue_claims(connection, [process_id]) for process_id in process_ids
        }
    for process_id, jobs in released.items():
        announce_released(engine, process_id, jobs, reason)
    return sum(len(jobs) for jobs in released.values())


def announce_released(
    engine: sa.Engine, process_id: int | None, jobs: t.Sequence[JobRef], reason: ReleaseReason
) -> None:
    """Send ``signals.release`` for ``jobs``, released from ``process_id``'s claims, once the
    release committed (the caller's transaction, or the open :func:`db.transaction`)."""
    if not jobs or not signals.release.receivers:
        return
    job_ids = [job.id for job in jobs]
    announce = functools.partial(
        signals.send_safely,
        signals.release,
        None,
        process_id=process_id,
        reason=reason,
        job_ids=job_ids,
        size=len(job_ids),
    )
    db.after_commit(engine, announce)


def fail_all(engine: sa.Engine, process_ids: t.Collection[int | None], error: str) -> int:
    """Keep every job claimed by ``process_ids`` as a failed execution with ``error``; then
    release what the jobs held (their concurrency slots). Return how many."""
    with db.write(engine) as connection:
        jobs = fail_claims(connection, process_ids, error)
    return len(jobs)


def handle_lost_claims(
    engine: sa.Engine,
    process_ids: t.Collection[int | None],
    *,
    policy: OnWorkerDeath,
    error: str,
) -> int:
    """Resume the jobs with step progress (:func:`resume_steps`); release or fail
    (``policy``) the other claims of processes that are gone."""
    with db.write(engine) as connection:
        resumed, failed = resume_steps(connection, process_ids, error)
    whose = next(iter(process_ids)) if len(process_ids) == 1 else None
    announce_released(engine, whose, resumed, ReleaseReason.PROCESS_GONE)
    handled = len(resumed) + len(failed)
    if policy is OnWorkerDeath.RELEASE:
        return handled + release_all(engine, process_ids, reason=ReleaseReason.PROCESS_GONE)
    return handled + fail_all(engine, process_ids, error)


def requeue_claims(
    connection: sa.Connection, process_ids: t.Collection[int | None]
) -> list[JobRef]:
    """In the caller's transaction: move the claims of ``process_ids`` back to ready,
    bypassing concurrency controls (each job still holds the slot it took)."""
    jobs = _take_claims(connection, process_ids)
    executions.make_ready(connection, jobs, utcnow())
    return jobs


def release_strays(engine: sa.Engine, process_id: int, held_ids: t.Collection[int]) -> int:
    """Put back to ready the claims of ``process_id`` whose jobs are not in ``held_ids`` (the
    jobs its threads hold: running, queued for a thread, or waiting for their outcome to be
    stored), keeping the concurrency slots they took; return how many.

    The worker calls it between its polls, in the thread that claims, so a claim it made is
    either held or stray. The usual case, nothing stray, costs one read that locks nothing.
    """
    held = set(held_ids)
    query = sa.select(CLAIMED.c.job_id).where(CLAIMED.c.process_id == process_id)
    with db.read(engine) as connection:
        strays = [job_id for job_id in connection.scalars(query) if job_id not in held]
    if not strays:
        return 0
    with db.write(engine) as connection:
        jobs = _take(
            connection, sa.and_(CLAIMED.c.process_id == process_id, CLAIMED.c.job_id.in_(strays))
        )
        executions.make_ready(connection, jobs, utcnow())
    announce_released(engine, process_id, jobs, ReleaseReason.STRAY)
    return len(jobs)


def release_never_started(
    engine: sa.Engine,
    process_id: int,
    job_ids: t.Collection[int],
    *,
    reason: ReleaseReason,
) -> list[JobRef]:
    """Put back to ready the claims of ``process_id`` on ``job_ids``, jobs its worker claimed
    ahead and never started (it is stopping, or died with them listed in its start ledger),
    keeping the concurrency slots they took; return their jobs.

    Only claims still held by ``process_id`` move: a job whose claim is gone (finished,
    released already, or claimed since by another process) is left alone.
    """
    if not job_ids:
        return []
    with db.write(engine) as connection:
        jobs = _take(
            connection,
            sa.and_(CLAIMED.c.process_id == process_id, CLAIMED.c.job_id.in_(list(job_ids))),
        )
        executions.make_ready(connection, jobs, utcnow())
    announce_released(engine, process_id, jobs, reason)
    return jobs


def fail_claims(
    connection: sa.Connection,
    process_ids: t.Collection[int | None],
    error: str,
    job_ids: t.Collection[int] | None = None,
) -> list[JobRef]:
    """In the caller's transaction: keep the claims of ``process_ids`` (on ``job_ids``, when
    given) as failed executions, counted so in their batches; their FINISH hooks run once
    that commits."""
    jobs = _take_claims(connection, process_ids, job_ids)
    if jobs:
        job_ends.fail(connection, [(job.id, error) for job in jobs], utcnow())
        job_ends.let_go(connection, jobs)
    return jobs


class Resumed(t.NamedTuple):
    """What :func:`resume_steps` did with the lost claims of jobs with step progress."""

    #: Back to ready, to resume from their saved steps.
    resumed: list[JobRef]
    #: Failed, their ``max_resumptions`` spent (their FINISH hooks run once that commits).
    failed: list[JobRef]


def resume_steps(
    connection: sa.Connection, process_ids: t.Collection[int | None], error: str
) -> Resumed:
    """In the caller's transaction: the claims of dead ``process_ids`` whose jobs have step
    progress go back to ready, keeping their concurrency slots, to resume from their saved
    steps (whatever ``SOLIDQ_ON_WORKER_DEATH`` says); those whose ``max_resumptions`` is
    spent fail with ``error`` and where they stopped. Other claims are left to the caller.
    A resumed job hasn't ended, so its batch's counts don't change."""
    lost = lost_steps.of_claims(connection, process_ids)
    resumable = [job.job_id for job in lost if job.spent is None]
    resumed = _take_claims(connection, process_ids, resumable) if resumable else []
    executions.make_ready(connection, resumed, utcnow())
    failed = [
        ref
        for job in lost
        if job.spent is not None
        for ref in fail_claims(connection, process_ids, job.failure(error), [job.job_id])
    ]
    return Resumed(resumed, failed)


def claimed_jobs(engine: sa.Engine, process_ids: t.Collection[int]) -> list[JobRef]:
    """The jobs ``process_ids`` have claimed, in id order. A read that locks nothing: what a
    stopping process says it waits for, or names as it puts them back to ready."""
    query = (
        sa.select(
            JOBS.c.id, JOBS.c.queue_name, JOBS.c.priority, JOBS.c.class_name, JOBS.c.concurrency_key
        )
        .join(CLAIMED, CLAIMED.c.job_id == JOBS.c.id)
        .where(CLAIMED.c.process_id.in_(list(process_ids)))
        .order_by(JOBS.c.id)
    )
    with db.read(engine) as connection:
        return [JobRef(*row, None) for row in connection.execute(query)]


def orphaned_process_ids(engine: sa.Engine) -> list[int | None]:
    """The process ids of claims whose process row is gone (``None`` for claims without one)."""
    query = (
        sa.select(CLAIMED.c.process_id)
        .where(~sa.exists().where(PROCESSES.c.id == CLAIMED.c.process_id))
        .distinct()
    )
    with db.read(engine) as connection:
        return list(connection.scalars(query))


def _take_claims(
    connection: sa.Connection,
    process_ids: t.Collection[int | None],
    job_ids: t.Collection[int] | None = None,
) -> list[JobRef]:
    """Lock and delete the claims of ``process_ids`` (on ``job_ids``, when given); return
    their jobs."""
    ids = [process_id for process_id in process_ids if process_id is not None]
    condition: sa.ColumnElement[bool] = CLAIMED.c.process_id.in_(ids)
    if None in process_ids:
        condition = sa.or_(condition, CLAIMED.c.process_id.is_(None))
    if job_ids is not None:
        condition = sa.and_(condition, CLAIMED.c.job_id.in_(list(job_ids)))
    return _take(connection, condition)


def _take(connection: sa.Connection, condition: sa.ColumnElement[bool]) -> list[JobRef]:
    """Lock and delete the claims matching ``condition``; return their jobs."""
    taken = claims.take(connection, condition)
    if not taken:
        return []
    rows = connection.execute(
        sa.select(
            JOBS.c.id, JOBS.c.queue_name, JOBS.c.priority, JOBS.c.class_name, JOBS.c.concurrency_key
        )
        .where(JOBS.c.id.in_(taken))
        .order_by(JOBS.c.id)
    ).all()
    return [
        JobRef(row.id, row.queue_name, row.priority, row.class_name, row.concurrency_key, None)
        for row in rows
    ]

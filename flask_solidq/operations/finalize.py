"""Finalize: store the outcomes of claimed jobs, many in one transaction.

Finishing is the ceiling of a database queue's throughput (one commit per job caps it), so a
worker hands its outcomes to a finisher that stores whatever completed meanwhile in one
transaction. Each outcome is stored only if its claim still exists and is still this
process's: a job whose worker was pruned (and whose claim was failed or released by someone
else) must not be finished, or signal its semaphore, a second time.

The signals of the stored outcomes (``retry``, ``discard``, ``fail``) are sent after the
commit, and only for the outcomes stored: a receiver never hears of an outcome that rolled
back or was dropped with its claim.
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.operations import attempts
from flask_solidq.operations import back_offs
from flask_solidq.operations import job_ends
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.operations.outcomes import Retry
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from flask_solidq.transitions import claims
from flask_solidq.transitions import executions
from flask_solidq.transitions import jobs as job_rows
from flask_solidq.values import JobRef

#: How many times in all a batch of outcomes that deadlocked (MariaDB: two finishers' deletes
#: of their claims) is stored; the finisher itself tries again after that, with an ERROR line.
DEADLOCK_ATTEMPTS = 5


def finalize_all(
    engine: sa.Engine, process_id: int, outcomes: list[Outcome], *, preserve_finished: bool
) -> list[Outcome]:
    """Store ``outcomes`` of jobs ``process_id`` claimed, in one transaction; return the ones
    stored (the others had lost their claim; a ``DEFERRED`` one's ``retry`` now says when it
    was scheduled). Their FINISH hooks run once that commits (:func:`job_ends.let_go`), then
    the stored outcomes' signals (after the caller's :func:`db.transaction`, when one is
    open)."""
    now = utcnow()
    kept_at_once = _finish_at_once(engine, process_id, outcomes, now, preserve_finished)
    if kept_at_once is not None:
        kept = kept_at_once
        deferred: dict[int, Retry] = {}
    else:
        store = functools.partial(_store_held, engine, process_id, outcomes, now, preserve_finished)
        kept, deferred = db.retrying_deadlocks(store, attempts=DEADLOCK_ATTEMPTS)
    # A deferred job's retry carries the time it was scheduled at, decided in the transaction.
    stored = [
        outcome._replace(retry=deferred[outcome.claimed.id])
        if outcome.claimed.id in deferred
        else outcome
        for outcome in outcomes
        if outcome.claimed.id in kept
    ]
    db.after_commit(engine, functools.partial(announce_all, stored))
    return stored


def announce_all(outcomes: t.Iterable[Outcome]) -> None:
    """Send the signal of each stored outcome: ``retry``, ``discard`` or ``fail`` (a finished
    job's ``perform`` was sent when its run returned). A receiver that raises is logged."""
    for outcome in outcomes:
        job = outcome.job
        sender = type(job) if job is not None else None
        if outcome.kind is OutcomeKind.FAILED:
            signals.send_safely(
                signals.fail,
                sender,
                job=job,
                error=outcome.exception,
                provider_job_id=outcome.claimed.id,
            )
        elif outcome.kind is OutcomeKind.RETRIED:
            wait = outcome.retry.wait if outcome.retry is not None else 0.0
            signals.send_safely(signals.retry, sender, job=job, error=outcome.exception, wait=wait)
        elif outcome.kind is OutcomeKind.DISCARDED:
            signals.send_safely(signals.discard, sender, job=job, error=outcome.exception)


def _finish_at_once(
    engine: sa.Engine,
    process_id: int,
    outcomes: list[Outcome],
    now: dt.datetime,
    preserve_finished: bool,
) -> set[int] | None:
    """The dialect's own way to finish a group of finished jobs of no batch outside a
    caller's transaction (PostgreSQL: one statement; SQLite and MySQL: a transaction on the
    driver's connection, see :meth:`flask_solidq.storage.dialects.base.Dialect.finish_held`);
    return the ids of the jobs it finished, or None where it has none (nothing written)."""
    if db.in_transaction(engine) or not _only_finished(outcomes):
        return None
    return job_ends.finish_held(
        engine,
        process_id,
        [job_ref(outcome) for outcome in outcomes],
        now,
        preserve_finished=preserve_finished,
        deadlock_attempts=DEADLOCK_ATTEMPTS,
    )


def _only_finished(outcomes: list[Outcome]) -> bool:
    """Whether every outcome is a finished (or discarded) job of no batch."""
    return all(o.kind in _DONE and o.claimed.batch_id is None for o in outcomes)


def _store_held(
    engine: sa.Engine,
    process_id: int,
    outcomes: list[Outcome],
    now: dt.datetime,
    preserve_finished: bool,
) -> tuple[set[int], dict[int, Retry]]:
    """Release the claims ``process_id`` still holds among ``outcomes`` and store those
    outcomes, in one transaction; return the job ids stored, and the retries of the deferred
    ones (``RateLimited``) with the times they were scheduled at. Their batches count them
    in it too (:mod:`flask_solidq.operations.job_ends`)."""
    deferring = [o for o in outcomes if o.kind is OutcomeKind.DEFERRED]
    with db.write(engine) as connection:
        # The budgets of jobs told 429 are locked before the claims, the order a claim locks
        # them in, so a claim and a finisher never wait on each other crosswise (InnoDB).
        paused = back_offs.pause(connection, deferring) if deferring else None
        kept = claims.delete_held(connection, process_id, [o.claimed.id for o in outcomes])
        held = [outcome for outcome in outcomes if outcome.claimed.id in kept]
        _store(connection, held, kept, now, preserve_finished=preserve_finished)
        job_ends.let_go(connection, [job_ref(o) for o in held if not keeps_its_slot(o, now)])
        deferred = {}
        if paused is not None:
            deferring = [o for o in held if o.kind is OutcomeKind.DEFERRED]
            deferred = back_offs.defer(connection, paused, deferring, now)
    return set(kept), deferred


def _store(
    connection: sa.Connection,
    outcomes: list[Outcome],
    started: dict[int, dt.datetime],
    now: dt.datetime,
    *,
    preserve_finished: bool,
) -> None:
    done = {o.claimed.id: o.claimed.batch_id for o in outcomes if o.kind in _DONE}
    failed = [o for o in outcomes if o.kind is OutcomeKind.FAILED]
    job_ends.store_outcomes(
        connection,
        done,
        [(o.claimed.id, t.cast(str, o.error)) for o in failed],
        {o.claimed.id: o.claimed.batch_id for o in failed},
        started,
        now,
        preserve_finished=preserve_finished,
    )
    _save_progress(connection, [o for o in failed if o.arguments is not None], now)
    # An interrupted job (steps that resume) goes back like a retry due now.
    retried = [o for o in outcomes if o.kind in _AGAIN]
    if retried:
        attempts.record(connection, [(o.claimed.id, o.error) for o in retried if o.error], now)
        _schedule_retries(connection, retried, now)


def _schedule_retries(connection: sa.Connection, outcomes: list[Outcome], now: dt.datetime) -> None:
    """Give retried jobs their next attempt. A retry is the same job row going on (its id,
    its calls and its keys stay; a job stored without a rate-limit key takes its current
    one), with the updated payload, queue and priority."""
    retries = [(o.claimed, t.cast(Retry, o.retry)) for o in outcomes]
    job_rows.retry(
        connection,
        [
            job_rows.RetryRow(
                claimed.id,
                retry.arguments,
                retry.scheduled_at,
                retry.queue_name,
                retry.priority,
                retry.rate_limit_key,
            )
            for claimed, retry in retries
        ],
        now,
    )
    refs = [
        JobRef(
            id=claimed.id,
            queue_name=retry.queue_name,
            priority=retry.priority,
            class_name=claimed.class_name,
            concurrency_key=claimed.concurrency_key,
            scheduled_at=retry.scheduled_at if retry.scheduled_at > now else None,
        )
        for claimed, retry in retries
    ]
    # A retry due now keeps the concurrency slot its job holds: giving it back and taking it
    # again would let a discard limit destroy the job, or a newer job overtake it.
    executions.make_ready(connection, [ref for ref in refs if ref.scheduled_at is None], now)
    executions.schedule(connection, [ref for ref in refs if ref.scheduled_at is not None], now)


def _save_progress(connection: sa.Connection, outcomes: list[Outcome], now: dt.datetime) -> None:
    """Store the payloads of failed jobs with step progress, for a retry to resume from."""
    job_rows.save_arguments(connection, [(o.claimed.id, o.arguments) for o in outcomes], now)


def keeps_its_slot(outcome: Outcome, now: dt.datetime) -> bool:
    """Whether the outcome's job holds on to what it holds (a retry due at once; never a
    deferred job, which waits as scheduled, whenever it is due)."""
    return (
        outcome.kind is not OutcomeKind.DEFERRED
        and outcome.retry is not None
        and outcome.retry.scheduled_at <= now
    )


def job_ref(outcome: Outcome) -> JobRef:
    """The :class:`JobRef` of an outcome's job, for the controls' hooks."""
    return JobRef.of(outcome.claimed)


_DONE = (OutcomeKind.FINISHED, OutcomeKind.DISCARDED)
_AGAIN = (OutcomeKind.RETRIED, OutcomeKind.INTERRUPTED)

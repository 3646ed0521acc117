"""Claim: ready executions become claimed executions of one process (the worker's hot path).

One transaction per queue relation, as in Solid Queue: lock up to ``limit`` ready rows in
priority order (``FOR UPDATE SKIP LOCKED``, so workers never wait on each other), insert their
claims, delete them from ready by primary key, and read the claimed jobs' payloads, so the
worker threads need no query of their own. Paused queues are filtered inside the same select
(``NOT IN`` over the small pauses table), which saves a query per poll. On MySQL/MariaDB that
select names its index, so it locks only the rows it claims (see :func:`_forcing_index`).
Queue order beats priority: a later queue is only read when the earlier ones had fewer jobs
than the limit.

On PostgreSQL the whole claim is one statement (data-modifying CTEs), in autocommit.

When a control may defer jobs at claim (a rate-limited definition is registered in this
process), the claim reads the candidates' jobs first, inside the same transaction, and lets the
CLAIM hooks admit or defer each, in queue order: admitted jobs are claimed, deferred ones move
to scheduled executions. A batch with no limited job costs the same statements as before
(the jobs are read before the inserts instead of after); only the PostgreSQL one-statement
claim gives way to the transaction. A hook that fails on the database for a reason it then
remembers (the budgets table dropped under a running worker) asks for the claim to run again
(:class:`~flask_solidq.controls.base.ClaimAgain`): it is rolled back and run once more.

A worker claiming ahead of its idle threads (``prefetch``) passes ``limited_cap``, its idle
threads: a claim then admits (charges a budget for) at most that many rate-limited jobs, so
each starts at once and the limit's window bound holds at job start, not only at claim. The
claim takes the candidates in order up to the first rate-limited one past the cap and leaves
that one and every later one ready, untouched (not deleted, not charged): what it claims is a
prefix of the queue order, as without the cap, and it says it held jobs back so the worker
claims them once it has threads for them.

Only a registered process claims. A process paused past the alive threshold (SIGSTOP, a VM
paused, a debugger) is pruned by a live supervisor, which fails or releases its claims and
deletes its row; when it wakes, its claim thread may poll before its heartbeat finds the row
gone. So every claim locks the process's row in its own transaction (shared, in the select of
its candidates, which finds none when the row is gone): no claim can commit under a process
that no longer exists, whichever of the pruning and the claim locks the row first.

A claim that took jobs sends ``signals.claim`` once it committed (one per worker poll).
"""

from __future__ import annotations

import functools
import time
import typing as t
import weakref

import sqlalchemy as sa

from flask_solidq import controls
from flask_solidq import signals
from flask_solidq.controls.base import ClaimClock
from flask_solidq.controls.base import Deferral
from flask_solidq.definitions import registry
from flask_solidq.models.tables import JOBS
from flask_solidq.operations import claim_batch_values
from flask_solidq.operations import claim_candidates
from flask_solidq.operations.claim_batch_values import ClaimBatch as ClaimBatch
from flask_solidq.operations.queue_selector import QueueSelector as QueueSelector
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import naive_utc
from flask_solidq.timing import utcnow
from flask_solidq.transitions import claims
from flask_solidq.transitions import executions
from flask_solidq.values import ClaimedJob as ClaimedJob
from flask_solidq.values import JobRef

T = t.TypeVar("T")


#: How many times in all a claim that deadlocked (MySQL) or found the database locked is tried,
#: with pauses that grow to a quarter of a second
#: (:func:`flask_solidq.storage.db.retrying_deadlocks`):
#: 12 worker processes of 5 threads, with bulk and single enqueues running beside them, made a
#: MariaDB claim's delete of its ready rows deadlock more than 3 times in a row, and one
#: claim can't hold up the others (it locks with SKIP LOCKED), so it may as well try again.
DEADLOCK_RETRIES = 10

#: Seconds a PostgreSQL claim goes straight to its transaction after a batch of one queue
#: relation held jobs the CLAIM hooks check (instead of first trying the one statement that
#: would refuse such a batch), unless a batch without any comes first.
CHECKED_MEMORY = 1.0

#: engine -> queue relation -> until when its claims skip the one-statement attempt.
_checked_recently: weakref.WeakKeyDictionary[sa.Engine, dict[str | None, float]] = (
    weakref.WeakKeyDictionary()
)


def claim(
    engine: sa.Engine,
    selector: QueueSelector,
    limit: int,
    process_id: int,
    *,
    skip_locked: bool = True,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` ready jobs for ``process_id`` and return them, queue by queue;
    see :func:`claim_batch`."""
    return claim_batch(engine, selector, limit, process_id, skip_locked=skip_locked).jobs


def claim_batch(
    engine: sa.Engine,
    selector: QueueSelector,
    limit: int,
    process_id: int,
    *,
    skip_locked: bool = True,
    limited_cap: int | None = None,
    charge_ahead: bool = False,
) -> ClaimBatch:
    """Claim up to ``limit`` ready jobs for ``process_id``, queue by queue; say which were
    claimed and which the controls deferred.

    ``limited_cap``: the most rate-limited jobs to admit (see the module's docstring); a
    claim that meets one more stops there, later queues included.

    ``charge_ahead``: the caller starts each job of the batch's ``starts`` no earlier than
    its moment there, so a rate limit may admit a job a few milliseconds ahead of the clock
    rather than send it back to wait (see "Charging ahead" in
    :mod:`~flask_solidq.controls.rate_limit.gcra`).

    Each queue's claim commits on its own. A deadlock (MySQL) is tried again. When jobs were
    claimed, ``signals.claim`` is sent after the commit. A ``process_id`` that is not
    registered (pruned while it was paused) claims nothing.
    """
    jobs: list[ClaimedJob] = []
    deferrals: list[Deferral] = []
    limited: list[int] = []
    starts: dict[int, float] = {}
    held_back = 0
    for queue_name in selector.relations(engine):
        if len(jobs) >= limit:
            break
        cap = None if limited_cap is None else max(0, limited_cap - len(limited))
        claim_once = functools.partial(
            _claim_from,
            engine,
            queue_name,
            limit - len(jobs),
            process_id,
            skip_locked,
            cap,
            charge_ahead,
        )
        claimed = db.retrying_deadlocks(
            functools.partial(_again_if_asked, engine, claim_once), attempts=DEADLOCK_RETRIES
        )
        jobs.extend(claimed.jobs)
        deferrals.extend(claimed.deferrals)
        limited.extend(claimed.limited)
        starts.update(claimed.starts)
        held_back += claimed.held_back
        if claimed.held_back:
            break  # queue order: nothing of a later queue goes ahead of the held-back jobs
    if jobs and signals.claim.receivers:
        job_ids = [job.id for job in jobs]
        announce = functools.partial(
            signals.send_safely,
            signals.claim,
            None,
            process_id=process_id,
            job_ids=job_ids,
            size=len(job_ids),
        )
        db.after_commit(engine, announce)
    return ClaimBatch(jobs, deferrals, tuple(limited), held_back, starts)


def _again_if_asked(engine: sa.Engine, claim_once: t.Callable[[], T]) -> T:
    """Run ``claim_once``, and once more if a CLAIM hook asked (:class:`controls.ClaimAgain`:
    it found a table gone under this worker, and remembered). Not inside a caller's
    transaction, which the failure rolled back: only the caller can run that again."""
    try:
        return claim_once()
    except controls.ClaimAgain:
        if db.in_transaction(engine):
            raise
        return claim_once()


def _claim_from(
    engine: sa.Engine,
    queue_name: str | None,
    limit: int,
    process_id: int,
    skip_locked: bool,
    cap: int | None = None,
    charge_ahead: bool = False,
) -> ClaimBatch:
    """One queue's claim, admitting at most ``cap`` rate-limited jobs (None: no cap).

    When no control may defer a job this process can claim, no hook runs. Otherwise the
    candidates' jobs are read first and the CLAIM hooks decide, in the same transaction. On
    PostgreSQL a batch with no job a control may defer is still claimed in one statement;
    only a batch holding one takes the transaction.
    """
    params = {"queue_name": queue_name, "limit": limit, "process_id": process_id}
    checked = controls.checked_at_claim()
    memory = _checked_recently.setdefault(engine, {})
    one_statement = db.dialect(engine).writes_in_one_statement and not db.in_transaction(engine)
    if one_statement and memory.get(queue_name, 0.0) < time.monotonic():
        claimed_at_once = _claim_in_one_statement(engine, params, skip_locked, checked)
        if claimed_at_once is not None:
            return _check_late_definitions(engine, claimed_at_once, process_id, cap)
        # A batch with checked jobs: they're likely to keep coming for a while (a backlog
        # waiting on its rate limit), so skip the one-statement attempt that would fail.
        memory[queue_name] = time.monotonic() + CHECKED_MEMORY
    held_back = 0
    with db.write(engine) as connection:
        candidates = connection.execute(
            claim_candidates.candidates(queue_name, skip_locked), params
        ).all()
        if not candidates:
            return ClaimBatch([], [])
        clock = ClaimClock(
            functools.partial(database_clock.now, connection), charges_ahead=charge_ahead
        )
        job_ids = [job_id for _, job_id in candidates]
        deferrals: list[Deferral] = []
        if checked:
            # Read before the claims are inserted, so the hooks see every candidate.
            jobs = _read_jobs(connection, job_ids)
            if one_statement and not any(job.class_name in checked for job in jobs):
                memory.pop(queue_name, None)
            if cap is not None:
                # A limited definition imported only now must count against the cap too.
                if _import_unknown(jobs):
                    checked = controls.checked_at_claim()
                jobs, held_back = claim_batch_values.within_cap(jobs, checked, cap)
                kept = {job.id for job in jobs}
                candidates = [row for row in candidates if row.job_id in kept]
                job_ids = [job_id for job_id in job_ids if job_id in kept]
            deferrals = controls.claim(connection, jobs, clock)
            _defer(connection, deferrals, clock)
            deferred = {deferral.job.id for deferral in deferrals}
            job_ids = [job_id for job_id in job_ids if job_id not in deferred]
        claims.claim(connection, process_id, [(i, clock.charged_at(i)) for i in job_ids])
        executions.take_ready(connection, [id_ for id_, _ in candidates])
        if not checked:
            jobs = _read_jobs(connection, job_ids)
    if not checked:
        return _check_late_definitions(engine, jobs, process_id, cap)
    # After the commit (or the caller's, inside solidq.transaction()).
    db.after_commit(engine, functools.partial(controls.after_claim, engine, deferrals))
    claimed = set(job_ids)
    taken = [job for job in jobs if job.id in claimed]
    limited = tuple(job.id for job in taken if job.class_name in checked)
    return ClaimBatch(
        taken, deferrals, limited, held_back, claim_batch_values.starts(clock, claimed)
    )


def _import_unknown(jobs: list[ClaimedJob]) -> list[ClaimedJob]:
    """Import the definitions of ``jobs`` this process hasn't registered (a worker would
    import them to perform the jobs anyway); return those jobs."""
    unknown = [job for job in jobs if not registry.is_registered(job.class_name)]
    for job in unknown:
        registry.find(job.class_name, job.arguments)
    return unknown


def _read_jobs(connection: sa.Connection, job_ids: list[int]) -> list[ClaimedJob]:
    """The jobs of ``job_ids``, in that order."""
    if not job_ids:
        return []
    by_id = {
        row.id: ClaimedJob._make(row) for row in connection.execute(_SELECT_JOBS, {"ids": job_ids})
    }
    return [by_id[job_id] for job_id in job_ids if job_id in by_id]


def _defer(connection: sa.Connection, deferrals: list[Deferral], clock: ClaimClock) -> None:
    """Give deferred jobs scheduled executions at their time to be looked at again (the jobs'
    own ``scheduled_at`` stays as enqueued), and tell the dispatchers when the first is due."""
    if not deferrals:
        return
    refs = [JobRef.of(deferral.job, scheduled_at=deferral.until) for deferral in deferrals]
    executions.schedule(connection, refs, clock())
    earliest = min(deferral.until for deferral in deferrals)
    db.notify(connection, db.SCHEDULED_CHANNEL, repr(earliest.timestamp()))


def _check_late_definitions(
    engine: sa.Engine, jobs: list[ClaimedJob], process_id: int, cap: int | None = None
) -> ClaimBatch:
    """Check the jobs a claim took without hooks whose definitions this process hadn't
    imported yet.

    Such a claim runs no hook because no definition this process knows is limited; a job
    of a definition it had not imported could still be. Its definition is imported now (the
    worker would import it to perform it anyway) and, if that makes a control act, the hooks
    run over those jobs in a transaction of their own, moving the deferred ones from their
    claim to a scheduled execution. Rare: a worker usually imports every job at start.

    With a ``cap`` (rate-limited jobs the claim may admit), the limited jobs past it are not
    checked: their claims go back to ready, where the worker's next claim finds them (they
    were never started, and no budget was charged for them).
    """
    unknown = _import_unknown(jobs)
    checked = controls.checked_at_claim() if unknown else frozenset()
    limited = [job for job in unknown if job.class_name in checked]
    if not limited:
        return ClaimBatch(jobs, [])
    over = limited[cap:] if cap is not None else []
    over_ids = {job.id for job in over}
    checking = [job for job in unknown if job.id not in over_ids]
    deferrals = _again_if_asked(
        engine, functools.partial(_check_claimed, engine, process_id, checking, over)
    )
    db.after_commit(engine, functools.partial(controls.after_claim, engine, deferrals))
    gone = {deferral.job.id for deferral in deferrals} | over_ids
    taken = [job for job in jobs if job.id not in gone]
    admitted = tuple(job.id for job in taken if job.class_name in checked)
    return ClaimBatch(taken, deferrals, admitted, len(over))


def _check_claimed(
    engine: sa.Engine, process_id: int, jobs: list[ClaimedJob], over: list[ClaimedJob]
) -> list[Deferral]:
    """In one transaction: give the claims of ``over`` back to ready, run the CLAIM hooks
    over ``jobs``, and move the deferred ones from their claim to a scheduled execution."""
    with db.write(engine) as connection:
        clock = ClaimClock(functools.partial(database_clock.now, connection))
        if over:
            claims.give_back(connection, process_id, [job.id for job in over])
            executions.make_ready(
                connection, [JobRef.of(job) for job in over], clock.read_or_host_time()
            )
        deferrals = controls.claim(connection, jobs, clock)
        if deferrals:
            claims.give_back(connection, process_id, [deferral.job.id for deferral in deferrals])
            _defer(connection, deferrals, clock)
    return deferrals


def _claim_in_one_statement(
    engine: sa.Engine, params: dict[str, t.Any], skip_locked: bool, checked: frozenset[str]
) -> list[ClaimedJob] | None:
    """The whole claim as one statement in autocommit, one round trip instead of four
    (:meth:`flask_solidq.storage.dialects.base.Dialect.claim_in_one_statement`). None when
    the batch holds a job of a ``checked`` definition: nothing was claimed, and the hooks must
    decide."""
    rows = db.dialect(engine).claim_in_one_statement(
        engine, {**params, "now": naive_utc(utcnow())}, skip_locked=skip_locked, checked=checked
    )
    width = len(ClaimedJob._fields)
    if checked and any(row[width] for row in rows):
        return None
    jobs = (ClaimedJob(*row[:width]) for row in rows)
    return sorted(jobs, key=lambda job: (job.priority, job.id))


#: The columns of a :class:`ClaimedJob`, in its order.
CLAIMED_JOB_COLUMNS = (
    JOBS.c.id,
    JOBS.c.active_job_id,
    JOBS.c.class_name,
    JOBS.c.queue_name,
    JOBS.c.priority,
    JOBS.c.arguments,
    JOBS.c.concurrency_key,
    JOBS.c.rate_limit_key,
    JOBS.c.batch_id,
    JOBS.c.rate_limit_charges,
    JOBS.c.scheduled_at,
)

_SELECT_JOBS = sa.select(*CLAIMED_JOB_COLUMNS).where(
    JOBS.c.id.in_(sa.bindparam("ids", expanding=True))
)

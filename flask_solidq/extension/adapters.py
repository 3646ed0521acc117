"""The adapters behind ``perform_later``: where an enqueued job goes.

* ``"solidq"``: the database queue (the default). An enqueue joins the app session's
  transaction when that has written on the queue's database (see
  :mod:`flask_solidq.storage.app_transaction`).
* ``"inline"``: performed at once, in this thread, after its arguments went through the same
  JSON round trip a stored job's do (so unstorable arguments fail here too). Waits are ignored;
  exceptions propagate to the caller of ``perform_later``.
* ``"test"``: recorded only, for :mod:`flask_solidq.testing` (in the batch whose block is
  open, if any: :mod:`flask_solidq.testing.batches`).

Controls (``limits_rate``, ``coalesce``, ``limits_concurrency``) act only under ``"solidq"``.

Every adapter first binds each job's arguments to its signature (``SOLIDQ_CHECK_ARGUMENTS``,
on by default), so a call a worker couldn't make raises ``TypeError`` before anything happens.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import typing as t

import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.config import Adapter
from flask_solidq.definitions import job as job_definitions
from flask_solidq.operations import enqueue as enqueue_operation
from flask_solidq.processes import job_notices
from flask_solidq.state import get_state
from flask_solidq.storage import app_transaction
from flask_solidq.storage import db
from flask_solidq.testing import batches as testing_batches
from flask_solidq.timing import utcnow
from flask_solidq.tracing import hooks as tracing_hooks

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.state import SolidQState


def enqueue(job: Job, state: SolidQState | None = None) -> None:
    """Enqueue ``job`` through the current app's adapter (``state``'s, when the caller has
    looked it up already); requires an app context.

    :raises TypeError: the job's arguments don't fit its signature; nothing was enqueued.
    """
    if state is None:
        state = get_state()
    if state.settings.check_arguments:
        type(job)._check_arguments(job.arguments, job.kwargs)
    around = tracing_hooks.AROUND_ENQUEUE.function
    if around is None:
        _store(job, state)
    else:
        around([job], functools.partial(_store, job, state))
    if state.adapter is Adapter.INLINE:
        job.perform_now()


def _store(job: Job, state: SolidQState) -> None:
    """Store ``job`` where ``state``'s adapter keeps it (none for ``"inline"``, which only
    checks its arguments' round trip), then send ``enqueue``."""
    if state.adapter is Adapter.SOLIDQ:
        state.check_tables()
        with app_transaction.joining(state):
            enqueue_operation.enqueue(state.engine, job)
            if job.successfully_enqueued:
                _wake_local_processes(state.engine, [job])
    else:
        _round_trip_arguments(job)
        if state.adapter is Adapter.TEST:
            testing_batches.record(state, job)
    if job.successfully_enqueued and signals.enqueue.receivers:  # none: nothing to send
        signals.enqueue.send(type(job), job=job)


def enqueue_all(jobs: t.Sequence[Job]) -> None:
    """Enqueue ``jobs`` through the current app's adapter, in bulk where the adapter can.

    :raises ValueError: a job is given twice (the same instance, or two with the same
        ``job_id``); nothing was enqueued.
    :raises TypeError: a job's arguments don't fit its signature; nothing was enqueued.
    """
    first_at: dict[str, int] = {}
    for position, job in enumerate(jobs):
        earlier = first_at.setdefault(job.job_id, position)
        if earlier != position:
            same = "the same job" if jobs[earlier] is job else "two jobs with the same job_id"
            raise ValueError(
                f"perform_all_later() was given {same} ({type(job).job_name},"
                f" job_id={job.job_id!r}) at positions {earlier} and {position}; each job is"
                " stored once. Build one job per enqueue (Definition.new(...)); nothing was"
                " enqueued."
            )
    state = get_state()
    check_arguments_all(jobs)
    if state.adapter is not Adapter.SOLIDQ:
        for job in jobs:
            enqueue(job, state)
        return
    if not jobs:
        return
    around = tracing_hooks.AROUND_ENQUEUE.function
    if around is None:
        _store_all(jobs, state)
    else:
        around(jobs, functools.partial(_store_all, jobs, state))


def _store_all(jobs: t.Sequence[Job], state: SolidQState) -> None:
    """Store ``jobs`` in the database queue in bulk, then send ``enqueue`` for each."""
    state.check_tables()
    with app_transaction.joining(state):
        enqueue_operation.enqueue_all(state.engine, jobs)
        _wake_local_processes(state.engine, [job for job in jobs if job.successfully_enqueued])
    for job in jobs:
        if job.successfully_enqueued:
            signals.enqueue.send(type(job), job=job)


def check_arguments_all(jobs: t.Sequence[Job]) -> None:
    """Bind every job's arguments to its signature, unless ``SOLIDQ_CHECK_ARGUMENTS`` is off;
    requires an app context.

    :raises TypeError: a job's arguments don't fit; the message gives its position.
    """
    if get_state().settings.check_arguments:
        for position, job in enumerate(jobs):
            type(job)._check_arguments(job.arguments, job.kwargs, position)


def _wake_local_processes(engine: sa.Engine, jobs: t.Sequence[Job]) -> None:
    """Tell the idle workers (ready jobs) and dispatchers (scheduled ones) of this process and
    this machine, once the jobs are committed: they start at once instead of at their next
    poll. (Enqueues don't ``NOTIFY`` on PostgreSQL: see
    :mod:`flask_solidq.processes.pg_listener`.)"""
    due: set[str] = set()
    scheduled_at: list[dt.datetime] = []
    for job in jobs:
        if job.scheduled_at is None or job.scheduled_at <= (job.enqueued_at or job.scheduled_at):
            due.add(job.queue_name)
        else:
            scheduled_at.append(job.scheduled_at)
    if due:
        db.after_commit(
            engine, lambda: job_notices.announce_ready(engine, notified=False, queues=due)
        )
    if scheduled_at:
        earliest = min(scheduled_at)
        db.after_commit(
            engine, lambda: job_notices.announce_scheduled(engine, earliest, notified=False)
        )


def _round_trip_arguments(job: Job) -> None:
    """Put the job's arguments through the JSON a stored job's go through, so arguments the
    database queue couldn't store fail here too, and the job sees what a worker would."""
    job.load_payload(json.loads(json.dumps(job.payload())))
    job.mark_enqueued(utcnow())
    job.successfully_enqueued = True


#: A job's perform_later reaches this module's enqueue.
job_definitions.ADAPTER.fill(enqueue)

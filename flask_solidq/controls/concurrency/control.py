"""The concurrency limit's hooks: a slot taken as a job becomes due (or the job blocked or
discarded when none is free), given back when the job leaves its claim, and the blocked jobs
moved on by the dispatcher. The declaration is in :mod:`.declaration`, the slot rows in
:mod:`.semaphores`.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import json
import logging
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq.controls.base import Control
from flask_solidq.controls.base import Deferral
from flask_solidq.controls.base import Dispatched
from flask_solidq.controls.concurrency import semaphores
from flask_solidq.definitions import registry
from flask_solidq.definitions.declared import Declared
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import JOBS
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from flask_solidq.transitions import executions
from flask_solidq.values import JobRef
from flask_solidq.values import is_coalesced
from flask_solidq.values import opened_by_collecting

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ControlKeys
    from flask_solidq.values import JobRow

from flask_solidq.definitions.concurrency_limits import DEFAULT_DURATION
from flask_solidq.definitions.concurrency_limits import ConcurrencyLimit
from flask_solidq.definitions.concurrency_limits import OnConflict

logger = logging.getLogger("flask_solidq")


class ConcurrencyControl(Control):
    """The hooks of ``limits_concurrency``: the key at enqueue, a slot (or blocking, or
    discarding) when the job becomes ready, the slot back when it leaves its claim."""

    def concerns_enqueue(self, declared: Declared) -> bool:
        return declared.active_concurrency_limit is not None

    def stamp(self, job: Job, row: ControlKeys) -> None:
        limit = type(job)._declared.active_concurrency_limit
        row["concurrency_key"] = (
            limit.stored_key(type(job).job_name, job.arguments, job.kwargs) if limit else None
        )

    def acts_on_dispatch(self, row: JobRow) -> bool:
        return row["concurrency_key"] is not None

    def dispatch(self, connection: sa.Connection, jobs: list[JobRef]) -> Dispatched:
        """Give each limited job a slot, or block it, or discard it (``on_conflict``). A
        discard never destroys work a coalesced job holds: a coalesced job's retry
        fails instead, its work kept, and a job that collected calls (its definition switched
        to ``"discard"`` after dropping ``"collect"``) is blocked, to reach a worker and fail
        there with its calls (see :func:`_what_a_discard_keeps`).

        Semaphores are locked in key order, so two transactions that both touch keys a and b
        always lock a first and can't deadlock each other.
        """
        if not any(job.concurrency_key for job in jobs):
            return Dispatched(jobs, set())
        # Leases and blocked jobs expire by the database's clock, which the dispatcher's
        # maintenance reads: one host's clock running ahead would end them early.
        now = database_clock.now(connection)
        held_back: set[int] = set()
        discarded: set[int] = set()
        failed: dict[int, str] = {}
        for job in sorted(jobs, key=lambda job: (job.concurrency_key or "", job.id)):
            limit = limit_of(connection, job)
            if limit is None or semaphores.wait(
                connection, t.cast(str, job.concurrency_key), limit.to, limit.duration, now
            ):
                continue
            held_back.add(job.id)
            conflict: OnConflict | _Kept = limit.on_conflict
            if conflict is OnConflict.DISCARD:
                conflict = _what_a_discard_keeps(connection, job)
            if conflict is _Kept.FAILED:
                failed[job.id] = _retry_failure(job)  # dispatch.make_ready stores it
            elif conflict is OnConflict.DISCARD:
                discarded.add(job.id)  # dispatch.make_ready deletes it
            else:
                expires_at = now + dt.timedelta(seconds=limit.duration)
                executions.block(
                    connection,
                    job.id,
                    job.queue_name,
                    job.priority,
                    t.cast(str, job.concurrency_key),
                    expires_at,
                    utcnow(),
                )
        return Dispatched([job for job in jobs if job.id not in held_back], discarded, failed)

    def finish(self, engine: sa.Engine, jobs: list[JobRef]) -> None:
        """Give each job's slot back, then let the next blocked job of its key take it.

        After the outcome's own transaction: a failure here can't undo a finished job, and the
        dispatcher's maintenance frees what a failure left behind.
        """
        for job in sorted(jobs, key=lambda job: (job.concurrency_key or "", job.id)):
            if job.concurrency_key is None:
                continue
            try:
                self._signal(engine, job)
            except sa.exc.SQLAlchemyError:
                # The job's id, not its key: keys are built from arguments, and logs mustn't
                # carry those.
                logger.warning(
                    "SolidQ couldn't release the concurrency slot of job %s", job.id, exc_info=True
                )

    def after_claim(self, engine: sa.Engine, deferrals: list[Deferral]) -> None:
        """A job deferred at claim (by its rate limit) gives its slot back, and the next
        blocked job of its key takes it; the deferred job takes a slot again, or blocks, when
        it comes back (the DISPATCH hook)."""
        self.finish(
            engine,
            [JobRef.of(deferral.job) for deferral in deferrals if deferral.job.concurrency_key],
        )

    def maintain(self, engine: sa.Engine, batch_size: int) -> None:
        maintain(engine, batch_size)

    def _signal(self, engine: sa.Engine, job: JobRef) -> None:
        """Hand the job's slot on; a key left over after its definition dropped the limit
        still hands on to the jobs it blocked, as maintenance would (:data:`LEFTOVER`)."""
        to, duration = slot_terms(limit_of(engine, job))
        key = t.cast(str, job.concurrency_key)
        db.retrying_deadlocks(lambda: semaphores.hand_over(engine, key, to, duration))


class _Kept(enum.Enum):
    """What a discard conflict does instead to a job holding coalesced work."""

    #: A coalesced job's retry: it fails, with its work kept.
    FAILED = "failed"


def _what_a_discard_keeps(connection: sa.Connection, job: JobRef) -> OnConflict | _Kept:
    """What a discard conflict does to ``job``: discard it, unless it holds coalesced work.

    A job opened by ``"collect"`` holds its calls (only a deploy can put it before a discard
    limit, since the two can't be declared together): blocked, it waits its turn and fails on
    a worker with its calls. Any other coalesced job that is no longer its key's open job,
    which it stops being when it starts or fails, is going round again (a retry, by its rules
    or by hand): it fails with its work kept. A coalesced job on its first way to ready still
    is its key's open job, and a conflict discards it as it would any call. Read only on a
    conflict."""
    row = connection.execute(
        sa.select(
            JOBS.c.arguments,
            sa.exists().where(COALESCE_KEYS.c.job_id == job.id).label("open"),
        ).where(JOBS.c.id == job.id)
    ).first()
    if row is None or not is_coalesced(row.arguments):
        return OnConflict.DISCARD
    if opened_by_collecting(row.arguments):
        return OnConflict.BLOCK
    return OnConflict.DISCARD if row.open else _Kept.FAILED


def _retry_failure(job: JobRef) -> str:
    """The error JSON a coalesced job's retry that found its key's slots taken fails with:
    kept, with its arguments and calls, for a human (or a later retry) to decide."""
    message = (
        f"The retry of job {job.id} found every slot of its concurrency key taken. With"
        " limits_concurrency(on_conflict='discard') a coalesced job's retry isn't discarded:"
        " it fails with its work kept. Retry it once the slot is free, or declare"
        " on_conflict='block' so retries wait their turn."
    )
    logger.warning(
        "SolidQ job %s: its retry found its concurrency slots taken; it failed with its work"
        " kept (on_conflict='discard' never discards a coalesced job's retry)",
        job.id,
    )
    error_class = errors.EnqueueError
    return json.dumps(
        {
            "exception_class": f"{error_class.__module__}.{error_class.__qualname__}",
            "message": message,
            "backtrace": [],
        }
    )


#: The slots and lease of a key whose definition no longer declares a limit (or can't be
#: loaded): one, as long as the default duration, so the jobs it blocked still go one by one.
LEFTOVER = (1, DEFAULT_DURATION)


def slot_terms(limit: ConcurrencyLimit | None) -> tuple[int, float]:
    """``limit``'s slots and lease, or :data:`LEFTOVER`'s for a key left without one."""
    return (limit.to, limit.duration) if limit is not None else LEFTOVER


def limit_of(source: sa.Connection | sa.Engine, job: JobRef) -> ConcurrencyLimit | None:
    """The concurrency limit the job's definition declares now; None when it declares none
    or can't be loaded (then the job isn't limited, as in Solid Queue).

    ``source`` (a connection in a transaction, or the engine) is only read when this process
    hasn't registered the definition yet; the usual case costs no query.
    """
    try:
        definition = registry.lookup(job.class_name, _import_path(source, job))
    except errors.JobNotFound:
        return None
    return definition._declared.active_concurrency_limit


def _import_path(source: sa.Connection | sa.Engine, job: JobRef) -> str | None:
    """The stored import path of the job's definition, read only when this process hasn't
    registered the definition yet."""
    if registry.is_registered(job.class_name):
        return None
    query = sa.select(JOBS.c.arguments).where(JOBS.c.id == job.id)
    if isinstance(source, sa.Engine):
        with db.read(source) as connection:
            payload = connection.scalar(query)
    else:
        payload = source.scalar(query)
    try:
        return t.cast("str | None", json.loads(payload or "{}").get("job"))
    except ValueError:
        return None


def maintain(engine: sa.Engine, batch_size: int) -> None:
    """The dispatcher's failsafe for holders that died without giving their slot back: delete
    expired semaphores, then release a blocked job of each key left with a free slot."""
    semaphores.expire_all(engine, batch_size)
    for key in semaphores.releasable_keys(engine, batch_size):
        job = _blocked_job_of(engine, key)
        if job is None:
            continue
        to, duration = slot_terms(limit_of(engine, job))
        db.retrying_deadlocks(functools.partial(semaphores.release_one, engine, key, to, duration))


def _blocked_job_of(engine: sa.Engine, key: str) -> JobRef | None:
    query = (
        sa.select(
            JOBS.c.id, JOBS.c.queue_name, JOBS.c.priority, JOBS.c.class_name, JOBS.c.concurrency_key
        )
        .join(BLOCKED, BLOCKED.c.job_id == JOBS.c.id)
        .where(BLOCKED.c.concurrency_key == key)
        .limit(1)
    )
    with db.read(engine) as connection:
        row = connection.execute(query).first()
    return None if row is None else JobRef(*row, scheduled_at=None)


CONTROL = ConcurrencyControl()

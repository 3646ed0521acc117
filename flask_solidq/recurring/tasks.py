"""Recurring tasks: the ``SOLIDQ_RECURRING`` entries, their rows in ``solidq_recurring_tasks``,
and each tick of their schedules enqueued exactly once.

Exactly once rests, as in Solid Queue, on the unique ``(task_key, run_at)`` index of
``solidq_recurring_executions``. A tick's job and its ledger row are written in one
transaction; a scheduler whose ledger insert is ignored because another scheduler recorded the
tick first rolls its own job back. ``run_at`` is the schedule's time (12:05:00.000000), never
the clock's, so every scheduler names a tick the same way. The guarantee lasts as long as the
job's row does: the ledger row is deleted along with its job.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq.definitions import arguments
from flask_solidq.definitions import registry
from flask_solidq.definitions.job import Job
from flask_solidq.models.tables import RECURRING_EXECUTIONS
from flask_solidq.models.tables import RECURRING_TASKS
from flask_solidq.operations import enqueue
from flask_solidq.recurring.schedule import Schedule
from flask_solidq.storage import db
from flask_solidq.timing import as_utc
from flask_solidq.timing import utcnow
from flask_solidq.values import CoalesceStatus
from flask_solidq.values import JobArgument

if t.TYPE_CHECKING:
    from flask_solidq.config import RecurringSettings

logger = logging.getLogger("flask_solidq.scheduler")


#: How many times a transaction that hit a deadlock (or SQLite's "database is locked") is tried.
DEADLOCK_ATTEMPTS = 3

#: The columns of a task's row that its configuration decides.
_CONFIGURED_COLUMNS = (
    "schedule",
    "command",
    "class_name",
    "arguments",
    "queue_name",
    "priority",
    "static",
    "description",
)
#: A row of ``solidq_recurring_tasks``, by column name.
_TaskRow = dict[str, object]

_UPDATE_TASK = RECURRING_TASKS.update().where(RECURRING_TASKS.c.key == sa.bindparam("task_key"))
_RECORDED_JOB = sa.select(RECURRING_EXECUTIONS.c.job_id).where(
    RECURRING_EXECUTIONS.c.task_key == sa.bindparam("task_key"),
    RECURRING_EXECUTIONS.c.run_at
    == sa.bindparam("run_at", type_=RECURRING_EXECUTIONS.c.run_at.type),
)

_T = t.TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class RecurringTask:
    """One configured recurring task, its schedule parsed and its job definition loaded."""

    key: str
    #: The job definition's import path, ``module:attr``, as configured.
    job: str
    schedule: Schedule
    definition: type[Job] = dataclasses.field(repr=False)
    args: tuple[JobArgument, ...] = ()
    kwargs: dict[str, JobArgument] = dataclasses.field(default_factory=dict)
    #: The queue and priority the task's jobs get; None keeps the job definition's.
    queue: str | None = None
    priority: int | None = None
    description: str | None = None

    @classmethod
    def from_settings(cls, settings: RecurringSettings) -> RecurringTask:
        """Parse the schedule and load the job definition of one ``SOLIDQ_RECURRING`` entry.

        Everything a tick would otherwise find out too late is checked here: the schedule, the
        job, and whether its arguments can be stored.

        :raises ValueError: the entry is invalid; the message starts with
            ``SOLIDQ_RECURRING['<key>']:``.
        """
        try:
            task = cls(
                key=settings.key,
                job=settings.job,
                schedule=Schedule.parse(settings.schedule),
                definition=_load_definition(settings.job),
                args=tuple(settings.args),
                kwargs=dict(settings.kwargs),
                queue=settings.queue,
                priority=settings.priority,
                description=settings.description,
            )
            task.new_job().payload()
        except (ValueError, TypeError, ImportError, errors.SerializationError) as exc:
            raise ValueError(f"SOLIDQ_RECURRING[{settings.key!r}]: {exc}") from exc
        return task

    @property
    def queue_name(self) -> str:
        """The queue the task's jobs go to: its own ``queue``, else its definition's."""
        return self.queue or self.definition.queue_name

    def next_time_after(self, moment: dt.datetime) -> dt.datetime:
        """The task's first tick strictly after ``moment``, in UTC."""
        return self.schedule.next_time_after(moment)

    def new_job(self) -> Job:
        """A job of the task's definition with its arguments, queue and priority."""
        job = self.definition.new(*self.args, **self.kwargs)
        return job.set(queue=self.queue, priority=self.priority)


def load_all(settings: t.Iterable[RecurringSettings]) -> list[RecurringTask]:
    """Build every configured task, as the scheduler does when it starts.

    :raises ValueError: an entry is invalid; the message names its key.
    """
    return [RecurringTask.from_settings(entry) for entry in settings]


def _load_definition(path: str) -> type[Job]:
    """The job definition at ``path``.

    :raises ImportError: nothing can be imported from ``path``.
    :raises ValueError: what is there isn't a job definition, or one a schedule can drive.
    """
    target = arguments.load_import_path(path)
    if not _is_job_definition(target):
        raise ValueError(
            f"{path!r} is {target!r}, not a job definition. Point it at a function decorated"
            " with @solidq.job or at a subclass of solidq.Job."
        )
    _check_coalesce(target)
    return target


def _is_job_definition(target: object) -> t.TypeGuard[type[Job]]:
    """Whether ``target`` is a registered job definition (abstract bases aren't)."""
    if not isinstance(target, type) or not issubclass(target, Job):
        return False
    try:
        return registry.lookup(target.job_name) is target
    except errors.JobNotFound:
        return False


def _check_coalesce(definition: type[Job]) -> None:
    """Refuse coalescing a tick can't take part in. A tick that replaced or collected into a
    pending job would record that job again, and the ledger's unique index would roll back
    what it added; a debounce window would hold the job back for as long as ticks come."""
    mode = getattr(definition.coalesce_on_conflict, "value", definition.coalesce_on_conflict)
    if mode in ("replace", "collect") or definition.coalesce_debounce is not None:
        option = "debounce=" if mode == "discard" else f"on_conflict={mode!r}"
        raise ValueError(
            f"{definition.job_name} coalesces with {option}, which a recurring task can't use."
            " Use coalesce(on_conflict='discard') without debounce=, or limits_concurrency."
        )


def persist_all(engine: sa.Engine, tasks: t.Sequence[RecurringTask]) -> None:
    """Store the configured tasks in ``solidq_recurring_tasks``, in one transaction: insert
    or update each by key (``static`` true), and delete the static rows of tasks no longer
    configured. Rows added at runtime (``static`` false) are left alone.

    Two schedulers may run it at once. Each writes only what differs from what it read, in key
    order, and inserts ignoring duplicates: a restart with an unchanged configuration writes
    nothing, and a first start inserts without hitting the unique key. Writing every row
    instead (insert, then update) deadlocks on MySQL, where each scheduler's ignored insert
    holds a shared lock on the row the other's update waits to lock. A deadlock still
    possible when both change the same rows is retried.
    """
    now = utcnow()
    rows = [_task_row(task, now) for task in sorted(tasks, key=lambda task: task.key)]
    _retrying_deadlocks(engine, lambda: _persist(engine, rows))


def _persist(engine: sa.Engine, rows: list[_TaskRow]) -> None:
    configured = {row["key"] for row in rows}
    with db.write(engine) as connection:
        stored = {row.key: row for row in connection.execute(sa.select(RECURRING_TASKS))}
        stale = sorted(key for key, row in stored.items() if row.static and key not in configured)
        changed = [
            row for row in rows if row["key"] in stored and _differs(stored[row["key"]], row)
        ]
        if stale:
            connection.execute(
                RECURRING_TASKS.delete().where(
                    RECURRING_TASKS.c.key.in_(stale), RECURRING_TASKS.c.static.is_(True)
                )
            )
        if changed:
            connection.execute(_UPDATE_TASK, [_update_parameters(row) for row in changed])
        db.insert_ignoring_duplicates(
            connection, RECURRING_TASKS, [row for row in rows if row["key"] not in stored]
        )


def _differs(stored: object, row: _TaskRow) -> bool:
    return any(getattr(stored, column) != row[column] for column in _CONFIGURED_COLUMNS)


def _update_parameters(row: _TaskRow) -> dict[str, object]:
    parameters = {column: row[column] for column in _CONFIGURED_COLUMNS}
    return {**parameters, "task_key": row["key"], "updated_at": row["updated_at"]}


def _task_row(task: RecurringTask, now: dt.datetime) -> _TaskRow:
    """The ``solidq_recurring_tasks`` row of ``task``, with the queue and priority its jobs
    will get and its arguments stored as a job's payload is."""
    job = task.new_job()
    return {
        "key": task.key,
        "schedule": task.schedule.text,
        "command": None,
        "class_name": task.definition.job_name,
        "arguments": json.dumps(job.payload(), separators=(",", ":"), ensure_ascii=False),
        "queue_name": job.queue_name,
        "priority": job.priority,
        "static": True,
        "description": task.description,
        "created_at": now,
        "updated_at": now,
    }


def enqueue_tick(engine: sa.Engine, task: RecurringTask, run_at: dt.datetime) -> Job | None:
    """Enqueue ``task``'s job for its tick ``run_at``, unless a scheduler already has.

    However many schedulers and processes call this for one ``(task, run_at)``, one job is
    enqueued: the job and its ``solidq_recurring_executions`` row are written in one
    transaction, and when the row is already there the transaction is rolled back, job and
    all. Returns the job, or None when the tick was already enqueued, a control discarded the
    job, or enqueuing failed.

    Requires an application context. Opens its own transaction, so call it outside any
    :func:`flask_solidq.storage.db.transaction` block. Never raises: errors are logged on the
    ``flask_solidq.scheduler`` logger, as Solid Queue logs them, so that one broken task can't
    stop the scheduler.
    """
    run_at = as_utc(run_at)
    try:
        return _retrying_deadlocks(engine, lambda: _enqueue_once(engine, task, run_at))
    except Exception:
        # The scheduler's loop must outlive any one task's failure; the log has the traceback.
        logger.exception("Enqueuing recurring task %r for %s failed", task.key, run_at.isoformat())
        return None


class _AlreadyRecorded(Exception):
    """Another scheduler recorded this tick first: roll back the job this one enqueued."""


def _enqueue_once(engine: sa.Engine, task: RecurringTask, run_at: dt.datetime) -> Job | None:
    job = task.new_job()
    try:
        with db.transaction(engine) as connection:
            enqueue.enqueue(engine, job)
            if not job.successfully_enqueued:
                logger.info("Recurring task %r for %s: its job was discarded", task.key, run_at)
                return None
            if job.coalesce_status is CoalesceStatus.DISCARDED:
                # A pending job of the task still holds the key: the tick adds nothing, and
                # isn't recorded (the ledger would name that job twice).
                logger.info(
                    "Recurring task %r for %s: coalesced into pending job %s",
                    task.key,
                    run_at,
                    job.provider_job_id,
                )
                return None
            if not _record(connection, task, run_at, job):
                raise _AlreadyRecorded
    except _AlreadyRecorded:
        logger.info("Skipped recurring task %r for %s: already enqueued", task.key, run_at)
        return None
    return job


def _record(connection: sa.Connection, task: RecurringTask, run_at: dt.datetime, job: Job) -> bool:
    """Add the tick to the ledger; False when another job holds it already.

    On PostgreSQL and MySQL an insert racing another transaction's uncommitted row for the
    same tick waits for it, then is ignored once it commits. Whose job the ledger names is
    read back rather than taken from the insert's rowcount, which SQLAlchemy leaves at -1 on
    PostgreSQL unless asked to keep it.
    """
    row = {
        "job_id": job.provider_job_id,
        "task_key": task.key,
        "run_at": run_at,
        "created_at": utcnow(),
    }
    db.insert_ignoring_duplicates(connection, RECURRING_EXECUTIONS, [row])
    recorded = connection.scalar(_RECORDED_JOB, {"task_key": task.key, "run_at": run_at})
    return bool(recorded == job.provider_job_id)


def _retrying_deadlocks(engine: sa.Engine, attempt: t.Callable[[], _T]) -> _T:
    """Run ``attempt``, a whole transaction, again when a deadlock or lock timeout ended it.
    Inside a caller's transaction there is nothing to retry: the caller's work is lost too."""
    attempts = 1 if db.in_transaction(engine) else DEADLOCK_ATTEMPTS
    for number in range(1, attempts + 1):
        try:
            return attempt()
        except (sa.exc.SQLAlchemyError, errors.EnqueueError) as exc:
            if number == attempts or not _is_deadlock(exc):
                raise
            logger.warning("Retrying after a deadlock (attempt %d): %s", number, exc)
    raise AssertionError("unreachable")


def _is_deadlock(error: BaseException) -> bool:
    """Whether ``error``, or the database error an EnqueueError wraps, is a deadlock."""
    cause = error.__cause__
    return db.is_deadlock(error) or (cause is not None and db.is_deadlock(cause))

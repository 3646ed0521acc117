"""The plain values every layer passes around: what moving a job between states needs of it
(:class:`JobRef`), a claimed job (:class:`ClaimedJob`), how a stored payload says it is a
coalesced job's, what became of an enqueued call (:class:`CoalesceStatus`), the queue of the
housekeeping jobs, and the names of the process kinds and supervisor modes. This module
imports nothing of the package's, so the controls, the definitions and the operations all take
these from here, never from one another.
"""

from __future__ import annotations

import datetime as dt
import enum
import typing as t

#: A value as JSON holds it: what :func:`json.loads` returns and :func:`json.dumps` takes. The
#: stored forms of job arguments and payloads are made of these.
JSONValue: t.TypeAlias = "None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]"

#: A job's argument, as the job was called with it: any value at all (what can be stored is
#: checked when it is dumped, see :mod:`flask_solidq.definitions.arguments`).
JobArgument: t.TypeAlias = object

#: The queue of the housekeeping jobs (:mod:`flask_solidq.housekeeping`).
MAINTENANCE_QUEUE = "solidq_maintenance"


class _HasJobColumns(t.Protocol):
    """A value with the columns a :class:`JobRef` copies (a claimed job, a job row)."""

    @property
    def id(self) -> int: ...
    @property
    def queue_name(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def class_name(self) -> str: ...
    @property
    def concurrency_key(self) -> str | None: ...


class ControlKeys(t.TypedDict):
    """The keys a job's controls stamp on its row (each control's ``stamp`` hook): what a
    retry by hand recomputes too."""

    concurrency_key: str | None
    rate_limit_key: str | None
    rate_limit_charges: str | None


class JobRow(ControlKeys):
    """A ``solidq_jobs`` row as an enqueue writes it: built from the job, then stamped by its
    controls (:class:`ControlKeys`), before anything is written."""

    queue_name: str
    class_name: str
    #: The job's stored payload, as JSON text.
    arguments: str
    priority: int
    active_job_id: str
    scheduled_at: dt.datetime
    batch_id: int | None
    created_at: dt.datetime
    updated_at: dt.datetime


class JobRef(t.NamedTuple):
    """What moving a job between states needs to know of it: its row id and the columns the
    execution tables copy."""

    id: int
    queue_name: str
    priority: int
    class_name: str
    concurrency_key: str | None
    scheduled_at: dt.datetime | None

    @classmethod
    def of(cls, job: _HasJobColumns, scheduled_at: dt.datetime | None = None) -> JobRef:
        """The reference of a job value that has these columns (a claimed job, say)."""
        return cls(
            id=job.id,
            queue_name=job.queue_name,
            priority=job.priority,
            class_name=job.class_name,
            concurrency_key=job.concurrency_key,
            scheduled_at=scheduled_at,
        )


class ClaimedJob(t.NamedTuple):
    """A claimed job, with what performing it needs."""

    id: int
    active_job_id: str | None
    class_name: str
    queue_name: str
    priority: int
    arguments: str | None
    concurrency_key: str | None
    rate_limit_key: str | None
    #: The batch the job belongs to, if any: its outcome is counted there.
    batch_id: int | None = None
    #: Every budget it is charged and its units, under stacked or weighted rate limits
    #: (:mod:`flask_solidq.controls.rate_limit.rate_charges`); None under one limit of one unit.
    rate_limit_charges: str | None = None
    #: When the job was due: enqueued, or scheduled for (its queue latency runs from here).
    #: Aware UTC, or naive UTC where a driver read it without SQLAlchemy's types.
    scheduled_at: dt.datetime | None = None


#: The payload field that records how a coalesced job was opened; always written first, so
#: a worker tells a coalesced job by the payload's first characters (see ``MARKER_PREFIX``).
MARKER = "coalesce"
MARKER_PREFIX = '{"coalesce":'


def is_coalesced(payload: str | None) -> bool:
    """Whether a stored payload is a coalesced job's."""
    return (payload or "").startswith(MARKER_PREFIX)


def opened_by_collecting(payload: str | None) -> bool:
    """Whether a stored payload is that of a job ``coalesce(on_conflict="collect")`` opened."""
    return (payload or "").startswith(f'{MARKER_PREFIX}"collect"')


class CoalesceStatus(str, enum.Enum):
    """What happened to one enqueued call (``job.coalesce_status``): here, not with the
    ``coalesce`` control, because a job definition reports it and definitions sit below the
    controls."""

    CREATED = "created"
    DISCARDED = "discarded"
    REPLACED = "replaced"
    COLLECTED = "collected"


class ProcessKind:
    """What a row of ``solidq_processes`` is (its ``kind``), as the processes, the health
    check, the metrics and the lifecycle hooks name it. Plain strings, not an enum: they are
    written to the table and into log lines as they are."""

    WORKER: t.Final = "Worker"
    DISPATCHER: t.Final = "Dispatcher"
    SCHEDULER: t.Final = "Scheduler"
    FORK_SUPERVISOR: t.Final = "Supervisor(fork)"
    THREAD_SUPERVISOR: t.Final = "Supervisor(thread)"
    ALL: t.Final = (FORK_SUPERVISOR, THREAD_SUPERVISOR, WORKER, DISPATCHER, SCHEDULER)

    @staticmethod
    def is_supervisor(kind: str) -> bool:
        """Whether ``kind`` is a supervisor's, in either mode."""
        return kind in (ProcessKind.FORK_SUPERVISOR, ProcessKind.THREAD_SUPERVISOR)


class SupervisorMode:
    """How a supervisor runs its workers and dispatchers (``flask solidq work --mode``):
    as forked processes, or as threads of its own process."""

    FORK: t.Final = "fork"
    THREAD: t.Final = "thread"
    ALL: t.Final = (FORK, THREAD)

"""What is current in this context: ``current_job``, the job a worker thread (or
``perform_now``) is performing right now, and the batch enqueues go into."""

from __future__ import annotations

import contextlib
import contextvars
import typing as t

from werkzeug.local import LocalProxy

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job

_current_job: contextvars.ContextVar[Job] = contextvars.ContextVar("solidq_current_job")

#: The :class:`~flask_solidq.Job` being performed in this thread, with ``job_id``,
#: ``provider_job_id``, ``executions``, ``coalesced_calls`` and ``arguments``. Outside a job,
#: using it raises :class:`RuntimeError`.
current_job: Job = t.cast(
    "Job", LocalProxy(_current_job, unbound_message="Working outside of a flask-solidq job.")
)


def running_job() -> Job | None:
    """The job performed in this context, or None."""
    return _current_job.get(None)


class Performing:
    """``with Performing(job):`` makes ``job`` the :data:`current_job` for the length of the
    block. A class rather than a generator made a context manager: a worker enters one for
    every job, and the generator's machinery cost a microsecond of it."""

    __slots__ = ("job", "_token")

    def __init__(self, job: Job) -> None:
        self.job = job

    def __enter__(self) -> None:
        self._token = _current_job.set(self.job)

    def __exit__(self, *exc_info: object) -> None:
        _current_job.reset(self._token)


class OpenBatch:
    """The batch that enqueues in this context store their jobs into (see
    :meth:`flask_solidq.SolidQ.batch`), and what the block changed of its counts, applied to
    the batch's row as the block ends: how many job rows it stored (a call that joins a
    coalesced job stores none), and how many of them ended in the block itself (a
    concurrency limit discarding a job at its own enqueue) and how."""

    __slots__ = ("ended", "id", "stored")

    def __init__(self, batch_id: int) -> None:
        self.id = batch_id
        self.stored = 0
        #: Counts of the block's jobs that ended in it, by what they count as (``"completed"``
        #: or ``"failed"``): the same transaction's changes, not yet on the batch's row.
        self.ended: dict[str, int] = {}

    @property
    def key_prefix(self) -> str:
        """What the coalesce keys of the batch's jobs start with."""
        return f"Batch/{self.id}/"


_open_batch: contextvars.ContextVar[OpenBatch | None] = contextvars.ContextVar(
    "solidq_open_batch", default=None
)


def open_batch() -> OpenBatch | None:
    """The batch enqueues in this context go into, or None."""
    return _open_batch.get()


@contextlib.contextmanager
def enqueuing_into(batch: OpenBatch | None) -> t.Iterator[OpenBatch | None]:
    """Inside the block, enqueues store their jobs into ``batch`` (None: into no batch, as a
    batch's callbacks are enqueued)."""
    token = _open_batch.set(batch)
    try:
        yield batch
    finally:
        _open_batch.reset(token)


def count_stored(jobs: int) -> None:
    """Count ``jobs`` newly stored job rows toward the open batch, if any."""
    batch = _open_batch.get()
    if batch is not None:
        batch.stored += jobs

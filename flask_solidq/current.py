"""What is current in this context: ``current_job``, the job a worker thread (or
``perform_now``) is performing right now, and the batch enqueues go into."""

from __future__ import annotations

import contextlib
import contextvars
import typing as t

#: The job performed in this context. Typed ``object`` here, below the job definitions: the
#: public :data:`flask_solidq.current_job` is its proxy, typed as the ``Job`` it holds.
JOB: contextvars.ContextVar[object] = contextvars.ContextVar("solidq_current_job")


def running_job() -> object | None:
    """The job performed in this context, or None."""
    return JOB.get(None)


class Performing:
    """``with Performing(job):`` makes ``job`` the :data:`current_job` for the length of the
    block. A class rather than a generator made a context manager: a worker enters one for
    every job, and the generator's machinery cost a microsecond of it."""

    __slots__ = ("job", "_token")

    def __init__(self, job: object) -> None:
        self.job = job

    def __enter__(self) -> None:
        self._token = JOB.set(self.job)

    def __exit__(self, *exc_info: object) -> None:
        JOB.reset(self._token)


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

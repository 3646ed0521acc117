"""``Batch``: what a batch's callbacks, ``solidq.batches.find`` and the dashboard read of one.

A batch is a read of its ``solidq_batches`` row, taken when it was asked for: the counters
move as its jobs finish, so read it again (``solidq.batches.find(batch.id)``) for fresh ones.
It lives with the job definitions because a callback receives one as its first argument:
the argument codecs store it as its id and load it with a fresh read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import typing as t

import sqlalchemy as sa

from flask_solidq import slots
from flask_solidq.config import Adapter
from flask_solidq.models.tables import BATCHES
from flask_solidq.state import get_state
from flask_solidq.storage import db

if t.TYPE_CHECKING:
    from flask_solidq.current import OpenBatch
    from flask_solidq.state import SolidQState


class BatchStatus(str, enum.Enum):
    """Where a batch is: its jobs still running, or finished with or without failures."""

    #: Some of its jobs are pending (ready, scheduled, deferred, blocked, claimed, or
    #: waiting to retry).
    PENDING = "pending"
    #: Finished, and no job failed for good.
    COMPLETED = "completed"
    #: Finished, and at least one job failed for good.
    FAILED = "failed"


class BatchRow(t.Protocol):
    """The columns of a ``solidq_batches`` row that :meth:`Batch.of` reads (a Core row, or an
    object with the same attributes)."""

    @property
    def id(self) -> int: ...
    @property
    def total_jobs(self) -> int: ...
    @property
    def completed_jobs(self) -> int: ...
    @property
    def failed_jobs(self) -> int: ...
    @property
    def pending_jobs(self) -> int: ...
    @property
    def metadata(self) -> str | None: ...
    @property
    def on_success(self) -> str | None: ...
    @property
    def on_failure(self) -> str | None: ...
    @property
    def on_finish(self) -> str | None: ...
    @property
    def created_at(self) -> dt.datetime: ...
    @property
    def enqueued_at(self) -> dt.datetime | None: ...
    @property
    def finished_at(self) -> dt.datetime | None: ...
    @property
    def failed_at(self) -> dt.datetime | None: ...
    @property
    def parent_id(self) -> int | None: ...


@dataclasses.dataclass(frozen=True)
class Batch:
    """A batch of jobs, as its row was when read. ``completed_jobs + failed_jobs +
    pending_jobs == total_jobs`` always: a discarded job counts as completed, a job that
    failed for good as failed (a failed job retried while its batch is open is pending again).
    """

    id: int
    total_jobs: int
    completed_jobs: int
    failed_jobs: int
    pending_jobs: int
    #: The extra keywords given to ``solidq.batch()``, loaded from JSON (Any: the caller
    #: knows what it gave, and reads it back without narrowing each value).
    metadata: dict[str, t.Any]
    #: The callbacks, by kind (``on_success``, ``on_failure``, ``on_finish``): the job name.
    callbacks: dict[str, str]
    created_at: dt.datetime
    #: When the block that opened the batch committed.
    enqueued_at: dt.datetime | None
    finished_at: dt.datetime | None
    #: ``finished_at``, when a job failed.
    failed_at: dt.datetime | None
    #: The batch this one is a child of (it counts as one job there), or None.
    parent_id: int | None = None

    @property
    def status(self) -> BatchStatus:
        if self.finished_at is None:
            return BatchStatus.PENDING
        return BatchStatus.FAILED if self.failed_jobs else BatchStatus.COMPLETED

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def enqueue(self) -> t.ContextManager[OpenBatch]:
        """A block whose enqueues add to this batch, as one transaction::

            with current_job.batch.enqueue():
                reindex_product.perform_later(product_id)

        A running job of the batch keeps it open, so from one of its jobs this always
        succeeds. From anywhere else it races the batch finishing: when the batch finished
        first, the block rolls back. Requires an app context.

        :raises flask_solidq.BatchAlreadyFinished: the batch finished (or is gone) first;
            nothing enqueued in the block was stored.
        """
        return ADDING_TO.call(self.id)

    @classmethod
    def of(cls, row: BatchRow) -> Batch:
        """The batch a ``solidq_batches`` row holds."""
        callbacks = {
            kind: json.loads(stored)["class_name"]
            for kind in CALLBACK_KINDS
            if (stored := getattr(row, kind)) is not None
        }
        return cls(
            id=row.id,
            total_jobs=row.total_jobs,
            completed_jobs=row.completed_jobs,
            failed_jobs=row.failed_jobs,
            pending_jobs=row.pending_jobs,
            metadata=json.loads(row.metadata) if row.metadata else {},
            callbacks=callbacks,
            created_at=row.created_at,
            enqueued_at=row.enqueued_at,
            finished_at=row.finished_at,
            failed_at=row.failed_at,
            parent_id=row.parent_id,
        )


#: A block whose enqueues add to a batch (:meth:`Batch.enqueue`): the batch block runs the
#: operations, a layer above, so :mod:`flask_solidq.extension.batching` fills it.
ADDING_TO: slots.Slot[t.Callable[[int], t.ContextManager[OpenBatch]]] = slots.Slot(
    "flask_solidq.extension.batching"
)

#: A batch of the test adapter, held in memory (None when there is none, or its block is
#: open): :mod:`flask_solidq.testing.batches` fills it.
HELD: slots.Slot[t.Callable[[SolidQState, int], Batch | None]] = slots.Slot(
    "flask_solidq.testing.batches"
)

#: The callback columns of ``solidq_batches``, in the order a finished batch stores them.
CALLBACK_KINDS = ("on_success", "on_failure", "on_finish")


def find(batch_id: int, engine: sa.Engine | None = None) -> Batch | None:
    """A fresh read of batch ``batch_id`` (None if there is none, or its block hasn't
    committed), on ``engine`` or the current app's queue database (its memory, under the
    test adapter)."""
    if engine is None:
        state = get_state()
        if state.adapter is Adapter.TEST:
            return HELD.call(state, batch_id)
        engine = state.engine
    with db.read(engine) as connection:
        return read(connection, batch_id)


def read(connection: sa.Connection, batch_id: int) -> Batch | None:
    """:func:`find` on a connection of the caller's (a page that reads a batch and its jobs
    in one transaction)."""
    row = connection.execute(
        sa.select(BATCHES).where(BATCHES.c.id == batch_id, BATCHES.c.enqueued_at.is_not(None))
    ).one_or_none()
    return None if row is None else Batch.of(row)

"""``solidq_batches``: one row per batch of jobs (as Solid Queue's batches)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import BigId
from flask_solidq.models.base import LongText
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class BatchRecord(Base):
    """A batch: jobs enqueued together, and the callbacks to run once none of them is pending.

    The counters are kept in the transactions that move the batch's jobs (a finish, a failure
    for good, a discard), under this row's lock, so the transaction that takes
    ``pending_jobs`` to 0 is the one that sets ``finished_at`` and stores the callbacks: once.
    ``completed_jobs + failed_jobs + pending_jobs = total_jobs`` at every commit. The
    callbacks are stored as ``{"class_name", "payload"}`` JSON, built when the batch opens.
    ``enqueued_at`` is set as the block that opened the batch commits: a batch without it is
    still being written (and is never seen, uncommitted, by anyone else).
    """

    __tablename__ = "solidq_batches"

    id: Mapped[int] = primary_key()
    #: The batch this one is a child of (schema version 7): opened inside a running job of
    #: that batch, or with ``parent=``. The child counts as one job of its parent, pending
    #: until it finishes; no foreign key (a child outlives its parent's row once cleared).
    parent_id: Mapped[int | None] = mapped_column(BigId)
    #: ``metadata`` is the declarative base's own attribute, so the column is ``details``
    #: in Python and ``metadata`` in the table.
    details: Mapped[str | None] = mapped_column("metadata", LongText)
    on_success: Mapped[str | None] = mapped_column(LongText)
    on_failure: Mapped[str | None] = mapped_column(LongText)
    on_finish: Mapped[str | None] = mapped_column(LongText)
    total_jobs: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    pending_jobs: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    completed_jobs: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    failed_jobs: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    enqueued_at: Mapped[dt.datetime | None] = timestamp(nullable=True)
    finished_at: Mapped[dt.datetime | None] = timestamp(nullable=True)
    failed_at: Mapped[dt.datetime | None] = timestamp(nullable=True)
    created_at: Mapped[dt.datetime] = timestamp()
    updated_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index("ix_solidq_batches_finished_at", "finished_at"),
        # A batch's children, for its page and for retrying or discarding a batch with them.
        # Partial where the database has it: batches without a parent cost it nothing.
        sa.Index(
            "ix_solidq_batches_parent_id",
            "parent_id",
            postgresql_where=sa.text("parent_id IS NOT NULL"),
            sqlite_where=sa.text("parent_id IS NOT NULL"),
        ),
    )

    def __repr__(self) -> str:
        return f"<BatchRecord {self.id} {self.completed_jobs}+{self.failed_jobs}/{self.total_jobs}>"

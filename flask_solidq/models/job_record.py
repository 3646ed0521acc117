"""``solidq_jobs``: one row per job, holding its payload for its whole life."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import BigId
from flask_solidq.models.base import Key
from flask_solidq.models.base import LongText
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class JobRecord(Base):
    """A stored job. Its state is the execution row that points at it: ready, scheduled,
    claimed, blocked or failed; with none and ``finished_at`` set, it finished.

    ``arguments`` is the JSON payload (the import path, arguments, attempt counters), so a
    process that never imported the job's module can still load it.
    """

    __tablename__ = "solidq_jobs"

    id: Mapped[int] = primary_key()
    queue_name: Mapped[str] = mapped_column(Key, nullable=False)
    class_name: Mapped[str] = mapped_column(Key, nullable=False, index=True)
    arguments: Mapped[str | None] = mapped_column(LongText)
    priority: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    active_job_id: Mapped[str | None] = mapped_column(sa.String(36), index=True)
    scheduled_at: Mapped[dt.datetime | None] = timestamp(nullable=True)
    finished_at: Mapped[dt.datetime | None] = timestamp(nullable=True)
    concurrency_key: Mapped[str | None] = mapped_column(Key)
    rate_limit_key: Mapped[str | None] = mapped_column(Key)
    #: Every budget the job is charged against and its units, as JSON ``[[key, units], ...]``
    #: (schema version 6), for a job under stacked limits or whose limit costs more than one
    #: unit; None for one limit of one unit, charged by ``rate_limit_key`` alone.
    rate_limit_charges: Mapped[str | None] = mapped_column(sa.Text, nullable=True)
    #: The ``solidq_batches`` row of the batch the job belongs to (schema version 3). No
    #: foreign key: a job outlives its batch's row once that is cleared, and on MySQL a key
    #: would lock the batch's row for every job inserted into it.
    batch_id: Mapped[int | None] = mapped_column(BigId)
    #: When the run that finished the job started: its claim's ``created_at``, copied by the
    #: statement that sets ``finished_at`` (schema version 4), so a finished job shows how
    #: long it ran. None for a job finished before that version, or not finished. The run
    #: so measured is claim to finish: a job claimed ahead counts its wait for a thread, and
    #: every job the moment its finisher groups outcomes before storing them.
    started_at: Mapped[dt.datetime | None] = timestamp(nullable=True)
    created_at: Mapped[dt.datetime] = timestamp()
    updated_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index("ix_solidq_jobs_finished_at", "finished_at"),
        sa.Index("ix_solidq_jobs_for_filtering", "queue_name", "finished_at"),
        sa.Index("ix_solidq_jobs_for_alerting", "scheduled_at", "finished_at"),
        # A batch's jobs in id order: its pages walk them newest first, a page at a time.
        # Partial where the database has it: the jobs of no batch (most of them) then cost
        # this index nothing at insert, finish (PostgreSQL writes every index of a row whose
        # indexed column changes) or delete.
        sa.Index(
            "ix_solidq_jobs_batch_id",
            "batch_id",
            "id",
            postgresql_where=sa.text("batch_id IS NOT NULL"),
            sqlite_where=sa.text("batch_id IS NOT NULL"),
        ),
    )

    def __repr__(self) -> str:
        return f"<JobRecord {self.id} {self.class_name} queue={self.queue_name!r}>"

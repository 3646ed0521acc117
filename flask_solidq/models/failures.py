"""``solidq_job_failures``: the failed attempts of each job (schema version 4)."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import LongText
from flask_solidq.models.base import job_reference
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp

#: The newest failed attempts kept per job: a job retried without limit keeps only these.
KEPT_PER_JOB = 25


class JobFailure(Base):
    """One failed attempt of a job: a ``retry_on`` retry, a failure for good, or a worker that
    died under it. ``error`` is the same JSON a failed execution holds (class, message,
    trimmed backtrace), written in the transaction that stores the failure.

    A failed execution is deleted when the job is retried by hand; these rows stay until the
    job itself goes (the foreign key cascades), so a retry no longer hides what went wrong.
    Only failures write here: a job that succeeds costs this table nothing.
    """

    __tablename__ = "solidq_job_failures"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference(unique=False)
    #: How many times the job had run when this attempt failed (this run included); None
    #: when unknown (a worker that died).
    executions: Mapped[int | None] = mapped_column(sa.Integer)
    error: Mapped[str | None] = mapped_column(LongText)
    created_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (sa.Index("ix_solidq_job_failures_job_id_id", "job_id", "id"),)

"""The execution tables: where a job is in its life, one small table per state.

Each has a unique ``job_id`` (deleted with its job) and copies of the job's ``queue_name`` and
``priority``, so claiming and dispatching never join ``solidq_jobs``. Moving a job from one
state to another is deleting one row and inserting another in one transaction.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import BigId
from flask_solidq.models.base import Key
from flask_solidq.models.base import LongText
from flask_solidq.models.base import job_reference
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class ReadyExecution(Base):
    """A job waiting for a worker. Workers poll only this table, through covering indexes."""

    __tablename__ = "solidq_ready_executions"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference()
    queue_name: Mapped[str] = mapped_column(Key, nullable=False)
    priority: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    created_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index("ix_solidq_ready_executions_poll_all", "priority", "job_id"),
        sa.Index("ix_solidq_ready_executions_poll_by_queue", "queue_name", "priority", "job_id"),
    )


class ScheduledExecution(Base):
    """A job waiting for its time; the dispatcher makes it ready when ``scheduled_at`` passes."""

    __tablename__ = "solidq_scheduled_executions"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference()
    queue_name: Mapped[str] = mapped_column(Key, nullable=False)
    priority: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    scheduled_at: Mapped[dt.datetime] = timestamp()
    created_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index(
            "ix_solidq_scheduled_executions_dispatch_all", "scheduled_at", "priority", "job_id"
        ),
    )


class ClaimedExecution(Base):
    """A job a worker process has claimed and is running.

    ``process_id`` has no foreign key; instead a claim locks its process's row and inserts
    nothing when the row is gone (see :mod:`flask_solidq.operations.claim`), so a pruned
    process can't claim. Claims of a process whose row was deleted by hand are found with a
    left join and handled by every supervisor's maintenance.
    """

    __tablename__ = "solidq_claimed_executions"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference()
    process_id: Mapped[int | None] = mapped_column(BigId)
    created_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index("ix_solidq_claimed_executions_process_id_job_id", "process_id", "job_id"),
    )


class BlockedExecution(Base):
    """A job waiting for a free slot of its concurrency key's semaphore."""

    __tablename__ = "solidq_blocked_executions"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference()
    queue_name: Mapped[str] = mapped_column(Key, nullable=False)
    priority: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    concurrency_key: Mapped[str] = mapped_column(Key, nullable=False)
    expires_at: Mapped[dt.datetime] = timestamp()
    created_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index(
            "ix_solidq_blocked_executions_for_release", "concurrency_key", "priority", "job_id"
        ),
        sa.Index("ix_solidq_blocked_executions_for_maintenance", "expires_at", "concurrency_key"),
    )


class FailedExecution(Base):
    """A job that failed and waits for a human: ``error`` is JSON with the exception's class,
    message and backtrace."""

    __tablename__ = "solidq_failed_executions"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference()
    error: Mapped[str | None] = mapped_column(LongText)
    created_at: Mapped[dt.datetime] = timestamp()

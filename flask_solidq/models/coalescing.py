"""``solidq_coalesce_keys`` and ``solidq_coalesced_calls``: the open job of each coalesce key,
and the calls a collecting job holds."""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import Key
from flask_solidq.models.base import LongText
from flask_solidq.models.base import job_reference
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp
from flask_solidq.models.executions import ClaimedExecution
from flask_solidq.models.executions import FailedExecution
from flask_solidq.models.job_record import JobRecord


class CoalesceKey(Base):
    """A coalesce key and its open job: the one later calls with that key join.

    The row exists while the job is open; it goes when the job starts or, collecting, fills.
    Enqueues of one key take turns on this row's lock.
    """

    __tablename__ = "solidq_coalesce_keys"

    id: Mapped[int] = primary_key()
    key: Mapped[str] = mapped_column(Key, nullable=False, unique=True)
    job_id: Mapped[int] = job_reference(unique=False)
    calls_count: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=0)
    created_at: Mapped[dt.datetime] = timestamp()
    updated_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (sa.Index("ix_solidq_coalesce_keys_job_id", "job_id"),)


class CoalescedCall(Base):
    """One call stored for a collecting job, oldest first by ``id``."""

    __tablename__ = "solidq_coalesced_calls"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference(unique=False)
    arguments: Mapped[str | None] = mapped_column(LongText)
    created_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index("ix_solidq_coalesced_calls_job_id_id", "job_id", "id"),
        # The oldest waiting call: `waiting().order_by(created_at).limit(1)` walks it from the
        # oldest call, skipping those whose job is done (bench/coalesce.py measures it).
        sa.Index("ix_solidq_coalesced_calls_for_monitoring", "created_at", "job_id"),
    )

    # Any: SQLAlchemy 2.0 and 2.1 spell a typed select differently.
    @classmethod
    def waiting(cls) -> sa.Select[t.Any]:
        """A select of the calls still waiting to run: their job hasn't finished, hasn't failed
        and hasn't started. So scheduled, ready and blocked jobs' calls count, and so do those
        of a claimed job whose coalesce key still points at it: starting is what frees the key
        (:mod:`~flask_solidq.controls.coalesce.coalesce_start`), so a claimed job still holding its
        key hasn't started.

        ``session.scalar(sa.select(sa.func.count()).select_from(CoalescedCall.waiting()
        .subquery()))`` counts them.

        A collecting job that no longer holds a key (it filled, or runs again after a retry)
        counts as started from its claim, since nothing stored tells its claim from its start:
        which it is, because workers claim collecting jobs only for idle threads and start
        them first, never ahead (:class:`~flask_solidq.controls.coalesce.control.Coalescing`).

        The conditions correlate on the job's id rather than the call's ``job_id``: the same
        value, but PostgreSQL then probes each job once rather than each call (bench/coalesce.py).
        "Not claimed unless it holds its
        key" is one anti-join with the key nested in it: written as "not claimed, or holding
        its key" (an OR of two EXISTS) PostgreSQL can't anti-join it, and ``min(created_at)``
        took 2.6 times as long.
        """
        job = JobRecord.id
        holding_its_key = sa.exists().where(CoalesceKey.job_id == ClaimedExecution.job_id)
        return (
            sa.select(cls)
            .join(JobRecord, JobRecord.id == cls.job_id)
            .where(JobRecord.finished_at.is_(None))
            .where(~sa.exists().where(FailedExecution.job_id == job))
            .where(~sa.exists().where(ClaimedExecution.job_id == job).where(~holding_its_key))
        )

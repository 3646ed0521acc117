"""``solidq_recurring_tasks`` and ``solidq_recurring_executions``: the schedule, and the ledger
that stops two schedulers from enqueuing one tick twice."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Mapped
from sqlalchemy.orm import mapped_column

from flask_solidq.models.base import Base
from flask_solidq.models.base import Key
from flask_solidq.models.base import LongText
from flask_solidq.models.base import job_reference
from flask_solidq.models.base import primary_key
from flask_solidq.models.base import timestamp


class RecurringTask(Base):
    """A configured recurring task, persisted so dashboards can list it."""

    __tablename__ = "solidq_recurring_tasks"

    id: Mapped[int] = primary_key()
    key: Mapped[str] = mapped_column(Key, nullable=False, unique=True)
    schedule: Mapped[str] = mapped_column(Key, nullable=False)
    command: Mapped[str | None] = mapped_column(sa.String(2048))
    class_name: Mapped[str | None] = mapped_column(Key)
    arguments: Mapped[str | None] = mapped_column(LongText)
    queue_name: Mapped[str | None] = mapped_column(Key)
    priority: Mapped[int | None] = mapped_column(sa.Integer, default=0)
    static: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=True, index=True)
    description: Mapped[str | None] = mapped_column(sa.Text)
    created_at: Mapped[dt.datetime] = timestamp()
    updated_at: Mapped[dt.datetime] = timestamp()


class RecurringExecution(Base):
    """One enqueued tick of a recurring task. The unique ``(task_key, run_at)`` is what makes
    each tick enqueue exactly once, however many schedulers run."""

    __tablename__ = "solidq_recurring_executions"

    id: Mapped[int] = primary_key()
    job_id: Mapped[int] = job_reference()
    task_key: Mapped[str] = mapped_column(Key, nullable=False)
    run_at: Mapped[dt.datetime] = timestamp()
    created_at: Mapped[dt.datetime] = timestamp()

    __table_args__ = (
        sa.Index(
            "uq_solidq_recurring_executions_task_key_run_at", "task_key", "run_at", unique=True
        ),
    )

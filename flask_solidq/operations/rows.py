"""The small values the operations pass around instead of ORM objects."""

from __future__ import annotations

import datetime as dt
import typing as t


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
    def of(cls, job: t.Any, scheduled_at: dt.datetime | None = None) -> JobRef:
        """The reference of a job value that has these columns (a claimed job, say)."""
        return cls(
            id=job.id,
            queue_name=job.queue_name,
            priority=job.priority,
            class_name=job.class_name,
            concurrency_key=job.concurrency_key,
            scheduled_at=scheduled_at,
        )

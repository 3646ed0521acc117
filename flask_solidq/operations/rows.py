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

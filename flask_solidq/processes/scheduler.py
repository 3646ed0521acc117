"""The scheduler: enqueues each recurring task at its times.

Every tick has a time of its own (the schedule's, 12:05:00 exactly, not the wall clock when
the scheduler woke), so schedulers on several machines agree on it, and the unique
``(task_key, run_at)`` of ``solidq_recurring_executions`` lets only one of them enqueue it.
A scheduler that fell behind (a paused machine) enqueues the latest missed tick once and
skips the rest, instead of a burst of stale ones.
"""

from __future__ import annotations

import datetime as dt
import logging
import typing as t

from flask_solidq.processes.poller import Poller
from flask_solidq.recurring import tasks as recurring_tasks
from flask_solidq.timing import utcnow
from flask_solidq.values import JSONValue
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.recurring.tasks import RecurringTask

logger = logging.getLogger("flask_solidq.scheduler")

#: The longest the scheduler sleeps, so a stop or a clock change is noticed.
MAX_SLEEP = 60.0


class Scheduler(Poller):
    """The scheduler process (or thread, in thread mode)."""

    kind = ProcessKind.SCHEDULER

    def __init__(
        self, app: Flask, tasks: t.Sequence[RecurringTask], *, supervisor_id: int | None = None
    ) -> None:
        super().__init__(app, supervisor_id=supervisor_id)
        self.tasks = list(tasks)
        self.next_run_at: dict[str, dt.datetime] = {}

    @property
    def metadata(self) -> dict[str, JSONValue]:
        return {"recurring_tasks": ",".join(task.key for task in self.tasks)}

    def boot(self) -> None:
        super().boot()
        recurring_tasks.persist_all(self.engine, self.tasks)
        now = utcnow()
        self.next_run_at = {task.key: task.schedule.next_time_after(now) for task in self.tasks}

    def poll(self) -> float:
        now = utcnow()
        for task in self.tasks:
            run_at = self.next_run_at[task.key]
            if run_at <= now:
                recurring_tasks.enqueue_tick(self.engine, task, run_at)
                self.next_run_at[task.key] = self._next_after(task, run_at, now)
        if not self.next_run_at:
            return MAX_SLEEP
        earliest = min(self.next_run_at.values())
        return min(MAX_SLEEP, max(0.0, (earliest - utcnow()).total_seconds()))

    def _next_after(
        self, task: RecurringTask, run_at: dt.datetime, now: dt.datetime
    ) -> dt.datetime:
        following = task.schedule.next_time_after(run_at)
        if following <= now:
            skipped_to = task.schedule.next_time_after(now)
            logger.warning(
                "SolidQ recurring task %s fell behind; next tick at %s", task.key, skipped_to
            )
            return skipped_to
        return following

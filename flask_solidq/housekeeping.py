"""Jobs flask-solidq ships for its own housekeeping, to run as recurring tasks::

SOLIDQ_RECURRING = {
    "clear_finished_jobs": {
        "job": "flask_solidq.housekeeping:ClearFinishedJobs",
        "schedule": "every hour at minute 12",
    },
    "clear_idle_budgets": {
        "job": "flask_solidq.housekeeping:ClearIdleBudgets",
        "schedule": "every hour at minute 27",
    },
}
"""

from __future__ import annotations

import datetime as dt

from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import limiter as rate_limiter
from flask_solidq.definitions.job import Job
from flask_solidq.operations import maintenance
from flask_solidq.state import get_state
from flask_solidq.timing import utcnow
from flask_solidq.values import MAINTENANCE_QUEUE


class ClearFinishedJobs(Job, name="solidq.clear_finished_jobs"):
    """Delete finished jobs older than ``SOLIDQ_CLEAR_FINISHED_JOBS_AFTER``, in batches,
    pausing between batches so replicas and other writers keep up; then the finished batches
    (``solidq.batch()``) as old that have no job left."""

    queue_name = MAINTENANCE_QUEUE

    def perform(self, batch_size: int = 500, sleep_between_batches: float = 0.3) -> int:
        """:raises ValueError: ``batch_size`` below 1 or ``sleep_between_batches`` below 0
        (from ``SOLIDQ_RECURRING``'s ``kwargs``): the job fails, naming the argument."""
        rate_limiter.check_batches(batch_size, sleep_between_batches)
        state = get_state()
        finished_before = utcnow() - dt.timedelta(seconds=state.settings.clear_finished_jobs_after)
        cleared = maintenance.clear_finished_in_batches(
            state.engine,
            finished_before=finished_before,
            batch_size=batch_size,
            sleep_between_batches=sleep_between_batches,
        )
        maintenance.clear_finished_batches(
            state.engine,
            finished_before=finished_before,
            batch_size=batch_size,
            sleep_between_batches=sleep_between_batches,
        )
        return cleared


class ClearIdleBudgets(Job, name="solidq.clear_idle_budgets"):
    """Delete the rate-limit budgets that admit exactly as a missing row would (full, with no
    slot handed out ahead), in batches; what is admitted never changes."""

    queue_name = MAINTENANCE_QUEUE

    def perform(self, batch_size: int = 500, sleep_between_batches: float = 0.3) -> int:
        """:raises ValueError: ``batch_size`` below 1 or ``sleep_between_batches`` below 0
        (from ``SOLIDQ_RECURRING``'s ``kwargs``): the job fails, naming the argument."""
        rate_limiter.check_batches(batch_size, sleep_between_batches)
        with budget_table.required():  # without the table, the job fails saying so
            return budgets.clear_idle_in_batches(
                get_state().engine,
                batch_size=batch_size,
                sleep_between_batches=sleep_between_batches,
            )

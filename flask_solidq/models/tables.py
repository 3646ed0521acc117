"""Each table of the queue named once, as the SQLAlchemy Core table the operations write their
statements against (the hot paths use Core, not the ORM: see :mod:`flask_solidq.models`).

A declarative class's ``__table__`` is typed as any ``FromClause``; these are the same
objects, typed as the ``Table`` they are, so no module casts them again.
"""

from __future__ import annotations

import sqlalchemy as sa

from flask_solidq.models.base import Base
from flask_solidq.models.batches import BatchRecord
from flask_solidq.models.coalescing import CoalescedCall
from flask_solidq.models.coalescing import CoalesceKey
from flask_solidq.models.executions import BlockedExecution
from flask_solidq.models.executions import ClaimedExecution
from flask_solidq.models.executions import FailedExecution
from flask_solidq.models.executions import ReadyExecution
from flask_solidq.models.executions import ScheduledExecution
from flask_solidq.models.failures import JobFailure
from flask_solidq.models.job_record import JobRecord
from flask_solidq.models.job_stats import TABLE as JOB_STATS_TABLE
from flask_solidq.models.pauses import Pause
from flask_solidq.models.processes import ProcessRecord
from flask_solidq.models.rate_limits import RateLimitBudget
from flask_solidq.models.recurring import RecurringExecution
from flask_solidq.models.recurring import RecurringTask
from flask_solidq.models.semaphores import Semaphore


def _table(model: type[Base]) -> sa.Table:
    table = model.__table__
    if not isinstance(table, sa.Table):  # every model here is mapped to a table
        raise TypeError(f"{model.__qualname__} is not mapped to a table.")
    return table


JOBS = _table(JobRecord)
READY = _table(ReadyExecution)
SCHEDULED = _table(ScheduledExecution)
CLAIMED = _table(ClaimedExecution)
BLOCKED = _table(BlockedExecution)
FAILED = _table(FailedExecution)
PROCESSES = _table(ProcessRecord)
PAUSES = _table(Pause)
SEMAPHORES = _table(Semaphore)
BUDGETS = _table(RateLimitBudget)
COALESCE_KEYS = _table(CoalesceKey)
COALESCED_CALLS = _table(CoalescedCall)
RECURRING_TASKS = _table(RecurringTask)
RECURRING_EXECUTIONS = _table(RecurringExecution)
BATCHES = _table(BatchRecord)
JOB_FAILURES = _table(JobFailure)
JOB_STATS = JOB_STATS_TABLE

"""A single enqueue's statements, built once from the queue's tables, which the dialect runs
its own way (:meth:`flask_solidq.storage.dialects.base.Dialect.insert_with_execution`): every
column a parameter named after it."""

from __future__ import annotations

import sqlalchemy as sa

from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.storage.dialects.base import EnqueueStatements

#: What an enqueue writes: not the id, nor what only finishing sets (``finished_at`` and
#: ``started_at``, the run's start).
_JOB_COLUMNS = [c.name for c in JOBS.c if c.name not in ("id", "finished_at", "started_at")]


def _one_statement(execution: sa.Table) -> sa.Insert:
    """The job's insert feeding its execution's (a CTE), returning the job's id."""
    job = (
        JOBS.insert()
        .values({column: sa.bindparam(column) for column in _JOB_COLUMNS})
        .returning(JOBS.c.id, JOBS.c.queue_name, JOBS.c.priority, JOBS.c.scheduled_at)
        .cte("new_job")
    )
    columns = [job.c.id, job.c.queue_name, job.c.priority]
    names = ["job_id", "queue_name", "priority"]
    if "scheduled_at" in execution.c:
        columns.append(job.c.scheduled_at)
        names.append("scheduled_at")
    columns.append(sa.bindparam("execution_created_at", type_=JOBS.c.created_at.type))
    names.append("created_at")
    return execution.insert().from_select(names, sa.select(*columns)).returning(execution.c.job_id)


def _execution(table: sa.Table, *names: str) -> sa.Insert:
    return table.insert().values({name: sa.bindparam(name) for name in names})


#: A single enqueue's statements.
STATEMENTS = EnqueueStatements(
    job=JOBS.insert().values({column: sa.bindparam(column) for column in _JOB_COLUMNS}),
    ready=_execution(READY, "job_id", "queue_name", "priority", "created_at"),
    scheduled=_execution(
        SCHEDULED, "job_id", "queue_name", "priority", "scheduled_at", "created_at"
    ),
    job_with_ready=_one_statement(READY),
    job_with_scheduled=_one_statement(SCHEDULED),
)

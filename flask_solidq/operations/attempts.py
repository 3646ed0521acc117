"""Attempts: keep each failed run of a job in ``solidq_job_failures``.

Written in the transaction that stores the failure (a ``retry_on`` retry, a failure for
good, a worker that died), so the history and the job's state never disagree; only
failures write here, so finishing a job that succeeded costs nothing more. A job's rows go
with it (the foreign key cascades): a discard, a clear, a batch's cleanup.
"""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa

from flask_solidq.models.failures import KEPT_PER_JOB
from flask_solidq.models.tables import JOB_FAILURES

_INSERT = JOB_FAILURES.insert()
#: A job that retries without limit keeps its newest attempts only. Each failed run has its
#: own ``executions`` number, so "older than the newest 25" is a range on it, and the delete
#: runs only when a job passes 25 runs.
_PRUNE = JOB_FAILURES.delete().where(
    JOB_FAILURES.c.job_id == sa.bindparam("job_id"),
    JOB_FAILURES.c.executions <= sa.bindparam("oldest_dropped"),
)


def record(connection: sa.Connection, failures: list[tuple[int, str]], now: dt.datetime) -> None:
    """Add one attempt per ``(job_id, error JSON)`` to the jobs' histories, in the caller's
    transaction; drop attempts beyond the newest :data:`KEPT_PER_JOB` of each job."""
    if not failures:
        return
    runs = [executions_of(error) for _job_id, error in failures]
    connection.execute(
        _INSERT,
        [
            {"job_id": job_id, "error": error, "executions": run, "created_at": now}
            for (job_id, error), run in zip(failures, runs, strict=True)
        ],
    )
    pruned = [
        {"job_id": job_id, "oldest_dropped": run - KEPT_PER_JOB}
        for (job_id, _error), run in zip(failures, runs, strict=True)
        if run is not None and run > KEPT_PER_JOB
    ]
    if pruned:
        connection.execute(_PRUNE, pruned)


def executions_of(error: str | None) -> int | None:
    """The run count an error JSON records (see ``outcomes.error_json``), None without one."""
    try:
        executions = json.loads(error or "").get("executions")
    except (ValueError, AttributeError, RecursionError):
        return None
    return executions if type(executions) is int else None

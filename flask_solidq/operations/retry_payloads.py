"""What a hand retry resets in a failed job's payload: its ``retry_on`` rules get their
attempts back, and its ``executions`` count the failing run (which only its error recorded),
as Solid Queue's retry does. Used by :mod:`~flask_solidq.operations.actions`.
"""

from __future__ import annotations

import datetime as dt
import json

import sqlalchemy as sa

from flask_solidq.definitions.arguments import dumps
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.transitions import jobs as job_rows


def runs_of_failures(connection: sa.Connection, ids: list[int]) -> dict[int, int]:
    """How many times each failed job ran, its failing run included, as its error recorded
    it (the payload only counts the runs a retry recorded)."""
    rows = connection.execute(
        sa.select(FAILED.c.job_id, FAILED.c.error).where(FAILED.c.job_id.in_(ids))
    )
    runs: dict[int, int] = {}
    for job_id, error in rows:
        try:
            executions = json.loads(error or "").get("executions")
        except (ValueError, AttributeError, RecursionError):
            continue
        if type(executions) is int:
            runs[job_id] = executions
    return runs


def reset_rule_counters(
    connection: sa.Connection, ids: list[int], runs: dict[int, int], now: dt.datetime
) -> None:
    """Give the retried jobs' ``retry_on`` rules their attempts back, as Solid Queue's retry
    does: a job whose attempts ran out would otherwise fail again at its first error. The
    total ``executions`` stays, as the job's history, counting the failed run too."""
    rows = connection.execute(sa.select(JOBS.c.id, JOBS.c.arguments).where(JOBS.c.id.in_(ids)))
    payloads = [(row.id, _for_retry(row.arguments, runs.get(row.id))) for row in rows]
    job_rows.reset_for_retry(connection, payloads, now)


def _for_retry(arguments: str | None, runs: int | None) -> str | None:
    try:
        payload = json.loads(arguments or "")
    except (ValueError, RecursionError):
        return arguments  # not a payload a worker could load anyway: it will fail again
    if not isinstance(payload, dict):
        return arguments
    payload.pop("exception_executions", None)
    if runs is not None and runs > payload.get("executions", 0):
        payload["executions"] = runs
    return dumps(payload)

"""A job's failed attempts, newest first, as ``flask solidq job`` and the dashboard's job page
list them (written by :mod:`flask_solidq.operations.attempts`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import sqlalchemy as sa

from flask_solidq.models.failures import KEPT_PER_JOB
from flask_solidq.models.tables import JOB_FAILURES

__all__ = ["KEPT_PER_JOB", "Attempt", "attempts_of", "duration_text"]


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One failed run of a job: when, what it raised, and which run it was."""

    failed_at: dt.datetime
    exception_class: str
    message: str
    #: Which run of the job this was (1 for the first); None when not recorded.
    executions: int | None


def attempts_of(connection: sa.Connection, job_id: int) -> list[Attempt]:
    """The failed attempts kept for ``job_id``, newest first (at most :data:`KEPT_PER_JOB`)."""
    rows = connection.execute(
        sa.select(JOB_FAILURES.c.error, JOB_FAILURES.c.created_at, JOB_FAILURES.c.executions)
        .where(JOB_FAILURES.c.job_id == job_id)
        .order_by(JOB_FAILURES.c.id.desc())
        .limit(KEPT_PER_JOB)
    )
    return [_attempt(row.error, row.created_at, row.executions) for row in rows]


def _attempt(error: str | None, failed_at: dt.datetime, executions: int | None) -> Attempt:
    """An attempt from its stored error JSON; text that isn't that JSON (a row written by
    hand) becomes the message, so one bad row never breaks the page."""
    try:
        parsed = json.loads(error or "")
    except (ValueError, RecursionError):
        parsed = error or ""
    if not isinstance(parsed, dict):
        return Attempt(failed_at, "", str(parsed), executions)
    return Attempt(
        failed_at,
        str(parsed.get("exception_class") or ""),
        str(parsed.get("message") or ""),
        executions,
    )


def duration_text(started_at: dt.datetime | None, finished_at: dt.datetime | None) -> str:
    """How long a run took, for people: ``"0.042s"``, ``"3m 05s"``, ``"2h 01m"``; empty when
    the start isn't known (a job finished before schema version 4)."""
    if started_at is None or finished_at is None:
        return ""
    seconds = max((finished_at - started_at).total_seconds(), 0.0)
    if seconds < 60:
        return f"{seconds:.3f}s"
    minutes, second = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {second:02d}s"
    hours, minute = divmod(minutes, 60)
    return f"{hours}h {minute:02d}m"

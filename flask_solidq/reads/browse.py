"""Reading jobs for people: a page of jobs in one state, newest first. Read-only; behind
``flask solidq jobs``, the dashboard's lists and its search (:mod:`.search`); one job whole is
:mod:`.job_detail`'s.

Pages are keyset-paginated on the job id, newest first (``before``: the last id of the
previous page), so a page costs the same at the millionth job as at the first. Finished jobs
are listed by finish time instead, newest first, on ``(finished_at, id)``: ``before`` is still
the previous page's last id, and its ``finished_at`` is read in the same query.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import typing as t

import sqlalchemy as sa

from flask_solidq.controls.rate_limit.budgets import IS_DEFERRED
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.reads import attempts as attempt_reads
from flask_solidq.values import JSONValue

#: The most jobs one page lists.
MAX_PAGE = 500


class State(str, enum.Enum):
    """A job's state: which execution row points at it (none, and finished: finished). A
    scheduled execution of a job its rate limit deferred reads as ``deferred``; the others
    as ``scheduled``."""

    SCHEDULED = "scheduled"
    DEFERRED = "deferred"
    READY = "ready"
    CLAIMED = "claimed"
    BLOCKED = "blocked"
    FAILED = "failed"
    FINISHED = "finished"


#: The execution table of each state but finished.
EXECUTIONS: dict[State, sa.Table] = {
    State.SCHEDULED: SCHEDULED,
    State.DEFERRED: SCHEDULED,
    State.READY: READY,
    State.CLAIMED: CLAIMED,
    State.BLOCKED: BLOCKED,
    State.FAILED: FAILED,
}


@dataclasses.dataclass(frozen=True)
class JobSummary:
    """A job as a list shows it."""

    id: int
    active_job_id: str | None
    class_name: str
    queue_name: str
    priority: int
    state: State
    scheduled_at: dt.datetime | None
    created_at: dt.datetime
    finished_at: dt.datetime | None
    #: Failed jobs: the exception class and message of their error.
    error_class: str | None = None
    error_message: str | None = None
    #: Scheduled and deferred jobs in a list: when their execution is due (a deferred job's
    #: is later than its ``scheduled_at``).
    due_at: dt.datetime | None = None
    #: Failed jobs: when they failed (their failed execution's ``created_at``).
    failed_at: dt.datetime | None = None
    #: Finished jobs: when their last run started (None before schema version 4).
    started_at: dt.datetime | None = None

    @property
    def duration(self) -> str:
        """How long a finished job's last run took, for people; empty when unknown."""
        return attempt_reads.duration_text(self.started_at, self.finished_at)


def list_jobs(
    connection: sa.Connection,
    state: State,
    *,
    queue: str | None = None,
    job: str | None = None,
    batch: int | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[JobSummary]:
    """Up to ``limit`` jobs in ``state`` (of ``queue``, of the job named ``job``, of the
    batch whose id is ``batch``), newest first, with ids below ``before``."""
    limit = max(1, min(limit, MAX_PAGE))
    query = select_jobs(state, queue=queue, job=job)
    if batch is not None:
        query = query.where(JOBS.c.batch_id == batch)
    order: list[sa.ColumnElement[object]] = [JOBS.c.id.desc()]
    if state is State.FINISHED:
        order = [JOBS.c.finished_at.desc(), JOBS.c.id.desc()]
    if before is not None:
        query = query.where(
            _finished_before(before) if state is State.FINISHED else JOBS.c.id < before
        )
    rows = connection.execute(query.order_by(*order).limit(limit)).mappings()
    return [summary(row, state) for row in rows]


def count_jobs(
    connection: sa.Connection,
    state: State,
    *,
    queue: str | None = None,
    job: str | None = None,
    batch: int | None = None,
) -> int:
    """How many jobs are in ``state`` (of ``queue``, of the job named ``job``, of the batch
    whose id is ``batch``)."""
    query = select_jobs(state, queue=queue, job=job)
    if batch is not None:
        query = query.where(JOBS.c.batch_id == batch)
    counted = sa.select(sa.func.count()).select_from(query.subquery())
    return int(connection.scalar(counted) or 0)


# Any: the columns of a Table (not a mapped class) are untyped, and SQLAlchemy 2.0 and 2.1
# spell a typed row or select differently.
def select_jobs(
    state: State,
    *extra: sa.ColumnElement[object],
    queue: str | None = None,
    job: str | None = None,
) -> sa.Select[t.Any]:
    """The jobs in ``state`` (of ``queue``, of the job named ``job``) with the columns
    :func:`summary` reads, and ``extra``: what a list pages through and a search scans."""
    # Any: a select of a list of columns is typed by their count and types, which vary.
    columns: list[sa.ColumnElement[t.Any]] = [*SUMMARY_COLUMNS, *extra]
    if state is State.FINISHED:
        query = sa.select(*columns).where(JOBS.c.finished_at.is_not(None))
    else:
        execution = EXECUTIONS[state]
        if state is State.FAILED:
            columns.extend([FAILED.c.error, FAILED.c.created_at.label("failed_at")])
        if execution is SCHEDULED:
            columns.append(SCHEDULED.c.scheduled_at.label("due_at"))
        query = sa.select(*columns).select_from(
            JOBS.join(execution, execution.c.job_id == JOBS.c.id)
        )
        if state is State.SCHEDULED:
            query = query.where(sa.not_(IS_DEFERRED))
        elif state is State.DEFERRED:
            query = query.where(IS_DEFERRED)
    if queue is not None:
        query = query.where(JOBS.c.queue_name == queue)
    if job is not None:
        query = query.where(JOBS.c.class_name == job)
    return query


def _finished_before(before: int) -> sa.ColumnElement[bool]:
    """Finished jobs after job ``before`` in finish order (newest first): finished earlier,
    or at the same moment with a lower id. A ``before`` job that was cleared meanwhile ends
    the list (its finish time is unknown).

    The bound ``finished_at <= at`` stands apart from the tie-break so the database seeks to
    it along ``finished_at``'s index: written as one ``OR``, PostgreSQL walked the index from
    the newest job and filtered."""
    jobs = JOBS.alias("before_job")
    at = sa.select(jobs.c.finished_at).where(jobs.c.id == before).scalar_subquery()
    return sa.and_(JOBS.c.finished_at <= at, sa.or_(JOBS.c.finished_at < at, JOBS.c.id < before))


#: The columns :func:`summary` reads.
SUMMARY_COLUMNS = (
    JOBS.c.id,
    JOBS.c.active_job_id,
    JOBS.c.class_name,
    JOBS.c.queue_name,
    JOBS.c.priority,
    JOBS.c.scheduled_at,
    JOBS.c.created_at,
    JOBS.c.finished_at,
    JOBS.c.started_at,
)


def summary(row: sa.RowMapping, state: State) -> JobSummary:
    """A row of :func:`select_jobs` as a list shows it."""
    error_class = message = None
    if "error" in row:
        parsed = parse_stored(row["error"])
        if isinstance(parsed, dict):
            error_class = str(parsed.get("exception_class") or "")
            message = str(parsed.get("message") or "")
        else:
            error_class, message = "", str(parsed)
    return JobSummary(
        id=row["id"],
        active_job_id=row["active_job_id"],
        class_name=row["class_name"],
        queue_name=row["queue_name"],
        priority=row["priority"],
        state=state,
        scheduled_at=row["scheduled_at"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        error_class=error_class,
        error_message=message,
        due_at=row.get("due_at"),
        failed_at=row.get("failed_at"),
        started_at=row["started_at"],
    )


def parse_stored(text: str | None) -> JSONValue:
    """JSON text parsed, or the text itself when it isn't JSON (a row written by hand)."""
    try:
        parsed: JSONValue = json.loads(text or "null")
    except (ValueError, RecursionError):
        return text
    return parsed

"""One job whole, for people: its row, its state and what its state row says (the process
that holds it, a blocked job's lease, a failure's error), its keys, its collected calls and its
failed attempts. Read-only; behind ``flask solidq job`` and the dashboard's job page.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import sqlalchemy as sa

from flask_solidq import argument_filter
from flask_solidq import identifiers
from flask_solidq.controls.rate_limit.budgets import IS_DEFERRED
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import COALESCED_CALLS
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PROCESSES
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.reads import attempts as attempt_reads
from flask_solidq.reads import browse
from flask_solidq.reads import step_progress
from flask_solidq.reads.browse import JobSummary
from flask_solidq.reads.browse import State
from flask_solidq.values import JSONValue


@dataclasses.dataclass(frozen=True)
class Error:
    """A failed execution's error, parsed: what the worker stored."""

    exception_class: str
    message: str
    backtrace: list[str]
    failed_at: dt.datetime
    #: How many times the job ran, the failing run included (None: not recorded).
    executions: int | None = None


@dataclasses.dataclass(frozen=True)
class JobDetail:
    """One job whole: its row, its state and what its state row says, its keys and calls."""

    summary: JobSummary
    #: The stored payload, parsed (arguments in their stored JSON form, with the values of
    #: ``SOLIDQ_FILTER_ARGUMENTS``' keys shown as ``[FILTERED]``), or the raw text when it
    #: isn't JSON.
    payload: JSONValue
    #: How many times the job ran (the payload's attempt counter).
    executions: int
    concurrency_key: str | None
    rate_limit_key: str | None
    #: The coalesce key whose open job this is, if any.
    coalesce_key: str | None
    #: Collected calls the job holds.
    calls: int
    #: Claimed: the process that holds it (its name, host and pid).
    claimed_by: str | None = None
    #: Blocked: when its concurrency key's semaphore lease runs out.
    blocked_until: dt.datetime | None = None
    error: Error | None = None
    #: The batch the job belongs to (``solidq.batch()``), if any.
    batch_id: int | None = None
    #: Its failed attempts, newest first (the newest ``attempts.KEPT_PER_JOB``): kept across
    #: a retry by hand, until the job itself goes.
    attempts: list[attempt_reads.Attempt] = dataclasses.field(default_factory=list)
    #: Every budget it is charged and its units, as stored, under stacked or weighted limits
    #: (:mod:`flask_solidq.controls.rate_limit.rate_charges`).
    rate_limit_charges: str | None = None

    @property
    def attempts_kept(self) -> int:
        """How many failed attempts a job keeps at most (its page says so when it has them)."""
        return attempt_reads.KEPT_PER_JOB

    @property
    def steps(self) -> step_progress.StepProgress | None:
        """Its step progress (steps that resume), from the payload; None without steps."""
        return step_progress.of(self.payload)


def find_job(connection: sa.Connection, reference: str | int) -> JobDetail | None:
    """The job whose ``provider_job_id`` (row id) or ``job_id`` (UUID) is ``reference``."""
    row = (
        connection.execute(
            sa.select(
                *browse.SUMMARY_COLUMNS,
                JOBS.c.arguments,
                JOBS.c.concurrency_key,
                JOBS.c.rate_limit_key,
                JOBS.c.rate_limit_charges,
                JOBS.c.batch_id,
            )
            .where(_reference(reference))
            .order_by(JOBS.c.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    state = job_state(connection, row["id"], row["finished_at"])
    payload = browse.parse_stored(row["arguments"])
    executions = payload.get("executions", 0) if isinstance(payload, dict) else 0
    error = _error(connection, row["id"]) if state is State.FAILED else None
    if error is not None and error.executions is not None:
        executions = error.executions  # the failing run counted: the payload doesn't
    shown = browse.summary(row, state)
    if error is not None:
        shown = dataclasses.replace(
            shown,
            error_class=error.exception_class,
            error_message=error.message,
            failed_at=error.failed_at,
        )
    return JobDetail(
        summary=shown,
        payload=argument_filter.current().filtered_payload(payload),
        executions=executions if isinstance(executions, int) else 0,
        concurrency_key=row["concurrency_key"],
        rate_limit_key=row["rate_limit_key"],
        rate_limit_charges=row["rate_limit_charges"],
        coalesce_key=connection.scalar(
            sa.select(COALESCE_KEYS.c.key).where(COALESCE_KEYS.c.job_id == row["id"])
        ),
        calls=int(
            connection.scalar(
                sa.select(sa.func.count())
                .select_from(COALESCED_CALLS)
                .where(COALESCED_CALLS.c.job_id == row["id"])
            )
            or 0
        ),
        claimed_by=_claimed_by(connection, row["id"]) if state is State.CLAIMED else None,
        blocked_until=(
            connection.scalar(sa.select(BLOCKED.c.expires_at).where(BLOCKED.c.job_id == row["id"]))
            if state is State.BLOCKED
            else None
        ),
        error=error,
        batch_id=row["batch_id"],
        attempts=attempt_reads.attempts_of(connection, row["id"]),
    )


def job_state(connection: sa.Connection, job_id: int, finished_at: dt.datetime | None) -> State:
    """Which state the job is in (a job with no execution row and no ``finished_at``, which
    only a moment between two transactions can show, reads as ready)."""
    for state, execution in browse.EXECUTIONS.items():
        if state is State.DEFERRED:
            continue
        if connection.scalar(sa.select(execution.c.id).where(execution.c.job_id == job_id)):
            if state is State.SCHEDULED and _is_deferred(connection, job_id):
                return State.DEFERRED
            return state
    return State.FINISHED if finished_at is not None else State.READY


def _is_deferred(connection: sa.Connection, job_id: int) -> bool:
    return bool(
        connection.scalar(
            sa.select(sa.literal(1))
            .select_from(SCHEDULED.join(JOBS, JOBS.c.id == SCHEDULED.c.job_id))
            .where(SCHEDULED.c.job_id == job_id, IS_DEFERRED)
        )
    )


def _reference(reference: str | int) -> sa.ColumnElement[bool]:
    """Where a job is ``reference``: a number no id can be (negative, past a ``bigint``, in
    other digits than 0-9), or text with a NUL, is no job's (the database would refuse it)."""
    if isinstance(reference, int):
        return JOBS.c.id == reference if identifiers.is_fit_id(reference) else sa.false()
    if identifiers.looks_like_number(reference):
        parsed = identifiers.parse_id(reference)
        return sa.false() if parsed is None else JOBS.c.id == parsed
    if identifiers.has_nul(reference):
        return sa.false()
    return JOBS.c.active_job_id == reference


def _claimed_by(connection: sa.Connection, job_id: int) -> str | None:
    row = connection.execute(
        sa.select(PROCESSES.c.name, PROCESSES.c.hostname, PROCESSES.c.pid)
        .select_from(CLAIMED.outerjoin(PROCESSES, PROCESSES.c.id == CLAIMED.c.process_id))
        .where(CLAIMED.c.job_id == job_id)
    ).first()
    if row is None or row.name is None:
        return None
    return f"{row.name} (pid {row.pid} on {row.hostname})"


def _error(connection: sa.Connection, job_id: int) -> Error | None:
    row = connection.execute(
        sa.select(FAILED.c.error, FAILED.c.created_at).where(FAILED.c.job_id == job_id)
    ).first()
    if row is None:
        return None
    parsed = browse.parse_stored(row.error)
    if not isinstance(parsed, dict):
        return Error("", str(parsed), [], row.created_at)
    backtrace = parsed.get("backtrace")
    executions = parsed.get("executions")
    return Error(
        exception_class=str(parsed.get("exception_class") or ""),
        message=str(parsed.get("message") or ""),
        backtrace=[str(line) for line in backtrace] if isinstance(backtrace, list) else [],
        failed_at=row.created_at,
        executions=executions if type(executions) is int else None,
    )

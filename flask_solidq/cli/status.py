"""The text ``flask solidq status`` prints: plain functions from the figures
:mod:`flask_solidq.reads.queue_figures` reads to aligned tables, so the command stays a few
lines and tests can read what it would print."""

from __future__ import annotations

import typing as t

from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.formatting import count_of
from flask_solidq.formatting import format_age
from flask_solidq.formatting import format_duration
from flask_solidq.formatting import format_expiry
from flask_solidq.formatting import format_table
from flask_solidq.formatting import format_when
from flask_solidq.operations.process_commands import state_of
from flask_solidq.operations.processes import process_rows
from flask_solidq.reads import control_reads
from flask_solidq.reads import queue_figures
from flask_solidq.reads.process_row import ProcessRow
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    import datetime as dt

    import sqlalchemy as sa

#: The longest error message a failed job's line shows; the dashboard has the rest.
MESSAGE_WIDTH = 60

QUEUE_HEADERS = (
    "QUEUE",
    "READY",
    "SCHEDULED",
    "DEFERRED",
    "CLAIMED",
    "BLOCKED",
    "FAILED",
    "FINISHED",
    "LATENCY",
    "PAUSED",
)


def render_status(
    connection: sa.Connection, now: dt.datetime | None = None, failed_limit: int = 20
) -> str:
    """The whole status report: queues, processes, the latest failed jobs, and blocked jobs,
    semaphores, rate-limited jobs and coalescing when there are any. Reads in ``connection``'s
    transaction, so the figures agree with each other."""
    now = now or utcnow()
    sections = [
        render_queues(queue_figures.queue_counts(connection, now)),
        render_processes(process_rows(connection), now),
        render_failed_jobs(queue_figures.failed_jobs(connection, limit=failed_limit), now),
    ]
    blocked = queue_figures.blocked_summary(connection)
    if blocked:
        sections.append(render_blocked(blocked))
    semaphores = queue_figures.semaphores(connection)
    if semaphores:
        sections.append(render_semaphores(semaphores, now))
    waiting = budgets.waiting(connection)
    if not budget_table.exists(connection):
        sections.append(render_missing_budgets(waiting))
    elif waiting:
        sections.append(render_budgets(connection, waiting, now))
    coalescing = queue_figures.coalesce_summary(connection)
    if coalescing:
        sections.append(render_coalescing(coalescing, now))
    return "\n\n".join(sections)


def render_queues(counts: t.Sequence[queue_figures.QueueCounts]) -> str:
    """Each queue's jobs per state, its latency and whether it is paused."""
    if not counts:
        return "Queues: none yet (no jobs, no pauses)."
    rows = [
        [
            queue.queue_name,
            *(str(size) for size in _state_sizes(queue)),
            format_duration(queue.latency) if queue.ready else "-",
            "paused" if queue.paused else "",
        ]
        for queue in counts
    ]
    return "Queues\n" + format_table(QUEUE_HEADERS, rows, right=range(1, 9))


def _state_sizes(queue: queue_figures.QueueCounts) -> tuple[int, ...]:
    """A queue's jobs in each state of :data:`QUEUE_HEADERS`. The deferred jobs (put off by a
    rate limit) are counted apart from the plain scheduled ones, as the dashboard's overview
    and ``flask solidq jobs --state`` count them, so the three agree on the same queue."""
    return (
        queue.ready,
        queue.scheduled - queue.deferred,
        queue.deferred,
        queue.claimed,
        queue.blocked,
        queue.failed,
        queue.finished,
    )


def render_processes(rows: t.Sequence[ProcessRow], now: dt.datetime) -> str:
    """Each registered process: its id (what ``quiet`` and ``stop`` take), its state
    (running, quieting, stopping) and how long ago it last heartbeat."""
    if not rows:
        return "Processes: none running."
    table = [
        [
            str(row.id),
            row.kind,
            row.name,
            row.hostname or "-",
            str(row.pid),
            state_of(row.command),
            format_age(row.last_heartbeat_at, now),
        ]
        for row in rows
    ]
    headers = ["ID", "KIND", "NAME", "HOST", "PID", "STATE", "HEARTBEAT"]
    return "Processes\n" + format_table(headers, table, right={0, 4})


def render_failed_jobs(failed: t.Sequence[queue_figures.FailedJob], now: dt.datetime) -> str:
    """The latest failed jobs, newest first, each with its error's class and first line."""
    if not failed:
        return "Failed jobs: none."
    rows = [
        [
            str(job.job_id),
            job.class_name,
            job.queue_name,
            _error_summary(job),
            format_age(job.failed_at, now),
        ]
        for job in failed
    ]
    headers = ["ID", "JOB", "QUEUE", "ERROR", "FAILED AT"]
    return f"Failed jobs (latest {len(failed)})\n" + format_table(headers, rows, right={0})


def _error_summary(job: queue_figures.FailedJob) -> str:
    lines = job.message.strip().splitlines()
    message = lines[0] if lines else ""
    if len(message) > MESSAGE_WIDTH:
        message = message[: MESSAGE_WIDTH - 3] + "..."
    if job.error_class and message:
        return f"{job.error_class}: {message}"
    return job.error_class or message


def render_blocked(blocked: t.Sequence[queue_figures.BlockedCount]) -> str:
    """How many jobs wait on each concurrency key."""
    rows = [[entry.concurrency_key, str(entry.size)] for entry in blocked]
    return "Blocked jobs\n" + format_table(["CONCURRENCY KEY", "BLOCKED JOBS"], rows, right={1})


def render_semaphores(
    semaphores: t.Sequence[queue_figures.SemaphoreState], now: dt.datetime
) -> str:
    """Each concurrency key's free slots and when its lease runs out."""
    rows = [
        [entry.key, str(entry.value), format_expiry(entry.expires_at, now)] for entry in semaphores
    ]
    return "Semaphores\n" + format_table(["KEY", "FREE SLOTS", "LEASE"], rows, right={1})


def render_budgets(
    connection: sa.Connection, waiting: t.Sequence[budgets.Waiting], now: dt.datetime
) -> str:
    """Each rate-limit budget with deferred jobs: its limit, what it admits now (in units
    for a limit counted in units), how many jobs it deferred, its next admission (as the
    dashboard says it: :func:`~flask_solidq.reads.control_reads.next_admission_at`) and
    its next slot. Jobs under stacked limits are counted on their main budget; their other
    budgets follow it, indented, each read by its own limit (any of them may be the one that
    holds the jobs back)."""
    rows = []
    listed = {entry.key for entry in waiting}  # a budget with its own waiting jobs has its row
    for entry in waiting:
        rows.append(_budget_cells(connection, entry.key, now, entry))
        for other in control_reads.stacked_budget_keys(connection, entry.key):
            if other not in listed:
                rows.append(_budget_cells(connection, other, now, None))
    headers = ["KEY", "LIMIT", "AVAILABLE", "DEFERRED", "NEXT ADMISSION", "NEXT SLOT"]
    return "Rate-limited jobs\n" + format_table(headers, rows, right={2, 3})


def render_missing_budgets(waiting: t.Sequence[budgets.Waiting]) -> str:
    """The budgets table is missing: what that does, and the fix."""
    count = sum(entry.size for entry in waiting)
    return (
        f"Rate-limited jobs: the table {budget_table.NAME} is missing, so they wait a"
        f" minute at a time instead of running ({count} waiting now). {budget_table.FIX}"
    )


def _budget_cells(
    connection: sa.Connection, key: str, now: dt.datetime, waiting: budgets.Waiting | None
) -> list[str]:
    """A budget's row; a stacked one (no ``waiting``: its jobs are counted on their main
    budget) is indented under it."""
    outlook = control_reads.budget_outlook(key, budgets.read(connection, key), now)
    # "?": the job that declares it isn't imported by this app, so its limit is unknown.
    return [
        key if waiting else f"  {key}",
        outlook.limit.in_words() if outlook else "?",
        count_of(outlook.available, outlook.counts_units) if outlook else "?",
        str(waiting.size) if waiting else "-",
        control_reads.describe_next_admission(outlook, waiting, now),
        format_when(waiting.next_check_at, now) if waiting else "-",
    ]


def render_coalescing(summary: t.Sequence[queue_figures.CoalesceSummary], now: dt.datetime) -> str:
    """Each coalescing job's open keys, and its collected calls waiting to run with the
    oldest one's age."""
    rows = [
        [
            entry.class_name,
            str(entry.open_keys),
            str(entry.waiting_calls),
            format_age(entry.oldest_call_at, now) if entry.oldest_call_at else "-",
        ]
        for entry in summary
    ]
    headers = ["JOB", "OPEN KEYS", "WAITING CALLS", "OLDEST CALL"]
    return "Coalescing\n" + format_table(headers, rows, right={1, 2})

"""The text ``flask solidq jobs`` and ``flask solidq job`` print: a page of jobs as a table
(its last column by state, and a hint naming the state people mistake it for), one job whole,
and the command line that shows the next page. :mod:`.batches` prints its jobs the same way."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import typing as t

import sqlalchemy as sa

from flask_solidq import formatting
from flask_solidq.reads import browse
from flask_solidq.reads import job_detail

#: The longest error message a list line shows; `flask solidq job ID` shows it whole.
MESSAGE_WIDTH = 60

#: For a list of one state, the state whose jobs people look for there, and what those wait
#: for (one job, several): a rate-limited backlog is deferred, not scheduled; a job waiting
#: for a concurrency slot is blocked, not ready.
_NEIGHBOURS: dict[browse.State, tuple[browse.State, str, str]] = {
    browse.State.SCHEDULED: (
        browse.State.DEFERRED,
        "waits for its rate limit",
        "wait for their rate limit",
    ),
    browse.State.DEFERRED: (
        browse.State.SCHEDULED,
        "is scheduled for later (wait=, a retry's wait, a debounce)",
        "are scheduled for later (wait=, a retry's wait, a debounce)",
    ),
    browse.State.READY: (
        browse.State.BLOCKED,
        "waits for a concurrency slot",
        "wait for a concurrency slot",
    ),
}


def elsewhere_hint(
    connection: sa.Connection,
    state: browse.State,
    *,
    first_page: bool,
    queue: str | None,
    job: str | None,
    batch: int | None,
) -> str | None:
    """On a list's first page: how many jobs (with the same filters) are in the state people
    mistake for ``state``, what they wait for, and the command that lists them."""
    if not first_page or state not in _NEIGHBOURS:
        return None
    neighbour, one, many = _NEIGHBOURS[state]
    count = browse.count_jobs(connection, neighbour, queue=queue, job=job, batch=batch)
    if not count:
        return None
    command = command_line(state=neighbour.value, queue=queue, job=job, batch=batch)
    return f"{count_jobs(count)} {one if count == 1 else many}: {command}"


def render_jobs(
    page: t.Sequence[browse.JobSummary],
    state: browse.State,
    now: dt.datetime,
    elsewhere: str | None = None,
) -> str:
    """A page of jobs as a table; its last column depends on the state. ``elsewhere`` (see
    :func:`elsewhere_hint`) follows the table, or the line that says there is none."""
    if not page:
        none = f"No {state.value} jobs."
        return f"{none} {elsewhere}" if elsewhere else none
    last, value = _LAST_COLUMN.get(state, ("ENQUEUED", _enqueued))
    rows = [
        [str(job.id), job.class_name, job.queue_name, str(job.priority), value(job, now)]
        for job in page
    ]
    table = formatting.format_table(["ID", "JOB", "QUEUE", "PRIORITY", last], rows, right={0, 3})
    return f"{table}\n\nNot listed: {elsewhere}" if elsewhere else table


def _enqueued(job: browse.JobSummary, now: dt.datetime) -> str:
    return formatting.format_age(job.created_at, now)


def _due(job: browse.JobSummary, now: dt.datetime) -> str:
    due = job.due_at or job.scheduled_at
    return formatting.format_when(due, now) if due else "-"


def _finished(job: browse.JobSummary, now: dt.datetime) -> str:
    return formatting.format_age(job.finished_at, now) if job.finished_at else "-"


def _error(job: browse.JobSummary, now: dt.datetime) -> str:
    message = (job.error_message or "").splitlines()[0] if job.error_message else ""
    if len(message) > MESSAGE_WIDTH:
        message = message[: MESSAGE_WIDTH - 1] + "…"
    return f"{job.error_class or '?'}: {message}" if message else (job.error_class or "?")


_LAST_COLUMN: dict[browse.State, tuple[str, t.Callable[[browse.JobSummary, dt.datetime], str]]] = {
    browse.State.SCHEDULED: ("DUE", _due),
    browse.State.DEFERRED: ("DUE", _due),
    browse.State.FINISHED: ("FINISHED", _finished),
    browse.State.FAILED: ("ERROR", _error),
}


def render_job(detail: job_detail.JobDetail, now: dt.datetime) -> str:
    """One job whole, for a terminal."""
    job = detail.summary
    fields = [
        ("job", job.class_name),
        ("job_id", job.active_job_id or "-"),
        ("state", job.state.value),
        ("queue", f"{job.queue_name} (priority {job.priority})"),
        ("enqueued", describe_moment(job.created_at, now)),
        ("scheduled", describe_moment(job.scheduled_at, now) if job.scheduled_at else "-"),
        ("finished", describe_moment(job.finished_at, now) if job.finished_at else "-"),
        *([("ran for", job.duration)] if job.duration else []),
        ("executions", str(detail.executions)),
        ("concurrency key", detail.concurrency_key or "-"),
        ("rate-limit key", detail.rate_limit_key or "-"),
        ("coalesce key", f"{detail.coalesce_key} (open)" if detail.coalesce_key else "-"),
        ("collected calls", str(detail.calls)),
    ]
    if detail.batch_id is not None:
        fields.append(("batch", f"{detail.batch_id} (flask solidq batch {detail.batch_id})"))
    if detail.claimed_by:
        fields.append(("claimed by", detail.claimed_by))
    if detail.blocked_until:
        fields.append(("blocked until", describe_moment(detail.blocked_until, now)))
    if detail.steps is not None:
        fields.append(("resumptions", str(detail.steps.resumptions)))
    width = max(len(name) for name, _ in fields)
    lines = [f"Job {job.id}"]
    lines += [f"  {name.ljust(width)}  {value}" for name, value in fields]
    lines += render_steps(detail)
    lines += ["", "Payload:", _indent(json.dumps(detail.payload, indent=2, ensure_ascii=False))]
    lines += render_attempts(detail, now)  # before the error: its backtrace ends the text
    if detail.error is not None:
        error = detail.error
        lines += ["", f"Error ({describe_moment(error.failed_at, now)}): {error.exception_class}"]
        lines += [_indent(error.message)] if error.message else []
        lines += ["", "Backtrace:", *[_indent(line) for line in error.backtrace]]
    return "\n".join(lines)


def render_steps(detail: job_detail.JobDetail) -> list[str]:
    """Each step the job reached, with its state (done, or in progress at its cursor)."""
    if detail.steps is None:
        return []
    states = detail.steps.states
    if detail.summary.state.value != "finished":
        states = [*states, ("later steps", "not reached yet")]
    width = max(len(name) for name, _state in states)
    return ["", "Steps:", *[f"  {name.ljust(width)}  {state}" for name, state in states]]


def render_attempts(detail: job_detail.JobDetail, now: dt.datetime) -> list[str]:
    """The job's failed attempts, newest first, one line each: kept after a retry by hand,
    so what went wrong before stays in view."""
    if not detail.attempts:
        return []
    lines = ["", f"Failed attempts (newest first, the last {detail.attempts_kept} kept):"]
    for attempt in detail.attempts:
        run = f"run {attempt.executions}" if attempt.executions is not None else "run ?"
        message = (attempt.message.splitlines() or [""])[0]
        lines.append(f"  {run}  {describe_moment(attempt.failed_at, now)}")
        lines.append(f"    {attempt.exception_class or '?'}: {message}")
    return lines


def describe_moment(moment: dt.datetime, now: dt.datetime) -> str:
    """A time for a terminal: ``2026-01-02 10:00:00 UTC (12s ago)``."""
    relative = (
        formatting.format_when(moment, now) if moment > now else formatting.format_age(moment, now)
    )
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC ({relative})"


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def count_jobs(count: int) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} job{'s' if count != 1 else ''}"


def command_line(command: str = "jobs", **options: object) -> str:
    """The ``flask solidq`` command line that runs ``command`` with ``options`` (those not
    None): what a full page prints to show the next one."""
    parts = [f"flask solidq {command}"]
    for name, value in options.items():
        if value is not None:
            parts.append(f"--{name} {shlex.quote(str(value))}")
    return " ".join(parts)

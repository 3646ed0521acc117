"""``flask solidq jobs``, ``job``, ``retry``, ``discard`` and ``run-now``: reading jobs and
acting on them from a terminal, over :mod:`flask_solidq.reads.browse` and
:mod:`flask_solidq.operations.actions` (the same operations the Python API and the dashboard
use). :func:`register` adds them to the ``flask solidq`` group."""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
import typing as t

import click
import sqlalchemy as sa

from flask_solidq import formatting
from flask_solidq import identifiers
from flask_solidq.cli import params
from flask_solidq.operations import actions
from flask_solidq.reads import browse
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

#: The longest error message a list line shows; `flask solidq job ID` shows it whole.
MESSAGE_WIDTH = 60

EngineFactory = t.Callable[[], sa.Engine]

#: The largest id a ``bigint`` primary key holds: an id option above it is a usage error, not
#: the driver's (PostgreSQL refuses the parameter).
MAX_ID = identifiers.MAX_ID

#: What --yes says: the commands that ask need it where nobody can answer.
YES_HELP = "Don't ask for confirmation (needed where stdin is no terminal: scripts, cron)."

#: The times the --failed-before/--failed-after options take (UTC).
TIME_FORMATS = ["%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"]

_FILTER_OPTIONS = [
    click.option("--queue", type=params.QUEUE_NAME, default=None, help="Only jobs of this queue."),
    click.option("--job", type=params.JOB_NAME, default=None, help="Only jobs of this job name."),
    click.option(
        "--error-class",
        type=params.Name("error class"),
        default=None,
        help="Failed jobs whose error is of this class (ValueError or builtins.ValueError).",
    ),
    click.option(
        "--failed-before",
        type=click.DateTime(TIME_FORMATS),
        default=None,
        help="Failed before (UTC).",
    ),
    click.option(
        "--failed-after",
        type=click.DateTime(TIME_FORMATS),
        default=None,
        help="Failed after (UTC).",
    ),
    click.option(
        "--batch",
        type=params.BATCH_ID,
        default=None,
        help="Only jobs of this batch and of its child batches (implies --all).",
    ),
]


def _filter_options(command: t.Callable[..., t.Any]) -> t.Callable[..., t.Any]:
    for option in reversed(_FILTER_OPTIONS):
        command = option(command)
    return command


def register(group: click.Group, engine: EngineFactory) -> None:
    """Add the job commands to ``group``; ``engine`` gives the queue's engine (or raises a
    one-line click error)."""

    @group.command("jobs")
    @click.option(
        "--state",
        type=click.Choice([state.value for state in browse.State]),
        default="failed",
        show_default=True,
    )
    @click.option("--queue", type=params.QUEUE_NAME, default=None, help="Only jobs of this queue.")
    @click.option("--job", type=params.JOB_NAME, default=None, help="Only jobs of this job name.")
    @click.option(
        "--batch",
        type=params.BATCH_ID,
        default=None,
        help="Only jobs of this batch (its id).",
    )
    @click.option("--limit", type=params.Count(1, browse.MAX_PAGE), default=50, show_default=True)
    @click.option("--before", type=params.JOB_ID, default=None, help="Page: ids below this.")
    def jobs_command(
        state: str,
        queue: str | None,
        job: str | None,
        batch: int | None,
        limit: int,
        before: int | None,
    ) -> None:
        """List jobs in one state, newest first, a page at a time."""
        chosen = browse.State(state)
        with db.read(engine()) as connection:
            page = browse.list_jobs(
                connection, chosen, queue=queue, job=job, batch=batch, before=before, limit=limit
            )
            elsewhere = elsewhere_hint(
                connection, chosen, first_page=before is None, queue=queue, job=job, batch=batch
            )
        click.echo(render_jobs(page, chosen, utcnow(), elsewhere))
        if len(page) == limit:
            again = command_line(
                state=state, queue=queue, job=job, batch=batch, limit=limit, before=page[-1].id
            )
            click.echo(f"\nMore: {again}")

    @group.command("job")
    @click.argument("reference", type=params.JOB_REFERENCE)
    def job_command(reference: int | str) -> None:
        """Show one job whole: REFERENCE is its provider_job_id or its job_id."""
        with db.read(engine()) as connection:
            detail = browse.find_job(connection, reference)
        if detail is None:
            raise click.ClickException(f"No job {reference}.")
        click.echo(render_job(detail, utcnow()))

    @group.command("retry")
    @click.argument("references", nargs=-1, type=params.JOB_REFERENCE)
    @click.option("--all", "all_", is_flag=True, help="Every failed job the filters match.")
    @_filter_options
    @click.option("--yes", is_flag=True, help=YES_HELP)
    def retry_command(
        references: tuple[int | str, ...], all_: bool, yes: bool, **options: t.Any
    ) -> None:
        """Retry failed jobs: the ones named (provider_job_id or job_id), or --all, or those
        of --batch (a batch that had finished opens again)."""
        queue_engine = engine()
        if all_ or options.get("batch") is not None:
            filters = _filters(options, references)
            _confirm(yes, "Retry", _count(queue_engine, actions.Waiting.FAILED, filters))
            done = actions.retry_all(queue_engine, filters)
        else:
            ids = _ids(queue_engine, references, options)
            _confirm(yes, "Retry", len(ids))
            done = actions.retry(queue_engine, ids)
        click.echo(f"Retried {_jobs(done)}.{_none_left(done, references, 'failed')}")

    @group.command("discard")
    @click.argument("references", nargs=-1, type=params.JOB_REFERENCE)
    @click.option("--all", "all_", is_flag=True, help="Every job in --state the filters match.")
    @click.option(
        "--state",
        type=click.Choice([state.value for state in actions.Waiting]),
        default=None,
        help="With --all: the state to discard from (failed by default; with --batch,"
        " scheduled, blocked and ready: every job still pending).",
    )
    @_filter_options
    @click.option("--yes", is_flag=True, help=YES_HELP)
    def discard_command(
        references: tuple[int | str, ...],
        all_: bool,
        state: str | None,
        yes: bool,
        **options: t.Any,
    ) -> None:
        """Discard jobs with their executions and calls: the ones named (failed, scheduled,
        ready or blocked; never running), or --all in --state, or the pending ones of
        --batch."""
        queue_engine = engine()
        if state is None and options.get("batch") is not None:
            filters = _filters(options, references)
            pending = sum(_count(queue_engine, each, filters) for each in actions.PENDING)
            _confirm(yes, "Discard", pending, "pending")
            done = actions.discard_pending(queue_engine, filters)
        elif all_ or options.get("batch") is not None:
            filters = _filters(options, references)
            chosen = actions.Waiting(state or "failed")
            _confirm(yes, "Discard", _count(queue_engine, chosen, filters), chosen.value)
            done = actions.discard_all(queue_engine, chosen, filters)
        else:
            ids = _ids(queue_engine, references, options)
            _confirm(yes, "Discard", len(ids))
            done = actions.discard(queue_engine, ids)
        waiting = "failed, scheduled, ready or blocked"
        click.echo(f"Discarded {_jobs(done)}.{_none_left(done, references, waiting)}")

    @group.command("run-now")
    @click.argument("references", nargs=-1, required=True, type=params.JOB_REFERENCE)
    def run_now_command(references: tuple[int | str, ...]) -> None:
        """Make scheduled jobs (rate-limited ones waiting included) due now."""
        queue_engine = engine()
        done = actions.run_now(queue_engine, actions.resolve(queue_engine, references))
        click.echo(f"Made {_jobs(done)} due now.{_none_left(done, references, 'scheduled')}")


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
    return f"{_jobs(count)} {one if count == 1 else many}: {command}"


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


def render_job(detail: browse.JobDetail, now: dt.datetime) -> str:
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


def render_steps(detail: browse.JobDetail) -> list[str]:
    """Each step the job reached, with its state (done, or in progress at its cursor)."""
    if detail.steps is None:
        return []
    states = detail.steps.states
    if detail.summary.state.value != "finished":
        states = [*states, ("later steps", "not reached yet")]
    width = max(len(name) for name, _state in states)
    return ["", "Steps:", *[f"  {name.ljust(width)}  {state}" for name, state in states]]


def render_attempts(detail: browse.JobDetail, now: dt.datetime) -> list[str]:
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


def _filters(options: dict[str, t.Any], references: tuple[int | str, ...]) -> actions.Filters:
    if references:
        raise click.UsageError("Name the jobs or pass --all, not both.")
    return actions.Filters(
        queue=options.get("queue"),
        job=options.get("job"),
        error_class=options.get("error_class"),
        failed_before=_utc(options.get("failed_before")),
        failed_after=_utc(options.get("failed_after")),
        batch=options.get("batch"),
    )


def _count(engine: sa.Engine, state: actions.Waiting, filters: actions.Filters) -> int:
    try:
        return actions.count(engine, state, filters)
    except ValueError as error:
        raise click.UsageError(str(error)) from error


def _utc(moment: dt.datetime | None) -> dt.datetime | None:
    """A time typed at the prompt, read as UTC (as every time the queue stores is)."""
    return moment.replace(tzinfo=dt.timezone.utc) if moment and moment.tzinfo is None else moment


def _ids(
    engine: sa.Engine, references: tuple[int | str, ...], options: dict[str, t.Any]
) -> list[int]:
    if not references:
        raise click.UsageError("Name the jobs (provider_job_id or job_id), or pass --all.")
    if any(value is not None for value in options.values()):
        raise click.UsageError("The filters go with --all; named jobs are acted on as named.")
    return actions.resolve(engine, references)


def _confirm(yes: bool, verb: str, count: int, state: str = "") -> None:
    """Ask before acting on ``count`` jobs, unless ``--yes``. With nothing to read on stdin
    (no terminal, and nothing piped), a usage error naming ``--yes`` rather than a bare
    "Aborted!"."""
    if yes or count == 0:
        return
    what = f"{count} {state} job{'s' if count != 1 else ''}".replace("  ", " ")
    try:
        agreed = click.confirm(f"{verb} {what}?")
    except click.Abort:  # end of input (or Ctrl-C): click tells neither apart
        if sys.stdin.isatty():
            raise
        raise click.UsageError(
            f"{verb} {what} asks for a yes, and stdin had no answer (it isn't a terminal):"
            f" pass --yes to {verb.lower()} them without asking. Nothing was changed."
        ) from None
    if not agreed:
        raise click.Abort()


def _jobs(count: int) -> str:
    return f"{count} job{'s' if count != 1 else ''}"


def _none_left(done: int, references: tuple[int | str, ...], wanted: str) -> str:
    """Why nothing was done, when jobs were named."""
    if done or not references:
        return ""
    return f" None of the named jobs is {wanted} now."


def command_line(command: str = "jobs", **options: t.Any) -> str:
    """The ``flask solidq`` command line that runs ``command`` with ``options`` (those not
    None): what a full page prints to show the next one."""
    parts = [f"flask solidq {command}"]
    for name, value in options.items():
        if value is not None:
            parts.append(f"--{name} {shlex.quote(str(value))}")
    return " ".join(parts)

"""``flask solidq jobs``, ``job``, ``retry``, ``discard`` and ``run-now``: reading jobs and
acting on them from a terminal, over :mod:`flask_solidq.reads.browse` and
:mod:`flask_solidq.operations.actions` (the same operations the Python API and the dashboard
use), printed by :mod:`.job_rendering`. :func:`register` adds them to the ``flask solidq``
group."""

from __future__ import annotations

import datetime as dt
import sys
import typing as t

import click
import sqlalchemy as sa

from flask_solidq.cli import params
from flask_solidq.cli.job_rendering import command_line
from flask_solidq.cli.job_rendering import count_jobs
from flask_solidq.cli.job_rendering import elsewhere_hint
from flask_solidq.cli.job_rendering import render_job
from flask_solidq.cli.job_rendering import render_jobs
from flask_solidq.operations import actions
from flask_solidq.reads import browse
from flask_solidq.reads import job_detail
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from typing_extensions import Unpack

EngineFactory = t.Callable[[], sa.Engine]
CommandT = t.TypeVar("CommandT", bound=t.Callable[..., object])


class FilterOptions(t.TypedDict):
    """The filter options of ``retry`` and ``discard``, as click passes them."""

    queue: str | None
    job: str | None
    error_class: str | None
    failed_before: dt.datetime | None
    failed_after: dt.datetime | None
    batch: int | None


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


def _filter_options(command: CommandT) -> CommandT:
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
            detail = job_detail.find_job(connection, reference)
        if detail is None:
            raise click.ClickException(f"No job {reference}.")
        click.echo(render_job(detail, utcnow()))

    @group.command("retry")
    @click.argument("references", nargs=-1, type=params.JOB_REFERENCE)
    @click.option("--all", "all_", is_flag=True, help="Every failed job the filters match.")
    @_filter_options
    @click.option("--yes", is_flag=True, help=YES_HELP)
    def retry_command(
        references: tuple[int | str, ...], all_: bool, yes: bool, **options: Unpack[FilterOptions]
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
        click.echo(f"Retried {count_jobs(done)}.{_none_left(done, references, 'failed')}")

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
        **options: Unpack[FilterOptions],
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
        click.echo(f"Discarded {count_jobs(done)}.{_none_left(done, references, waiting)}")

    @group.command("run-now")
    @click.argument("references", nargs=-1, required=True, type=params.JOB_REFERENCE)
    def run_now_command(references: tuple[int | str, ...]) -> None:
        """Make scheduled jobs (rate-limited ones waiting included) due now."""
        queue_engine = engine()
        done = actions.run_now(queue_engine, actions.resolve(queue_engine, references))
        click.echo(f"Made {count_jobs(done)} due now.{_none_left(done, references, 'scheduled')}")


def _filters(options: FilterOptions, references: tuple[int | str, ...]) -> actions.Filters:
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


def _ids(engine: sa.Engine, references: tuple[int | str, ...], options: FilterOptions) -> list[int]:
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


def _none_left(done: int, references: tuple[int | str, ...], wanted: str) -> str:
    """Why nothing was done, when jobs were named."""
    if done or not references:
        return ""
    return f" None of the named jobs is {wanted} now."

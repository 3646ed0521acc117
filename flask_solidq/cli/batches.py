"""``flask solidq batches`` and ``batch``: reading batches from a terminal, over
:mod:`flask_solidq.reads.batches` (the reads the dashboard's batch pages use). A batch's jobs
print as ``flask solidq jobs`` prints them, a page per state; a full page names the
``flask solidq jobs --batch`` command line that shows the next. :func:`register` adds them to
the ``flask solidq`` group."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import click

from flask_solidq import formatting
from flask_solidq.cli import job_rendering
from flask_solidq.cli import jobs as cli_jobs
from flask_solidq.cli import params
from flask_solidq.reads import batches
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask_solidq.definitions.batches import Batch


def register(group: click.Group, engine: cli_jobs.EngineFactory) -> None:
    """Add the batch commands to ``group``; ``engine`` gives the queue's engine (or raises a
    one-line click error)."""

    @group.command("batches")
    @click.option(
        "--status",
        type=click.Choice([status.value for status in batches.BatchFilter]),
        default=None,
        help="Only open batches (jobs pending), finished ones, or finished with failures.",
    )
    @click.option("--limit", type=params.Count(1, batches.MAX_PAGE), default=50, show_default=True)
    @click.option("--before", type=params.BATCH_ID, default=None, help="Page: ids below this.")
    def batches_command(status: str | None, limit: int, before: int | None) -> None:
        """List batches, newest first, a page at a time."""
        chosen = batches.BatchFilter(status) if status else None
        with db.read(engine()) as connection:
            page = batches.list_batches(connection, status=chosen, before=before, limit=limit)
        click.echo(render_batches(page, utcnow()))
        if len(page) == limit:
            again = job_rendering.command_line(
                "batches", status=status, limit=limit, before=page[-1].id
            )
            click.echo(f"\nMore: {again}")

    @group.command("batch")
    @click.argument("batch_id", type=params.BATCH_ID, metavar="ID")
    @click.option(
        "--limit",
        type=params.Count(1, batches.MAX_PAGE),
        default=10,
        show_default=True,
        help="Jobs listed per state.",
    )
    def batch_command(batch_id: int, limit: int) -> None:
        """Show batch ID (counters, times, metadata, callbacks) and its jobs by state."""
        with db.read(engine()) as connection:
            batch = batches.find_batch(connection, batch_id)
            if batch is None:
                raise click.ClickException(
                    f"No batch {batch_id} (none has that id, or its block hasn't committed)."
                    " `flask solidq batches` lists them."
                )
            groups = batches.job_groups(connection, batch_id, limit=limit)
        now = utcnow()
        click.echo(render_batch(batch, now))
        click.echo(render_groups(batch_id, groups, limit, now))


def render_batches(page: t.Sequence[Batch], now: dt.datetime) -> str:
    """A page of batches as a table."""
    if not page:
        return "No batches."
    rows = [
        [
            str(batch.id),
            batch.status.value,
            progress(batch),
            formatting.describe_metadata(batch.metadata) or "-",
            ", ".join(f"{kind}: {name}" for kind, name in batch.callbacks.items()) or "-",
            _age(batch.enqueued_at, now),
            _age(batch.finished_at, now),
        ]
        for batch in page
    ]
    headers = ["ID", "STATUS", "COMPLETED/FAILED/PENDING OF TOTAL", "METADATA", "CALLBACKS"]
    return formatting.format_table([*headers, "ENQUEUED", "FINISHED"], rows, right={0})


def progress(batch: Batch) -> str:
    """``completed/failed/pending of total``."""
    counters = f"{batch.completed_jobs}/{batch.failed_jobs}/{batch.pending_jobs}"
    return f"{counters} of {batch.total_jobs}"


def render_batch(batch: Batch, now: dt.datetime) -> str:
    """One batch: its counters, times, callbacks and metadata."""
    fields = [
        ("status", batch.status.value),
        ("jobs", str(batch.total_jobs)),
        ("completed", str(batch.completed_jobs)),
        ("failed", str(batch.failed_jobs)),
        ("pending", str(batch.pending_jobs)),
        ("created", job_rendering.describe_moment(batch.created_at, now)),
        ("enqueued", _moment(batch.enqueued_at, now)),
        ("finished", _moment(batch.finished_at, now)),
        ("failed at", _moment(batch.failed_at, now)),
    ]
    fields += [(f"callback {kind}", name) for kind, name in batch.callbacks.items()]
    fields += [] if batch.callbacks else [("callbacks", "-")]
    width = max(len(name) for name, _ in fields)
    lines = [f"Batch {batch.id}"]
    lines += [f"  {name.ljust(width)}  {value}" for name, value in fields]
    metadata = json.dumps(batch.metadata, indent=2, ensure_ascii=False, default=str)
    lines += ["", "Metadata:", *[f"  {line}" for line in metadata.splitlines()]]
    return "\n".join(lines)


def render_groups(
    batch_id: int, groups: t.Sequence[batches.JobGroup], limit: int, now: dt.datetime
) -> str:
    """The batch's jobs, a table per state that has any; a full one names the command line
    of its next page."""
    lines = []
    for group in groups:
        if not group.jobs:
            continue
        lines += ["", f"{group.state.value.capitalize()} jobs:"]
        lines.append(job_rendering.render_jobs(group.jobs, group.state, now))
        if group.next_before is not None:
            again = job_rendering.command_line(
                state=group.state.value, batch=batch_id, limit=limit, before=group.next_before
            )
            lines.append(f"  More: {again}")
    if not lines:
        lines = ["", "No jobs listed: finished jobs are kept only while"]
        lines[-1] += " SOLIDQ_PRESERVE_FINISHED_JOBS is on."
    return "\n".join(lines)


def _moment(moment: dt.datetime | None, now: dt.datetime) -> str:
    return job_rendering.describe_moment(moment, now) if moment else "-"


def _age(moment: dt.datetime | None, now: dt.datetime) -> str:
    return formatting.format_age(moment, now) if moment else "-"

"""``flask solidq stats``: runs, failures, duration and queue latency per job class and per
queue over the last hour, day or week, from :mod:`flask_solidq.reads.job_stats`.
:func:`register` adds it to the ``flask solidq`` group."""

from __future__ import annotations

import typing as t

import click
import sqlalchemy as sa

from flask_solidq.cli import params
from flask_solidq.formatting import format_short_duration
from flask_solidq.formatting import format_table
from flask_solidq.reads import job_stats
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

HEADERS = ("Runs", "Failures", "Failed %", "p50", "p95", "Max", "Latency p50", "p95", "Max")


def register(group: click.Group, engine: t.Callable[[], sa.Engine]) -> None:
    """Add ``stats`` to ``group``; ``engine`` gives the queue's engine (or raises a one-line
    click error)."""

    @group.command("stats")
    @click.option("--job", type=params.JOB_NAME, default=None, help="Only runs of this job.")
    @click.option("--queue", type=params.QUEUE_NAME, default=None, help="Only runs of this queue.")
    @click.option(
        "--since",
        "window",
        type=click.Choice([window.value for window in job_stats.Window]),
        default=job_stats.Window.DAY.value,
        show_default=True,
        help="The window: the last hour, day or week.",
    )
    def stats_command(job: str | None, queue: str | None, window: str) -> None:
        """Runs, failures, duration p50/p95/max and queue latency (from when a job was due
        to its start) per job class and per queue."""
        chosen = job_stats.Window(window)
        where = job_stats.Filter(job=job, queue=queue)
        since = chosen.since(utcnow())
        with db.read(engine()) as connection:
            table = job_stats.figures(connection, since, where)
        click.echo(render(chosen, table.jobs, table.queues))


def render(
    window: job_stats.Window, jobs: list[job_stats.Figures], queues: list[job_stats.Figures]
) -> str:
    """The two tables, or a line saying no run was counted."""
    if not jobs:
        return f"No runs counted in the last {window.value}."
    return "\n\n".join(
        [
            f"By job class, last {window.value}:",
            _table("Job", jobs),
            f"By queue, last {window.value}:",
            _table("Queue", queues),
        ]
    )


def _table(first: str, figures: list[job_stats.Figures]) -> str:
    rows = [_cells(each) for each in figures]
    return format_table((first, *HEADERS), rows, right=range(1, len(HEADERS) + 1))


def _cells(figures: job_stats.Figures) -> list[str]:
    times = (
        figures.duration_p50,
        figures.duration_p95,
        figures.duration_max,
        figures.latency_p50,
        figures.latency_p95,
        figures.latency_max,
    )
    return [
        figures.name,
        str(figures.runs),
        str(figures.failures),
        f"{figures.failure_rate * 100:.1f}",
        *(format_short_duration(seconds) for seconds in times),
    ]

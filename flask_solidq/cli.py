"""``flask solidq ...``: thin click commands over the Python API."""

from __future__ import annotations

import datetime as dt
import logging

import click
import sqlalchemy as sa
from flask import current_app
from flask.cli import AppGroup

from flask_solidq import db
from flask_solidq import install as install_module
from flask_solidq import status as status_module
from flask_solidq.config import parse_queues
from flask_solidq.errors import SolidQError
from flask_solidq.operations import maintenance
from flask_solidq.operations import queues
from flask_solidq.processes import launcher
from flask_solidq.rate_limiter import RateLimiter
from flask_solidq.state import get_state
from flask_solidq.timing import utcnow

solidq_group = AppGroup("solidq", help="Run and manage the flask-solidq job queue.")


@solidq_group.command("install")
@click.option("--bind", default=None, help="The SQLALCHEMY_BINDS name the queue lives in.")
@click.option("--directory", default=None, help="The Flask-Migrate directory (default: the app's).")
def install_command(bind: str | None, directory: str | None) -> None:
    """Write the Alembic revision that creates the flask-solidq tables; then run
    `flask db upgrade`."""
    try:
        written = install_module.write_revisions(bind=bind, directory=directory)
    except SolidQError as error:
        raise click.ClickException(str(error)) from error
    if not written:
        click.echo("The flask-solidq tables are already in the migration history.")
        return
    for path in written:
        click.echo(f"Wrote {path}")
    click.echo("Now run `flask db upgrade` to create the tables.")


def _queue_engine() -> sa.Engine:
    """The queue's engine, once its tables are known to exist; a missing table becomes a
    message naming the commands that fix it instead of a traceback."""
    state = get_state()
    try:
        state.check_tables()
    except SolidQError as error:
        raise click.ClickException(str(error)) from error
    return state.engine


@solidq_group.command("status")
@click.option("--failed", "failed_limit", default=20, show_default=True, help="Failed jobs shown.")
def status_command(failed_limit: int) -> None:
    """Show queues (jobs per state, latency, pauses), processes, the latest failed jobs,
    and blocked jobs and semaphores."""
    with db.read(_queue_engine()) as connection:
        click.echo(status_module.render_status(connection, failed_limit=failed_limit))


@solidq_group.command("clear-finished")
@click.option(
    "--older-than",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds since a job finished (default: SOLIDQ_CLEAR_FINISHED_JOBS_AFTER).",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=500, show_default=True)
def clear_finished_command(older_than: float | None, batch_size: int) -> None:
    """Delete finished jobs older than a threshold, in batches."""
    engine = _queue_engine()
    if older_than is None:
        older_than = get_state().settings.clear_finished_jobs_after
    cleared = maintenance.clear_finished_in_batches(
        engine, finished_before=utcnow() - dt.timedelta(seconds=older_than), batch_size=batch_size
    )
    click.echo(f"Deleted {cleared} finished job{'' if cleared == 1 else 's'}.")


@solidq_group.command("clear-idle-budgets")
@click.option("--batch-size", type=click.IntRange(min=1), default=500, show_default=True)
@click.option(
    "--sleep-between-batches", type=click.FloatRange(min=0), default=0.0, show_default=True
)
def clear_idle_budgets_command(batch_size: int, sleep_between_batches: float) -> None:
    """Delete rate-limit budgets that are full and hold no waiting job's slot, in batches.
    Clearing never changes what is admitted."""
    _queue_engine()
    cleared = RateLimiter().clear_idle_in_batches(
        batch_size=batch_size, sleep_between_batches=sleep_between_batches
    )
    click.echo(f"Deleted {cleared} idle budget{'' if cleared == 1 else 's'}.")


@solidq_group.command("pause")
@click.argument("queue")
def pause_command(queue: str) -> None:
    """Pause QUEUE: workers claim nothing from it until it is resumed."""
    try:
        paused = queues.pause(_queue_engine(), queue)
    except (TypeError, ValueError) as error:
        raise click.BadParameter(str(error), param_hint="QUEUE") from error
    if paused:
        click.echo(f"Paused queue {queue!r}.")
    else:
        click.echo(f"Queue {queue!r} was already paused.")


@solidq_group.command("resume")
@click.argument("queue")
def resume_command(queue: str) -> None:
    """Resume QUEUE: workers claim from it again."""
    if queues.resume(_queue_engine(), queue):
        click.echo(f"Resumed queue {queue!r}.")
    else:
        click.echo(f"Queue {queue!r} wasn't paused.")


@solidq_group.command("work")
@click.option(
    "--queues", "queue_list", default=None, help='Queues to work, in order: "a,b", "*", "prefix*".'
)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Threads per worker.")
@click.option("--processes", type=click.IntRange(min=1), default=None, help="Worker processes.")
@click.option("--polling-interval", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--mode", type=click.Choice(launcher.MODES), default="fork", show_default=True)
@click.option("--only", type=click.Choice(launcher.KINDS), default=None, help="Run only these.")
def work_command(
    queue_list: str | None,
    threads: int | None,
    processes: int | None,
    polling_interval: float | None,
    mode: str,
    only: str | None,
) -> None:
    """Run the workers, dispatchers and scheduler until TERM or INT (graceful) or QUIT.

    With --queues, --threads, --processes or --polling-interval, one worker runs with those
    options instead of SOLIDQ_WORKERS.
    """
    _queue_engine()
    overrides = launcher.WorkerOverrides(
        queues=None if queue_list is None else parse_queues(queue_list, name="--queues"),
        threads=threads,
        processes=processes,
        polling_interval=polling_interval,
    )
    _log_to_stderr()
    try:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        supervisor = launcher.supervisor(app, mode=mode, only=only, overrides=overrides)
    except (ValueError, TypeError) as error:
        raise click.ClickException(str(error)) from error
    supervisor.run()


def _log_to_stderr() -> None:
    """Show flask-solidq's INFO lines (processes starting and stopping) unless the app set
    up logging for them itself."""
    logger = logging.getLogger("flask_solidq")
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)

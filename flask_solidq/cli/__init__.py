"""``flask solidq ...``: thin click commands over the Python API."""

from __future__ import annotations

import datetime as dt
import logging
import typing as t

import click
import sqlalchemy as sa
from flask import current_app
from flask.cli import AppGroup

from flask_solidq.cli import batches as cli_batches
from flask_solidq.cli import jobs as cli_jobs
from flask_solidq.cli import monitoring as cli_monitoring
from flask_solidq.cli import params
from flask_solidq.cli import processes as cli_processes
from flask_solidq.cli import stats as cli_stats
from flask_solidq.cli import status as status_module
from flask_solidq.config import parse_queues
from flask_solidq.controls.rate_limit.limiter import RateLimiter
from flask_solidq.errors import SolidQError
from flask_solidq.logging import formats
from flask_solidq.operations import maintenance
from flask_solidq.operations import queues
from flask_solidq.processes import launcher
from flask_solidq.processes import once as once_module
from flask_solidq.processes.outage import describe
from flask_solidq.state import SolidQState
from flask_solidq.state import get_state
from flask_solidq.storage import db
from flask_solidq.storage import install as install_module
from flask_solidq.timing import utcnow
from flask_solidq.values import SupervisorMode

if t.TYPE_CHECKING:
    from flask import Flask


class SolidQGroup(AppGroup):
    """The ``flask solidq`` group: a database driver that isn't installed becomes one error
    line naming the URL (password hidden) and the ``pip install`` that fixes it, wherever it
    shows: building the queue's engine, or loading the app (Flask-SQLAlchemy builds the app's
    engines in ``init_app``; the group sees that only when it is registered as a
    ``flask.commands`` entry point, so the app loads inside its commands)."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (ImportError, sa.exc.NoSuchModuleError) as error:
            url = _url_of_engine_being_built(error)
            if url is None and not isinstance(error, sa.exc.NoSuchModuleError):
                raise  # not a driver: a job module or the app's own import
            raise click.ClickException(_missing_driver_message(error, url)) from error


solidq_group = SolidQGroup("solidq", help="Run and manage the flask-solidq job queue.")


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
    latest = install_module.schema_versions()[-1].number
    if not written:
        click.echo(
            f"The flask-solidq tables (schema version {latest}) are already in the migration"
            " history."
        )
        return
    for path in written:
        click.echo(f"Wrote {path}")
    click.echo(
        f"Now run `flask db upgrade`: it creates the flask-solidq tables, or brings the ones"
        f" you have to schema version {latest}."
    )


def _queue_engine() -> sa.Engine:
    """The queue's engine, once its tables are known to exist. A missing table, a driver that
    isn't installed or a database that can't be reached becomes one line naming the fix
    instead of a traceback."""
    state = get_state()
    try:
        engine = state.engine
    except (ImportError, sa.exc.NoSuchModuleError) as error:
        url = _url_of_engine_being_built(error) or _bind_url(state)
        raise click.ClickException(_missing_driver_message(error, url)) from error
    try:
        state.check_tables()
    except SolidQError as error:
        raise click.ClickException(str(error)) from error
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as error:
        raise click.ClickException(_unreachable_message(error, engine.url)) from error
    return engine


#: What installs each backend's driver, and the URL scheme that uses it.
DRIVER_FIXES = {
    "postgresql": ('pip install "flask-solidq[postgres]"', "postgresql+psycopg://"),
    "mysql": ('pip install "flask-solidq[mysql]"', "mysql+pymysql://"),
    "mariadb": ('pip install "flask-solidq[mysql]"', "mariadb+pymysql://"),
}


def _missing_driver_message(error: BaseException, url: sa.URL | None) -> str:
    where = f" for {_safe_url(url)}" if url is not None else ""
    message = f"The database driver{where} isn't installed ({describe(error)})."
    fix = DRIVER_FIXES.get(url.get_backend_name()) if url is not None else None
    if fix is not None:
        return f"{message} Install one with {fix[0]} and use a {fix[1]} URL."
    return f"{message} Install the driver the URL names, or use a URL for one that is."


def _unreachable_message(error: BaseException, url: sa.URL) -> str:
    return (
        f"Can't connect to the database {_safe_url(url)}: {describe(error)}."
        " Check that the server is running and reachable from here, and the URL's host, port,"
        " database name and credentials (SQLALCHEMY_DATABASE_URI, or the bind SOLIDQ_BIND"
        " names)."
    )


def _safe_url(url: sa.URL) -> str:
    return url.render_as_string(hide_password=True)


def _bind_url(state: SolidQState) -> sa.URL | None:
    """The URL of the queue's bind, from the app's config (its engine may not exist)."""
    bind = state.settings.bind
    if bind is None:
        value = current_app.config.get("SQLALCHEMY_DATABASE_URI")
    else:
        value = (current_app.config.get("SQLALCHEMY_BINDS") or {}).get(bind)
        if isinstance(value, dict):
            value = value.get("url")
    try:
        return sa.make_url(value) if value else None
    except sa.exc.ArgumentError:
        return None


def _url_of_engine_being_built(error: BaseException) -> sa.URL | None:
    """The URL SQLAlchemy was building an engine for when ``error`` was raised, found in its
    traceback's frames (``create_engine`` holds it); None when no engine was being built."""
    traceback = error.__traceback__
    while traceback is not None:
        frame = traceback.tb_frame
        if frame.f_code.co_name == "create_engine":
            for value in frame.f_locals.values():
                if isinstance(value, sa.URL):
                    return value
        traceback = traceback.tb_next
    return None


@solidq_group.command("status")
@click.option(
    "--failed",
    "failed_limit",
    type=params.Count(0),
    default=20,
    show_default=True,
    help="Failed jobs shown.",
)
def status_command(failed_limit: int) -> None:
    """Show queues (jobs per state, latency, pauses), processes, the latest failed jobs,
    blocked jobs and semaphores, rate-limit budgets with waiting jobs (limit, available
    claims or units, next admission; stacked budgets indented under their main one), and
    coalescing."""
    with db.read(_queue_engine()) as connection:
        click.echo(status_module.render_status(connection, failed_limit=failed_limit))


@solidq_group.command("clear-finished")
@click.option(
    "--older-than",
    type=params.Seconds(),
    default=None,
    help="Seconds since a job finished (default: SOLIDQ_CLEAR_FINISHED_JOBS_AFTER).",
)
@click.option("--batch-size", type=params.Count(1), default=500, show_default=True)
def clear_finished_command(older_than: float | None, batch_size: int) -> None:
    """Delete finished jobs older than a threshold, in batches; then the finished batches as
    old that have no job left."""
    engine = _queue_engine()
    if older_than is None:
        older_than = get_state().settings.clear_finished_jobs_after
    finished_before = utcnow() - dt.timedelta(seconds=older_than)
    cleared = maintenance.clear_finished_in_batches(
        engine, finished_before=finished_before, batch_size=batch_size
    )
    batches = maintenance.clear_finished_batches(
        engine, finished_before=finished_before, batch_size=batch_size
    )
    message = f"Deleted {cleared} finished job{'' if cleared == 1 else 's'}"
    if batches:
        message += f" and {batches} finished batch{'' if batches == 1 else 'es'}"
    click.echo(f"{message}.")


@solidq_group.command("clear-idle-budgets")
@click.option("--batch-size", type=params.Count(1), default=500, show_default=True)
@click.option("--sleep-between-batches", type=params.Seconds(), default=0.0, show_default=True)
def clear_idle_budgets_command(batch_size: int, sleep_between_batches: float) -> None:
    """Delete rate-limit budgets that are full and hold no waiting job's slot, in batches.
    Clearing never changes what is admitted."""
    _queue_engine()
    cleared = RateLimiter().clear_idle_in_batches(
        batch_size=batch_size, sleep_between_batches=sleep_between_batches
    )
    click.echo(f"Deleted {cleared} idle budget{'' if cleared == 1 else 's'}.")


cli_jobs.register(solidq_group, lambda: _queue_engine())  # jobs, job, retry, discard, run-now
cli_batches.register(solidq_group, lambda: _queue_engine())  # batches, batch
cli_monitoring.register(solidq_group, lambda: _queue_engine())  # health, metrics
cli_stats.register(solidq_group, lambda: _queue_engine())  # stats
cli_processes.register(solidq_group, lambda: _queue_engine())  # quiet, stop


@solidq_group.command("pause")
@click.argument("queue", type=params.QUEUE_NAME)
def pause_command(queue: str) -> None:
    """Pause QUEUE: workers claim nothing from it until it is resumed. A queue with no jobs
    yet can be paused before its first one (a warning says so, in case the name is
    misspelled)."""
    engine = _queue_engine()
    try:
        empty = not queues.has_jobs(engine, queue)
        paused = queues.pause(engine, queue)
    except (TypeError, ValueError) as error:
        raise click.BadParameter(str(error), param_hint="QUEUE") from error
    if paused:
        click.echo(f"Paused queue {queue!r}.")
    else:
        click.echo(f"Queue {queue!r} was already paused.")
    if paused and empty:
        click.echo(
            f"Warning: queue {queue!r} has no jobs yet; paused anyway (workers will claim none"
            " of its jobs until it is resumed). Check the name if you meant a queue in use:"
            " `flask solidq status` lists them.",
            err=True,
        )


@solidq_group.command("resume")
@click.argument("queue", type=params.QUEUE_NAME)
def resume_command(queue: str) -> None:
    """Resume QUEUE: workers claim from it again."""
    if queues.resume(_queue_engine(), queue):
        click.echo(f"Resumed queue {queue!r}.")
    else:
        click.echo(f"Queue {queue!r} wasn't paused.")


@solidq_group.command("work")
@click.option(
    "--queues",
    "queue_list",
    default=None,
    callback=lambda _ctx, _param, value: _queues_option(value),
    help='Queues to work, in order: "a,b", "*", "prefix*".',
)
@click.option("--threads", type=params.Count(1), default=None, help="Threads per worker.")
@click.option("--processes", type=params.Count(1), default=None, help="Worker processes.")
@click.option(
    "--prefetch",
    type=params.Count(0),
    default=None,
    help="At most this many jobs each worker claims ahead of its idle threads while a backlog"
    " lasts, fewer for longer jobs (0: only for idle threads).",
)
@click.option(
    "--polling-interval",
    type=params.Seconds(positive=True),
    default=None,
    help="Seconds between polls of an idle worker.",
)
@click.option(
    "--mode", type=click.Choice(launcher.MODES), default=SupervisorMode.FORK, show_default=True
)
@click.option("--only", type=click.Choice(launcher.KINDS), default=None, help="Run only these.")
@click.option(
    "--once",
    is_flag=True,
    help="Work off every job that is ready or due, then exit: the workers dispatch due"
    " scheduled jobs themselves; no dispatcher or scheduler runs. Exit status 0 (failed jobs"
    " included), 128+N when stopped by signal N, 1 when a worker died.",
)
@click.option(
    "--log-level",
    type=click.Choice(formats.LogLevel, case_sensitive=False),
    default=None,
    help="The flask_solidq logger's level (default: INFO, unless the app set one).",
)
@click.option(
    "--log-format",
    "format_name",
    type=click.Choice(formats.LogFormat, case_sensitive=False),
    default=None,
    help="text, or json: one JSON object per line (default: text, unless the app set up"
    " handlers for the flask_solidq logger).",
)
def work_command(
    queue_list: tuple[str, ...] | None,
    threads: int | None,
    processes: int | None,
    prefetch: int | None,
    polling_interval: float | None,
    mode: str,
    only: str | None,
    once: bool,
    log_level: formats.LogLevel | None,
    format_name: formats.LogFormat | None,
) -> None:
    """Run the workers, dispatchers and scheduler until TERM or INT (graceful; a second one
    stops at once) or QUIT (at once).

    With --queues, --threads, --processes, --prefetch or --polling-interval, one worker runs
    with those options instead of SOLIDQ_WORKERS.

    With --once, the workers alone run until nothing they could run is ready or due, then
    say what they worked off and what is left waiting, and why.
    """
    _queue_engine()
    overrides = launcher.WorkerOverrides(
        queues=queue_list,
        threads=threads,
        processes=processes,
        polling_interval=polling_interval,
        prefetch=prefetch,
    )
    _log_to_stderr(log_level, format_name)
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    if once:
        _work_once(app, mode, only, overrides)
    try:
        supervisor = launcher.supervisor(app, mode=mode, only=only, overrides=overrides)
    except (ValueError, TypeError) as error:
        raise click.ClickException(str(error)) from error
    supervisor.run()


def _work_once(
    app: Flask, mode: str, only: str | None, overrides: launcher.WorkerOverrides
) -> t.NoReturn:
    """``work --once``: run, print the report, exit with its status."""
    try:
        run = once_module.OnceRun(app, mode=mode, only=only, overrides=overrides)
    except (ValueError, TypeError) as error:
        raise click.ClickException(str(error)) from error
    report = run.run()
    click.echo(report.render())
    click.get_current_context().exit(report.exit_code)


def _queues_option(value: str | None) -> tuple[str, ...] | None:
    """``--queues``, parsed; a list that names no queue is a usage error."""
    if value is None:
        return None
    try:
        return parse_queues(value, name=repr(value))
    except (TypeError, ValueError) as error:
        raise click.BadParameter(str(error)) from error


def _log_to_stderr(level: formats.LogLevel | None, format_name: formats.LogFormat | None) -> None:
    """Show flask-solidq's INFO lines (processes starting and stopping, each job performed)
    unless the app set up logging for them itself; ``--log-level`` and ``--log-format`` choose
    the level and format (see :func:`flask_solidq.logging.formats.configure`)."""
    formats.configure(logging.getLogger("flask_solidq"), level=level, log_format=format_name)

"""``flask solidq health`` and ``flask solidq metrics``: for the people who deploy the queue
(container and systemd probes, node_exporter's textfile collector), over
:mod:`flask_solidq.reads.health` and :mod:`flask_solidq.reads.metrics`. :func:`register` adds them
to the ``flask solidq`` group."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import tempfile
import typing as t

import click
import sqlalchemy as sa

from flask_solidq.cli import params
from flask_solidq.processes.outage import describe
from flask_solidq.reads import health
from flask_solidq.reads import metrics
from flask_solidq.state import get_state
from flask_solidq.storage import db

EngineFactory = t.Callable[[], sa.Engine]

#: What makes a check impossible rather than failed: the database can't be reached.
UNREACHABLE = (sa.exc.OperationalError, sa.exc.InterfaceError)


def register(group: click.Group, engine: EngineFactory) -> None:
    """Add the monitoring commands to ``group``; ``engine`` gives the queue's engine (or
    raises a one-line click error)."""

    @group.command("health")
    @click.option(
        "--hostname",
        type=params.Name("host name"),
        default=None,
        help="The host to check (default: this one's name).",
    )
    @click.option(
        "--supervisor-pid",
        type=params.Count(1),
        default=None,
        help="Check only the supervisor of this pid (1 in a container whose command it is).",
    )
    @click.option(
        "--threshold",
        type=params.Seconds(positive=True),
        default=None,
        help="Seconds of silence that make a process dead (default:"
        " SOLIDQ_PROCESS_ALIVE_THRESHOLD).",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout.")
    def health_command(
        hostname: str | None, supervisor_pid: int | None, threshold: float | None, as_json: bool
    ) -> None:
        """Exit 0 when a supervisor on this host and all its processes heartbeat within the
        alive threshold; 1 (with a line on stderr saying what is wrong) when not; 3 when the
        database can't be asked."""
        threshold = _threshold(threshold)
        try:
            with db.read(engine()) as connection:
                report = health.check_host(
                    connection,
                    hostname=hostname or socket.gethostname(),
                    threshold=threshold,
                    supervisor_pid=supervisor_pid,
                )
        except click.ClickException as error:
            _exit(health.Verdict.UNKNOWN, f"unknown: {error.format_message()}")
        except UNREACHABLE as error:
            _exit(health.Verdict.UNKNOWN, f"unknown: can't reach the database: {describe(error)}")
        if as_json:
            click.echo(json.dumps(report.as_dict(), indent=2))
        elif report.verdict is health.Verdict.HEALTHY:
            click.echo(report.message)
        if report.verdict is not health.Verdict.HEALTHY:
            _exit(report.verdict, report.message)

    @group.command("metrics")
    @click.option(
        "--output",
        type=click.Path(dir_okay=False, writable=True, path_type=pathlib.Path),
        default=None,
        help="Write to this file, replaced whole (for node_exporter's textfile collector),"
        " instead of stdout.",
    )
    def metrics_command(output: pathlib.Path | None) -> None:
        """Print the queue's figures in Prometheus's text format: jobs by queue and state,
        latency, jobs finished and failed in the last hour, rate-limited jobs waiting,
        coalesce keys open, processes alive."""
        try:
            text, _content_type = metrics.exposition(
                lambda: db.read(engine()),
                threshold=_threshold(None),
                max_queues=get_state().settings.metrics_max_queues,
            )
        except metrics.MetricsUnavailable as error:
            raise click.ClickException(str(error)) from error
        except UNREACHABLE as error:
            raise click.ClickException(f"Can't reach the database: {describe(error)}") from error
        if output is None:
            click.echo(text.decode(), nl=False)
        else:
            _replace(output, text)


def _threshold(given: float | None) -> float:
    return given if given is not None else get_state().settings.process_alive_threshold


def _exit(verdict: health.Verdict, message: str) -> t.NoReturn:
    click.echo(message, err=True)
    click.get_current_context().exit(int(verdict))


def _replace(path: pathlib.Path, content: bytes) -> None:
    """Write ``content`` to ``path`` through a temporary file renamed over it, so a reader
    (node_exporter) never sees half a file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        pathlib.Path(temporary).unlink(missing_ok=True)
        raise

"""``flask solidq quiet`` and ``stop``: the operator's commands to a running process, over
:mod:`flask_solidq.operations.process_commands` (the same operation the dashboard's buttons
use). :func:`register` adds them to the ``flask solidq`` group."""

from __future__ import annotations

import typing as t

import click
import sqlalchemy as sa

from flask_solidq.cli import params
from flask_solidq.errors import ProcessCommandRefused
from flask_solidq.operations import process_commands
from flask_solidq.operations.process_commands import ProcessCommand
from flask_solidq.values import ProcessKind

EngineFactory = t.Callable[[], sa.Engine]

#: What each command's reply says the process now does.
_DOES = {
    ProcessCommand.QUIET: "claims no more jobs and finishes the ones it runs",
    ProcessCommand.STOP: "stops gracefully and is not restarted",
}


def register(group: click.Group, engine: EngineFactory) -> None:
    """Add ``quiet`` and ``stop`` to ``group``; ``engine`` gives the queue's engine."""

    @group.command("quiet")
    @click.argument("process", type=params.PROCESS_REFERENCE)
    def quiet_command(process: int | str) -> None:
        """Quiet PROCESS (an id from `flask solidq status`, or its name): it claims no more
        jobs and finishes the ones it runs. A supervisor quiets all its workers."""
        _give(engine(), process, ProcessCommand.QUIET)

    @group.command("stop")
    @click.argument("process", type=params.PROCESS_REFERENCE)
    def stop_command(process: int | str) -> None:
        """Stop PROCESS (an id from `flask solidq status`, or its name) gracefully, as on
        SIGTERM; its supervisor does not restart it. A supervisor stops with all its
        processes."""
        _give(engine(), process, ProcessCommand.STOP)


def _give(engine: sa.Engine, process: int | str, command: ProcessCommand) -> None:
    try:
        target = process_commands.give(engine, process, command)
    except ProcessCommandRefused as error:
        raise click.ClickException(str(error)) from error
    where = f" on {target.hostname}" if target.hostname else ""
    tree = ""
    if ProcessKind.is_supervisor(target.kind) and target.processes > 1:
        tree = f" (with {target.processes - 1} of its processes)"
    click.echo(
        f"Told {target.kind} {target.name} (id {target.id}{where}) to {command.value}{tree}:"
        f" it {_DOES[command]} within a second or two."
    )

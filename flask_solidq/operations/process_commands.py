"""What an operator asks of a running process: quiet it (it stops claiming jobs and finishes
the ones it runs) or stop it (it shuts down gracefully, as on SIGTERM, and is not replaced).
The one implementation behind ``flask solidq quiet``/``stop`` and the dashboard's buttons.

A command travels through the database, so it reaches a process on any host: it is written
into ``solidq_processes.command`` of the process and, for a supervisor, of the processes it
runs (its workers for quiet, all of them for stop). Each supervisor reads the commands of its
own tree (:func:`pending`, one small indexed read about once a second) and carries them out
(:mod:`flask_solidq.processes.commands`). Stop outranks quiet; a command is never taken back:
a quiet worker stays quiet until it is stopped.
"""

from __future__ import annotations

import enum
import typing as t

import sqlalchemy as sa

from flask_solidq.errors import ProcessCommandRefused
from flask_solidq.models.tables import PROCESSES
from flask_solidq.storage import db
from flask_solidq.values import ProcessKind


class ProcessCommand(str, enum.Enum):
    """What ``solidq_processes.command`` holds: what the process was asked to do."""

    QUIET = "quiet"
    STOP = "stop"

    @property
    def state(self) -> str:
        """What a process given this command is doing, as the status and dashboard say it."""
        return "quieting" if self is ProcessCommand.QUIET else "stopping"


def state_of(command: str | None) -> str:
    """A process's state from its ``command`` column: running, quieting or stopping."""
    return "running" if command is None else ProcessCommand(command).state


def claims_jobs(kind: str) -> bool:
    """Whether a process of ``kind`` can be quieted: a worker, or a supervisor (its
    workers)."""
    return kind == ProcessKind.WORKER or ProcessKind.is_supervisor(kind)


class Target(t.NamedTuple):
    """A process a command was given to, and how many rows (its own and its tree's) took it."""

    id: int
    kind: str
    name: str
    hostname: str | None
    processes: int


class Order(t.NamedTuple):
    """A command a supervisor reads for itself or one of its processes."""

    process_id: int
    pid: int
    command: ProcessCommand


def give(engine: sa.Engine, reference: int | str, command: ProcessCommand) -> Target:
    """Write ``command`` for the process ``reference`` names (its id, or its name or a
    prefix of its name that only it has) and, for a supervisor, for its tree.

    :raises ProcessCommandRefused: no such process, an ambiguous name, a process already
        stopping (or already quiet, for quiet), or quiet given to a dispatcher or scheduler.
    """
    with db.write(engine) as connection:
        row = _find(connection, reference)
        _check(row, command)
        count = connection.execute(_update(row, command)).rowcount
    return Target(row.id, row.kind, row.name, row.hostname, count)


def pending(engine: sa.Engine, supervisor_id: int) -> list[Order]:
    """The commands written for a supervisor and the processes it runs."""
    in_tree = sa.or_(PROCESSES.c.id == supervisor_id, PROCESSES.c.supervisor_id == supervisor_id)
    query = sa.select(PROCESSES.c.id, PROCESSES.c.pid, PROCESSES.c.command).where(
        in_tree, PROCESSES.c.command.is_not(None)
    )
    with db.read(engine) as connection:
        return [
            Order(row.id, row.pid, ProcessCommand(row.command)) for row in connection.execute(query)
        ]


class _Process(t.NamedTuple):
    id: int
    kind: str
    name: str
    hostname: str | None
    pid: int
    command: str | None


_COLUMNS = (
    PROCESSES.c.id,
    PROCESSES.c.kind,
    PROCESSES.c.name,
    PROCESSES.c.hostname,
    PROCESSES.c.pid,
    PROCESSES.c.command,
)


def _find(connection: sa.Connection, reference: int | str) -> _Process:
    """The one process ``reference`` names: an id, or a name or the start of one."""
    if isinstance(reference, int):
        rows = _select(connection, PROCESSES.c.id == reference)
    else:
        rows = _by_name(connection, reference)
    if not rows:
        which = (
            f"has the id {reference}"
            if isinstance(reference, int)
            else f"is named {reference!r} or has a name starting so"
        )
        raise ProcessCommandRefused(
            f"No registered process {which}; `flask solidq status` lists the processes."
        )
    if len(rows) > 1:
        names = ", ".join(f"{row.name} (id {row.id}, {row.kind})" for row in rows)
        raise ProcessCommandRefused(
            f"{reference!r} names {len(rows)} processes: {names}. Give the process's id."
        )
    return rows[0]


def _by_name(connection: sa.Connection, reference: str) -> list[_Process]:
    """The processes named ``reference``, or else those whose name starts with it."""
    exact = _select(connection, PROCESSES.c.name == reference)
    if exact:
        return exact
    return _select(connection, PROCESSES.c.name.startswith(reference, autoescape=True))


def _select(connection: sa.Connection, where: sa.ColumnElement[bool]) -> list[_Process]:
    query = sa.select(*_COLUMNS).where(where).order_by(PROCESSES.c.id)
    return [_Process(*row) for row in connection.execute(query)]


def _check(row: _Process, command: ProcessCommand) -> None:
    """Refuse a command that can't apply to ``row``: a stopping process takes none, a quiet
    one no second quiet, and only workers (and supervisors, for their workers) can quiet."""
    who = f"{row.kind} {row.name} (id {row.id})"
    if row.command == ProcessCommand.STOP:
        raise ProcessCommandRefused(f"{who} is already stopping.")
    if command is ProcessCommand.STOP:
        return
    if row.command == ProcessCommand.QUIET:
        raise ProcessCommandRefused(f"{who} is already quiet; stop it to end it.")
    if not claims_jobs(row.kind):
        raise ProcessCommandRefused(
            f"{who} claims no jobs, so it can't be quieted: quiet applies to workers and"
            " supervisors (their workers). Stop it instead."
        )


def _update(row: _Process, command: ProcessCommand) -> sa.Update:
    """Write ``command`` on ``row`` and its tree: every process of a stopping supervisor,
    the workers of a quiet one; stop overrides quiet, quiet writes only where nothing is."""
    tree: sa.ColumnElement[bool] = PROCESSES.c.id == row.id
    if ProcessKind.is_supervisor(row.kind):
        children: sa.ColumnElement[bool] = PROCESSES.c.supervisor_id == row.id
        if command is ProcessCommand.QUIET:
            children = sa.and_(children, PROCESSES.c.kind == ProcessKind.WORKER)
        tree = sa.or_(tree, children)
    unless: sa.ColumnElement[bool] = PROCESSES.c.command.is_(None)
    if command is ProcessCommand.STOP:
        unless = sa.or_(unless, PROCESSES.c.command != ProcessCommand.STOP.value)
    return PROCESSES.update().where(tree, unless).values(command=command.value)

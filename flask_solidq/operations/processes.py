"""The process roll, ``solidq_processes``: a process registering, heartbeating and
deregistering, pruning silent processes, and removing the rows (and handling the claims) of
processes known to be gone. (Its importers call it ``process_roll``: the package's
"registry" is :mod:`flask_solidq.definitions.registry`, job name -> definition.)

Once a removal committed, claims put back to ready send ``signals.release`` (reason
``"process_gone"``), and a pruning that removed any process sends ``signals.prune``.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import socket
import typing as t

import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.config import OnWorkerDeath
from flask_solidq.models.tables import PROCESSES
from flask_solidq.operations import release
from flask_solidq.operations.outcomes import failure_json
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.values import JobRef

#: Silent processes pruned per transaction.
PRUNE_BATCH_SIZE = 50


def register(
    engine: sa.Engine,
    *,
    kind: str,
    name: str,
    pid: int,
    supervisor_id: int | None,
    metadata: t.Mapping[str, t.Any],
    command: str | None = None,
) -> int:
    """Insert a starting process's row (on this host, heartbeat now by the database's
    clock, with the operator's ``command`` it starts under, if any); return its id."""
    with db.write(engine) as connection:
        now = database_clock.now(connection)
        row = _row(kind, name, pid, supervisor_id, metadata, now)
        if command is not None:
            row["command"] = command
        return db.insert_returning_id(connection, PROCESSES.insert(), row)


def _row(
    kind: str,
    name: str,
    pid: int,
    supervisor_id: int | None,
    metadata: t.Mapping[str, t.Any],
    now: dt.datetime,
) -> dict[str, t.Any]:
    return {
        "kind": kind,
        "last_heartbeat_at": now,
        "supervisor_id": supervisor_id,
        "pid": pid,
        "hostname": socket.gethostname(),
        "metadata": json.dumps(metadata),
        "name": name,
        "created_at": now,
    }


def heartbeat(engine: sa.Engine, process_id: int) -> bool:
    """Touch the process's row (the database's clock: a pruning on another host compares it
    with that clock); False when it's gone (someone pruned it)."""
    with db.write(engine) as connection:
        result = connection.execute(
            PROCESSES.update()
            .where(PROCESSES.c.id == process_id)
            .values(last_heartbeat_at=database_clock.now(connection))
        )
    return bool(result.rowcount)


def deregister(engine: sa.Engine, process_id: int) -> None:
    """Delete the process's row, if it still exists."""
    with db.write(engine) as connection:
        connection.execute(PROCESSES.delete().where(PROCESSES.c.id == process_id))


class ProcessRow(t.NamedTuple):
    id: int
    kind: str
    name: str
    pid: int
    hostname: str | None
    last_heartbeat_at: dt.datetime


def prune_dead(
    engine: sa.Engine, *, threshold: float, exclude: int | None, policy: OnWorkerDeath
) -> list[ProcessRow]:
    """Remove the processes silent for more than ``threshold`` seconds (but ``exclude``), and
    release or fail (``policy``) the jobs they had claimed; return them.

    Every supervisor prunes; ``SKIP LOCKED`` keeps two from pruning the same process.
    Silence is measured by the database's clock, which the heartbeats are written with: a
    supervisor whose host clock runs ahead would otherwise prune live processes.
    """
    pruned: list[ProcessRow] = []
    while True:
        removals: list[Removal] = []
        with db.write(engine) as connection:
            cutoff = database_clock.now(connection) - dt.timedelta(seconds=threshold)
            query = sa.select(*_COLUMNS).where(PROCESSES.c.last_heartbeat_at <= cutoff)
            if exclude is not None:
                query = query.where(PROCESSES.c.id != exclude)
            rows = [
                ProcessRow(*row)
                for row in connection.execute(
                    db.for_update(
                        query.order_by(PROCESSES.c.id).limit(PRUNE_BATCH_SIZE), skip_locked=True
                    )
                )
            ]
            removals = [_remove(connection, row, policy, pruned_error(row)) for row in rows]
        _after_removals(engine, removals)
        pruned += rows
        if len(rows) < PRUNE_BATCH_SIZE:
            _announce_pruned(engine, pruned)
            return pruned


def remove(engine: sa.Engine, row: ProcessRow, *, policy: OnWorkerDeath, error: str) -> None:
    """Remove a process known to be gone (its pid exited), handling its claims."""
    with db.write(engine) as connection:
        removal = _remove(connection, row, policy, error)
    _after_removals(engine, [removal])


def supervisees(engine: sa.Engine, supervisor_id: int) -> list[ProcessRow]:
    """The registered processes a supervisor started."""
    with db.read(engine) as connection:
        query = sa.select(*_COLUMNS).where(PROCESSES.c.supervisor_id == supervisor_id)
        return [ProcessRow(*row) for row in connection.execute(query)]


def process_rows(connection: sa.Connection) -> list[sa.Row[t.Any]]:
    """The registered processes (kind, name, pid, hostname, last_heartbeat_at, ...), by kind
    and name."""
    statement = sa.select(PROCESSES).order_by(PROCESSES.c.kind, PROCESSES.c.name)
    return list(connection.execute(statement))


class Removal(t.NamedTuple):
    """What removing a gone process did with its claims."""

    process_id: int
    failed: list[JobRef]
    released: list[JobRef]


def _remove(
    connection: sa.Connection, row: ProcessRow, policy: OnWorkerDeath, error: str
) -> Removal:
    """Handle a gone process's claims and delete its row; say which jobs failed (their FINISH
    hooks run once that commits) and which went back to ready."""
    released, failed = release.resume_steps(connection, [row.id], error)
    if policy is OnWorkerDeath.RELEASE:
        released += release.requeue_claims(connection, [row.id])
    else:
        failed += release.fail_claims(connection, [row.id], error)
    connection.execute(PROCESSES.delete().where(PROCESSES.c.id == row.id))
    return Removal(row.id, failed, released)


def _after_removals(engine: sa.Engine, removals: list[Removal]) -> None:
    """Once removals committed (and the failed jobs' FINISH hooks ran): the releases'
    signals."""
    for removal in removals:
        release.announce_released(
            engine, removal.process_id, removal.released, release.ReleaseReason.PROCESS_GONE
        )


def _announce_pruned(engine: sa.Engine, pruned: list[ProcessRow]) -> None:
    """Send ``signals.prune`` for the processes a pruning removed, if any."""
    if not pruned or not signals.prune.receivers:
        return
    announce = functools.partial(
        signals.send_safely,
        signals.prune,
        None,
        process_ids=[row.id for row in pruned],
        names=[row.name for row in pruned],
        size=len(pruned),
    )
    db.after_commit(engine, announce)


def pruned_error(row: ProcessRow) -> str:
    """The error of a job whose worker was pruned for silence."""
    return failure_json(
        "flask_solidq.ProcessPrunedError",
        f"{row.kind} {row.name} (pid {row.pid} on {row.hostname}) was pruned: its last heartbeat"
        f" was at {row.last_heartbeat_at.isoformat()}",
    )


def exit_error(row: ProcessRow, description: str) -> str:
    """The error of a job whose worker process exited while it held the job's claim.

    Whether the job had started is not known: nothing is written when a job starts (that
    would cost a write per job on the hot path), and a worker may die between committing a
    claim and handing the job to a thread. So the message says what is known.
    """
    return failure_json(
        "flask_solidq.ProcessExitError",
        f"{row.kind} {row.name} (pid {row.pid} on {row.hostname}) {description}"
        " while the job was claimed; it may not have started",
    )


def missing_error(process_id: int | None) -> str:
    """The error of a job claimed by a process whose row is gone."""
    return failure_json(
        "flask_solidq.ProcessMissingError",
        f"the job was claimed by process {process_id}, which is no longer registered",
    )


_COLUMNS = (
    PROCESSES.c.id,
    PROCESSES.c.kind,
    PROCESSES.c.name,
    PROCESSES.c.pid,
    PROCESSES.c.hostname,
    PROCESSES.c.last_heartbeat_at,
)

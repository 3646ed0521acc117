"""The process registry's maintenance: pruning silent processes, and removing the rows (and
handling the claims) of processes known to be gone."""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import controls
from flask_solidq import db
from flask_solidq import models
from flask_solidq.operations import execute
from flask_solidq.operations import release
from flask_solidq.operations.rows import JobRef
from flask_solidq.timing import utcnow

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)

#: Silent processes pruned per transaction.
PRUNE_BATCH_SIZE = 50


class ProcessRow(t.NamedTuple):
    id: int
    kind: str
    name: str
    pid: int
    hostname: str | None
    last_heartbeat_at: dt.datetime


def prune_dead(
    engine: sa.Engine, *, threshold: float, exclude: int | None, policy: str
) -> list[ProcessRow]:
    """Remove the processes silent for more than ``threshold`` seconds (but ``exclude``), and
    release or fail (``policy``) the jobs they had claimed; return them.

    Every supervisor prunes; ``SKIP LOCKED`` keeps two from pruning the same process.
    """
    pruned: list[ProcessRow] = []
    while True:
        cutoff = utcnow() - dt.timedelta(seconds=threshold)
        finished: list[JobRef] = []
        with db.write(engine) as connection:
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
            for row in rows:
                finished += _remove(connection, row, policy, pruned_error(row))
        controls.finish(engine, finished)
        pruned += rows
        if len(rows) < PRUNE_BATCH_SIZE:
            return pruned


def remove(engine: sa.Engine, row: ProcessRow, *, policy: str, error: str) -> None:
    """Remove a process known to be gone (its pid exited), handling its claims."""
    with db.write(engine) as connection:
        finished = _remove(connection, row, policy, error)
    controls.finish(engine, finished)


def supervisees(engine: sa.Engine, supervisor_id: int) -> list[ProcessRow]:
    """The registered processes a supervisor started."""
    with db.read(engine) as connection:
        query = sa.select(*_COLUMNS).where(PROCESSES.c.supervisor_id == supervisor_id)
        return [ProcessRow(*row) for row in connection.execute(query)]


def _remove(connection: sa.Connection, row: ProcessRow, policy: str, error: str) -> list[JobRef]:
    """Handle a gone process's claims and delete its row; return the failed jobs, whose
    FINISH hooks the caller runs after committing."""
    failed: list[JobRef] = []
    if policy == release.RELEASE:
        release.release_claims(connection, [row.id])
    else:
        failed = release.fail_claims(connection, [row.id], error)
    connection.execute(PROCESSES.delete().where(PROCESSES.c.id == row.id))
    return failed


def pruned_error(row: ProcessRow) -> str:
    """The error of a job whose worker was pruned for silence."""
    return execute.failure_json(
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
    return execute.failure_json(
        "flask_solidq.ProcessExitError",
        f"{row.kind} {row.name} (pid {row.pid} on {row.hostname}) {description}"
        " while the job was claimed; it may not have started",
    )


def missing_error(process_id: int | None) -> str:
    """The error of a job claimed by a process whose row is gone."""
    return execute.failure_json(
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

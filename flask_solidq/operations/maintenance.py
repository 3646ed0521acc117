"""Maintenance: clearing finished jobs (and then their finished batches) away, a batch of
rows at a time.

With ``SOLIDQ_PRESERVE_FINISHED_JOBS`` on, finished jobs stay in ``solidq_jobs`` (for the
dashboard, and to look back on) until something clears them. Deleting them all in one statement
would hold locks on a big table for as long as it runs, so, as Solid Queue's
``clear_finished_in_batches`` does, each batch is a short transaction of its own.
"""

from __future__ import annotations

import time
import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import BATCHES
from flask_solidq.models.tables import JOBS
from flask_solidq.storage import db
from flask_solidq.transitions import jobs as job_rows

if t.TYPE_CHECKING:
    import datetime as dt


def clear_finished_in_batches(
    engine: sa.Engine,
    *,
    finished_before: dt.datetime,
    batch_size: int = 500,
    class_name: str | None = None,
    sleep_between_batches: float = 0,
) -> int:
    """Delete the jobs that finished before ``finished_before`` (of the job named
    ``class_name`` only, when given), ``batch_size`` at a time; return how many went.

    Their rows in other tables (coalesced calls, recurring ledger entries) go with them, by
    cascade. Each batch commits on its own; ``sleep_between_batches`` seconds between batches
    go easy on replicas and on the workers' locks.

    :raises ValueError: ``batch_size`` is less than 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be 1 or more, not {batch_size}.")
    finished = _finished_job_ids(finished_before, class_name, batch_size)
    cleared = 0
    while True:
        deleted, selected = _delete_batch(engine, finished)
        cleared += deleted
        if selected < batch_size:
            return cleared
        if sleep_between_batches:
            time.sleep(sleep_between_batches)


def _finished_job_ids(
    finished_before: dt.datetime, class_name: str | None, batch_size: int
) -> sa.Select[tuple[int]]:
    statement = (
        sa.select(JOBS.c.id)
        .where(JOBS.c.finished_at.is_not(None), JOBS.c.finished_at < finished_before)
        .order_by(JOBS.c.id)
        .limit(batch_size)
    )
    if class_name is not None:
        statement = statement.where(JOBS.c.class_name == class_name)
    return statement


def _delete_batch(engine: sa.Engine, finished: sa.Select[tuple[int]]) -> tuple[int, int]:
    """Delete one batch; return how many rows went and how many ids were selected.

    The ids are selected first and deleted by ``id IN``, because MySQL refuses a ``LIMIT`` in
    a subquery of ``IN`` and PostgreSQL has no ``DELETE ... LIMIT``.
    """
    with db.write(engine) as connection:
        ids = [row.id for row in connection.execute(finished)]
        if not ids:
            return 0, 0
        deleted = job_rows.prune(connection, ids)
    return deleted, len(ids)


def clear_finished_batches(
    engine: sa.Engine,
    *,
    finished_before: dt.datetime,
    batch_size: int = 500,
    sleep_between_batches: float = 0,
) -> int:
    """Delete the batches that finished before ``finished_before`` and have no job left (a
    batch whose failed jobs are kept stays while they do, so a job's page never links to a
    batch that is gone), ``batch_size`` at a time; return how many went. Run after
    :func:`clear_finished_in_batches`, with the same retention.

    :raises ValueError: ``batch_size`` is less than 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be 1 or more, not {batch_size}.")
    left = sa.select(JOBS.c.id).where(JOBS.c.batch_id == BATCHES.c.id)
    finished = (
        sa.select(BATCHES.c.id)
        .where(BATCHES.c.finished_at < finished_before, ~left.exists())
        .order_by(BATCHES.c.id)
        .limit(batch_size)
    )
    cleared = 0
    while True:
        with db.write(engine) as connection:
            ids = [row.id for row in connection.execute(finished)]
            if ids:
                connection.execute(BATCHES.delete().where(BATCHES.c.id.in_(ids)))
        cleared += len(ids)
        if len(ids) < batch_size:
            return cleared
        if sleep_between_batches:
            time.sleep(sleep_between_batches)

"""A batch's block, its row inserted as ``solidq.batch()`` opens and its jobs counted as the
block (or one that adds to the batch) commits, in the block's own transaction."""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import current
from flask_solidq import errors
from flask_solidq.batches.counts import Tally
from flask_solidq.batches.counts import account
from flask_solidq.batches.counts import tally_of_block
from flask_solidq.definitions import arguments
from flask_solidq.models.tables import BATCHES
from flask_solidq.storage import db


def open_batch(
    connection: sa.Connection,
    callbacks: dict[str, str | None],
    metadata: t.Mapping[str, t.Any],
    now: dt.datetime,
    parent_id: int | None = None,
) -> int:
    """Insert a batch's row, not yet enqueued, a child of ``parent_id`` when given; return
    its id. In the block's transaction.

    :raises flask_solidq.SerializationError: the metadata can't be stored as JSON.
    """
    row = {
        "parent_id": parent_id,
        "metadata": metadata_json(metadata),
        **callbacks,
        "total_jobs": 0,
        "pending_jobs": 0,
        "completed_jobs": 0,
        "failed_jobs": 0,
        "created_at": now,
        "updated_at": now,
    }
    return db.insert_returning_id(connection, BATCHES.insert(), row)


def metadata_json(metadata: t.Mapping[str, t.Any]) -> str | None:
    """The batch's extra keywords as JSON (plain JSON: they are read back as they are, by
    people and dashboards, not loaded into a job).

    :raises flask_solidq.SerializationError: a value isn't plain JSON.
    """
    if not metadata:
        return None
    try:
        return arguments.dumps(dict(metadata))
    except (TypeError, ValueError) as exc:
        raise errors.SerializationError(
            f"solidq.batch()'s metadata must be plain JSON (str, int, float, bool, None, lists"
            f" and dicts of them): {exc}"
        ) from None


def close_batch(
    engine: sa.Engine,
    connection: sa.Connection,
    batch: current.OpenBatch,
    now: dt.datetime,
    parent_id: int | None = None,
) -> None:
    """End the block that opened ``batch``: record when, and count the jobs it stored (and
    the batch itself as a job of its parent, ``parent_id``); a batch with nothing pending then
    (it stored none) finishes at once, its callbacks stored in the block's own transaction.

    :raises flask_solidq.BatchAlreadyFinished: the parent batch had finished, or is gone;
        the caller's transaction must roll back.
    """
    tallies = {batch.id: tally_of_block(batch)}
    if parent_id is not None:
        _lock_open(connection, parent_id, what="the batch opened as its child was not stored")
        tallies[parent_id] = Tally(added=1)
    connection.execute(
        BATCHES.update().where(BATCHES.c.id == batch.id).values(enqueued_at=now, updated_at=now)
    )
    account(engine, connection, tallies, now)


def add_to_batch(
    engine: sa.Engine, connection: sa.Connection, batch: current.OpenBatch, now: dt.datetime
) -> None:
    """End a block that added to ``batch``: count the jobs it stored onto the batch, if the
    batch is still open (under the row's lock: the batch's last finisher either came first,
    and the batch is finished, or waits and counts these jobs).

    :raises flask_solidq.BatchAlreadyFinished: the batch had finished, or is gone; the caller's
        transaction must roll back (the block's jobs are not stored).
    """
    _lock_open(
        connection,
        batch.id,
        what=f"the {batch.stored} job(s) enqueued in this block were not stored",
    )
    account(engine, connection, {batch.id: tally_of_block(batch)}, now)


def _lock_open(connection: sa.Connection, batch_id: int, *, what: str) -> None:
    """Lock batch ``batch_id``'s row, checking it is still open.

    :raises flask_solidq.BatchAlreadyFinished: it had finished, or is gone (``what`` names
        what was therefore not stored).
    """
    # The row is locked by its primary key before it is read or written, as the finishers
    # lock it: an UPDATE whose WHERE names finished_at may lock the finished_at index entry
    # first (MariaDB), the other way round from a finisher, and deadlock with it.
    row = connection.execute(
        db.for_update(
            sa.select(BATCHES.c.finished_at, BATCHES.c.enqueued_at).where(BATCHES.c.id == batch_id),
            skip_locked=False,
        )
    ).one_or_none()
    if row is None or row.finished_at is not None or row.enqueued_at is None:
        finished_at = row.finished_at if row is not None else None
        when = f"finished at {finished_at:%Y-%m-%d %H:%M:%S} UTC" if finished_at else "is gone"
        raise errors.BatchAlreadyFinished(
            f"Batch {batch_id} {when}; {what}. A batch finishes when nothing in"
            " it is pending: add to it from one of its own running jobs (with"
            " current_job.batch.enqueue(): or a solidq.batch() block opened there), which keeps"
            " it open."
        )

"""A batch's counts, as each transaction that stores, ends or revives its jobs changes them,
and the one writer that applies those changes and finishes the batch, once.

Why the counting happens where it does: the callbacks of a batch must run exactly once each
time it finishes, even when its last jobs finish at the same moment in different processes.
:func:`account` is the only writer of a batch's counters. The blocks that add jobs call it as
they commit (:mod:`.blocks`), and every change of a job's state that counts
(:mod:`flask_solidq.operations.job_ends`: a finisher storing outcomes, a worker's death failing
its claims, a discard, a hand retry putting a failed job back) calls it in that same
transaction, under the batch row's lock (taken last, in ascending id order, so two such
transactions never wait on each other's rows the other way round). The transaction that takes
``pending_jobs`` to 0 sets ``finished_at`` and stores the callbacks' jobs in its own commit:
any other one waits for the lock and then sees the batch finished. There is no moment between
"finished" and "callbacks stored" for a crash to fall into (Solid Queue's batches finish after
the commit, and need a maintenance pass for that gap).

A batch is not a Control (:mod:`flask_solidq.controls.base`): a control's hooks run per job
definition and after the outcome's commit, and a batch needs its counts inside it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import types
import typing as t

import sqlalchemy as sa

from flask_solidq import current
from flask_solidq.batches import callbacks
from flask_solidq.definitions.batches import Batch
from flask_solidq.models.tables import BATCHES
from flask_solidq.storage import db

logger = logging.getLogger("flask_solidq")


@dataclasses.dataclass
class Tally:
    """What one transaction changes of one batch's counts."""

    #: Jobs stored into the batch: total and pending.
    added: int = 0
    #: Jobs that finished or were discarded.
    completed: int = 0
    #: Jobs that failed for good.
    failed: int = 0
    #: Failed jobs retried by hand: pending again.
    reopened: int = 0


def tally_of_block(batch: current.OpenBatch) -> Tally:
    """What a block that stored jobs into ``batch`` changes of its counts."""
    return Tally(added=batch.stored, **batch.ended)


def tally_by_batch(pairs: t.Iterable[tuple[int | None, str]]) -> dict[int, Tally]:
    """Sum ``(batch_id, "completed" | "failed" | "reopened")`` pairs by batch; jobs in no
    batch are left out."""
    tallies: dict[int, Tally] = {}
    for batch_id, what in pairs:
        if batch_id is None:
            continue
        tally = tallies.setdefault(batch_id, Tally())
        setattr(tally, what, getattr(tally, what) + 1)
    return tallies


def account(
    engine: sa.Engine,
    connection: sa.Connection,
    tallies: dict[int, Tally],
    now: dt.datetime,
) -> list[Batch]:
    """Apply ``tallies`` to their batches, under the batches' locks, in the caller's
    transaction (the one that moved the jobs, which the callbacks' enqueues join); finish
    each batch left with nothing pending and store its callbacks there. Return the batches
    finished. Their ``batch_finish`` signal is sent after the commit. The only writer of a
    batch's counters.

    The tally of the batch whose block is open in this context (a job it stored ended at
    once: a concurrency limit discarded it) is kept on the block, and applied with the
    block's own jobs as it ends. A finished batch is reopened by a failed job retried by
    hand (it finishes again, and runs its callbacks again, once that job ends); other
    changes leave a finished batch, or one whose row was cleared, alone.

    A child batch is one job of its parent: its finish counts there (completed, or failed
    when a job of it failed), in the same transaction, and its callbacks are added to the
    parent as jobs of it, so the parent finishes only after them; its reopening reopens it
    there. Batches are applied children first (a child's id is above its parent's).
    """
    todo = _outside_open_block(tallies)
    if not todo:
        return []
    rows = _lock(connection, todo)
    finished: list[Batch] = []
    while todo:
        batch_id = max(todo)
        tally = todo.pop(batch_id)
        row = rows.get(batch_id)
        if row is None:
            continue
        batch, parent_tally = _apply(engine, connection, row, tally, now)
        if batch is not None:
            finished.append(batch)
        if parent_tally is not None and row.parent_id is not None:
            if row.parent_id not in rows:
                rows.update(_lock(connection, {row.parent_id: parent_tally}))
            todo[row.parent_id] = _sum(todo.get(row.parent_id, Tally()), parent_tally)
    if finished:
        # PostgreSQL's listening workers hear of the callbacks as the commit lands.
        db.notify(connection, db.READY_CHANNEL)
        db.after_commit_on(connection, lambda: callbacks.announce_finished(finished))
    return finished


def _lock(connection: sa.Connection, tallies: t.Mapping[int, Tally]) -> dict[int, t.Any]:
    """Lock the rows of the batches of ``tallies``, in ascending id order; return them by id.

    A parent is locked after its child only when the child finishes or reopens: two
    transactions that lock both the other way round deadlock, and the deadlock is retried as
    any other (finishers and actions retry theirs)."""
    rows = connection.execute(
        db.for_update(
            sa.select(BATCHES).where(BATCHES.c.id.in_(sorted(tallies))).order_by(BATCHES.c.id),
            skip_locked=False,
        )
    ).all()
    return {row.id: row for row in rows}


def _apply(
    engine: sa.Engine, connection: sa.Connection, row: t.Any, tally: Tally, now: dt.datetime
) -> tuple[Batch | None, Tally | None]:
    """Apply ``tally`` to one batch's ``row``; return the batch if it finished, and what its
    change counts in its parent (None: nothing)."""
    reopening = row.finished_at is not None and tally.reopened > 0
    if row.enqueued_at is None or (row.finished_at is not None and not reopening):
        _warn_finished(row, tally)
        return None, None
    values = _counts_after(row, tally)
    if reopening:
        values["finished_at"] = values["failed_at"] = None
    if values["pending_jobs"] == 0:
        values["finished_at"] = now
        values["failed_at"] = now if values["failed_jobs"] else None
    connection.execute(
        BATCHES.update().where(BATCHES.c.id == row.id).values(**values, updated_at=now)
    )
    parent_tally = Tally(reopened=1) if reopening else None
    if values["pending_jobs"] != 0:
        return None, parent_tally
    batch = Batch.of(types.SimpleNamespace(**{**row._asdict(), **values, "updated_at": now}))
    into = current.OpenBatch(row.parent_id) if row.parent_id is not None else None
    with db.joining_connection(engine, connection):
        callbacks.store(engine, row, batch, into)
    if into is None:
        return batch, None
    ended = tally_of_block(into)
    ended.failed += 1 if batch.failed_jobs else 0
    ended.completed += 0 if batch.failed_jobs else 1
    # A reopened child that finishes again is pending again in its parent first.
    return batch, _sum(ended, parent_tally) if parent_tally else ended


def _sum(first: Tally, second: Tally) -> Tally:
    """Two tallies of one batch as one."""
    return Tally(
        **{
            field.name: getattr(first, field.name) + getattr(second, field.name)
            for field in dataclasses.fields(Tally)
        }
    )


def _outside_open_block(tallies: dict[int, Tally]) -> dict[int, Tally]:
    """``tallies`` less the one of the batch whose block is open in this context, added to
    the block's own count instead (its jobs aren't on the batch's row until it ends)."""
    opened = current.open_batch()
    if opened is None or opened.id not in tallies:
        return tallies
    tally = tallies[opened.id]
    for what in ("completed", "failed", "reopened"):
        opened.ended[what] = opened.ended.get(what, 0) + getattr(tally, what)
    opened.stored += tally.added
    return {batch_id: other for batch_id, other in tallies.items() if batch_id != opened.id}


def _warn_finished(row: t.Any, tally: Tally) -> None:
    """Log a change counted for a batch that has finished (or whose block hasn't committed):
    every job of a finished batch has ended, so only rows changed by hand get here."""
    if tally != Tally():
        logger.warning(
            "SolidQ batch %s had finished when %s of its jobs changed state; its counters were"
            " left as they are",
            row.id,
            tally.completed + tally.failed + tally.added,
        )


def _counts_after(row: t.Any, tally: Tally) -> dict[str, t.Any]:
    """A batch's counters once ``tally`` is applied to its ``row``. A count that would go
    below zero (rows changed by hand) stops at zero, with a WARNING."""
    pending = row.pending_jobs + tally.added - tally.completed - tally.failed + tally.reopened
    failed = row.failed_jobs + tally.failed - tally.reopened
    if pending < 0 or failed < 0:
        logger.warning(
            "SolidQ batch %s counted more finished jobs than it had pending; its counters were"
            " changed outside flask-solidq",
            row.id,
        )
    return {
        "total_jobs": row.total_jobs + tally.added,
        "pending_jobs": max(pending, 0),
        "completed_jobs": row.completed_jobs + tally.completed,
        "failed_jobs": max(failed, 0),
    }

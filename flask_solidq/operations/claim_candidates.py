"""The ready rows a claim takes: one select per shape (every queue or one, ``SKIP LOCKED`` or
not), built once, in priority then job order, skipping paused queues, and only for a
registered claimer. MySQL/MariaDB read them through a forced index (:func:`_forcing_index`).
"""

from __future__ import annotations

import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import PAUSES
from flask_solidq.models.tables import PROCESSES
from flask_solidq.models.tables import READY
from flask_solidq.storage import db


def candidates(queue_name: str | None, skip_locked: bool) -> sa.Select[t.Any]:
    """The ready rows to claim: in priority then job order, skipping paused queues."""
    return _CANDIDATES[(queue_name is not None, skip_locked)]


#: The claiming process's row, locked for the claim's transaction, inside the candidates'
#: select (a claim takes nothing for a process that isn't registered): shared, so claims and
#: heartbeats (PostgreSQL's ``FOR KEY SHARE``) go on, but a pruning's ``FOR UPDATE`` of the row
#: waits for the claim to commit, or the claim for the pruning (and then finds no row). SQLite
#: locks no row and needs none: from ``BEGIN IMMEDIATE`` on, no pruning can come between.
_REGISTERED = (
    sa.select(PROCESSES.c.id)
    .where(PROCESSES.c.id == sa.bindparam("process_id"))
    .with_for_update(read=True, key_share=True)
)


def _build_candidates(by_queue: bool, skip_locked: bool) -> sa.Select[t.Any]:
    order = (READY.c.priority, READY.c.job_id)
    query = sa.select(READY.c.id, READY.c.job_id).where(
        sa.exists(_REGISTERED), READY.c.queue_name.not_in(sa.select(PAUSES.c.queue_name))
    )
    if by_queue:
        query = query.where(READY.c.queue_name == sa.bindparam("queue_name"))
        index = _ready_index(READY.c.queue_name, *order)
    else:
        index = _ready_index(*order)
    query = query.order_by(*order).limit(sa.bindparam("limit"))
    return db.for_update(_forcing_index(query, index), skip_locked=skip_locked)


def _forcing_index(query: sa.Select[t.Any], index: str) -> sa.Select[t.Any]:
    """MySQL/MariaDB: read the ready rows through ``index``, in its order, so that two
    workers share the backlog instead of taking turns.

    Left to itself, MariaDB's optimizer often reads every ready row and sorts them ("Using
    filesort"): 10.11 did so for every-queue claims of a 20-job backlog, and of a 5,000-job
    backlog on one queue, whenever its statistics made a sort look cheaper than walking the
    index past the paused queues' ``NOT IN``. ``FOR UPDATE`` locks each row it reads before
    the sort and ``LIMIT``, so one claim locked the whole backlog and a second worker's
    ``SKIP LOCKED`` found nothing until the first committed. Read in index order,
    the scan stops after ``limit`` rows it could lock, which also makes a claim of a big
    backlog cheaper. The rows of paused queues it steps over stay locked until its commit too
    (InnoDB keeps them, even in ``READ COMMITTED``), which costs nothing: every claim skips
    them anyway.

    A hint rather than reading the pauses first and listing the queues: it keeps one
    statement with the pause check inside it (no window where a claim acts on a stale list
    of pauses), and holds whatever the statistics say, while a literal ``NOT IN`` list was
    still sorted. PostgreSQL and SQLite never see the hint.
    """
    return db.forcing_index(query, READY, index)


def _ready_index(*columns: sa.Column[t.Any]) -> str:
    """The name of the ready executions' index on exactly ``columns``, taken from the model so
    the hint follows a renamed index (a hint naming a missing index is an error)."""
    wanted = [column.name for column in columns]
    for index in READY.indexes:
        if [column.name for column in index.columns] == wanted and index.name:
            return str(index.name)
    raise LookupError(f"no index on {READY.name} {wanted}")


_VARIANTS = [(by_queue, skip_locked) for by_queue in (False, True) for skip_locked in (False, True)]
_CANDIDATES = {variant: _build_candidates(*variant) for variant in _VARIANTS}

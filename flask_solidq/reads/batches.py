"""Reading batches for people: a page of batches (or of one's children), and one batch with
its jobs by state and whether it has jobs to retry or discard.
Read-only; behind ``flask solidq batches`` / ``flask solidq batch`` and the dashboard.

Batches are keyset-paginated on their id, newest first (``before``: the last id of the
previous page), as jobs are (:mod:`.browse`). A batch's jobs are listed through
:func:`.browse.list_jobs` with its ``batch`` filter, so a state's page of a batch is the same
query as the state's page of every job, narrowed by the indexed ``solidq_jobs.batch_id``;
nothing here counts a batch's jobs (its row's counters already say how many are where).
"""

from __future__ import annotations

import dataclasses
import enum
import typing as t

import sqlalchemy as sa

from flask_solidq import argument_filter
from flask_solidq.batches.children import family as family_of
from flask_solidq.definitions import batches as definitions_batches
from flask_solidq.definitions.batches import Batch
from flask_solidq.models.tables import BATCHES
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.reads import browse

#: The most batches one page lists.
MAX_PAGE = browse.MAX_PAGE

#: A batch's job states, in the order its page shows them: what is still to run first, then
#: what ran (finished jobs only while ``SOLIDQ_PRESERVE_FINISHED_JOBS`` keeps them).
JOB_STATES = (
    browse.State.FAILED,
    browse.State.CLAIMED,
    browse.State.READY,
    browse.State.BLOCKED,
    browse.State.SCHEDULED,
    browse.State.DEFERRED,
    browse.State.FINISHED,
)


class BatchFilter(str, enum.Enum):
    """Which batches a list shows: those with jobs pending, those finished (with or without
    failures), or those finished with at least one job failed for good."""

    OPEN = "open"
    FINISHED = "finished"
    FAILED = "failed"


_CONDITIONS: dict[BatchFilter, sa.ColumnElement[bool]] = {
    BatchFilter.OPEN: BATCHES.c.finished_at.is_(None),
    BatchFilter.FINISHED: BATCHES.c.finished_at.is_not(None),
    BatchFilter.FAILED: BATCHES.c.failed_at.is_not(None),
}


@dataclasses.dataclass(frozen=True)
class JobGroup:
    """A page of a batch's jobs in one state."""

    state: browse.State
    jobs: list[browse.JobSummary]
    #: The cursor of the next page (the last id shown), when the page is full.
    next_before: int | None


def list_batches(
    connection: sa.Connection,
    *,
    status: BatchFilter | None = None,
    parent: int | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[Batch]:
    """Up to ``limit`` batches (only those ``status`` names; only the children of batch
    ``parent``, through the index on ``parent_id``), newest first, with ids below ``before``.
    A batch whose block hasn't committed is never listed."""
    limit = max(1, min(limit, MAX_PAGE))
    query = sa.select(BATCHES).where(BATCHES.c.enqueued_at.is_not(None))
    if status is not None:
        query = query.where(_CONDITIONS[status])
    if parent is not None:
        query = query.where(BATCHES.c.parent_id == parent)
    if before is not None:
        query = query.where(BATCHES.c.id < before)
    rows = connection.execute(query.order_by(BATCHES.c.id.desc()).limit(limit))
    return [_shown(Batch.of(row)) for row in rows]


def find_batch(connection: sa.Connection, batch_id: int) -> Batch | None:
    """Batch ``batch_id`` as its row is now (None if there is none, or its block hasn't
    committed), on the caller's connection."""
    batch = definitions_batches.read(connection, batch_id)
    return None if batch is None else _shown(batch)


def _shown(batch: Batch) -> Batch:
    """``batch`` with its metadata, what its callbacks read like arguments, filtered by
    ``SOLIDQ_FILTER_ARGUMENTS`` for people."""
    shown = argument_filter.current()
    if shown.pattern is None or not batch.metadata:
        return batch
    return dataclasses.replace(batch, metadata=shown.filtered(batch.metadata))


def job_groups(
    connection: sa.Connection,
    batch_id: int,
    *,
    states: t.Sequence[browse.State] = JOB_STATES,
    before: int | None = None,
    limit: int = 10,
) -> list[JobGroup]:
    """A page of the batch's jobs in each of ``states`` (``limit`` at most, ids below
    ``before``): one bounded query per state, whatever the batch's size."""
    limit = max(1, min(limit, browse.MAX_PAGE))
    groups = []
    for state in states:
        jobs = browse.list_jobs(connection, state, batch=batch_id, before=before, limit=limit)
        next_before = jobs[-1].id if len(jobs) == limit else None
        groups.append(JobGroup(state, jobs, next_before))
    return groups


@dataclasses.dataclass(frozen=True)
class Actionable:
    """What a batch's page offers: whether the batch or a descendant has failed jobs to
    retry, and scheduled, blocked or ready jobs to discard."""

    failed: bool
    pending: bool


def actionable(connection: sa.Connection, batch: Batch) -> Actionable:
    """Whether ``batch`` and its descendants have failed / pending jobs. Its counters rule
    most batches out unread (a descendant with failed or pending jobs counts in its parent as
    a failed or pending job); otherwise one read of the family (one per generation) and one
    of ``EXISTS`` conditions."""
    if not batch.failed_jobs and not batch.pending_jobs:
        return Actionable(failed=False, pending=False)
    family = family_of(connection, batch.id)

    def exists(execution: sa.Table) -> sa.ColumnElement[bool]:
        joined = execution.join(JOBS, JOBS.c.id == execution.c.job_id)
        return sa.exists(
            sa.select(sa.literal(1)).select_from(joined).where(JOBS.c.batch_id.in_(family))
        )

    # A batch none of whose jobs (children included) is pending has none waiting.
    pending: sa.ColumnElement[bool] = sa.false()
    if batch.pending_jobs:
        pending = sa.or_(exists(SCHEDULED), exists(BLOCKED), exists(READY))
    row = connection.execute(sa.select(exists(FAILED).label("failed"), pending.label("pending")))
    failed, waiting = row.one()
    return Actionable(failed=bool(failed), pending=bool(waiting))

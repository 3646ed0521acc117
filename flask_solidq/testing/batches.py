"""Batches under the test adapter: ``solidq.batch()`` keeps its batch in memory, so an app tests
its batch callbacks with :func:`flask_solidq.testing.perform_enqueued_jobs`.

The rules are the database queue's (:mod:`flask_solidq.batches`): a block's jobs
belong to its batch, a block that raises takes its jobs back, a job performed counts as
completed (or failed, when it raised), and the end of the last pending job records the
callbacks once, outside the batch, with the batch first. The callbacks and metadata are
checked and stored as JSON the same way, so one a worker couldn't run fails here too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import typing as t
import weakref

from flask_solidq import batches
from flask_solidq import current
from flask_solidq import errors
from flask_solidq.definitions import batches as definitions_batches
from flask_solidq.definitions import job as job_definitions
from flask_solidq.definitions.batches import CALLBACK_KINDS
from flask_solidq.definitions.batches import Batch
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.state import SolidQState

logger = logging.getLogger("flask_solidq")


@dataclasses.dataclass
class HeldBatch:
    """A batch of the test adapter: the fields of its ``solidq_batches`` row, in memory."""

    id: int
    #: The metadata and callbacks as the database stores them (JSON text).
    metadata: str | None
    on_success: str | None
    on_failure: str | None
    on_finish: str | None
    created_at: dt.datetime
    total_jobs: int = 0
    pending_jobs: int = 0
    completed_jobs: int = 0
    failed_jobs: int = 0
    enqueued_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    failed_at: dt.datetime | None = None
    #: The batch this one is a child of: it counts as one job there.
    parent_id: int | None = None

    def read(self) -> Batch:
        """The batch as ``solidq.batches.find`` gives it."""
        return Batch.of(self)


@dataclasses.dataclass
class Records:
    """What the test adapter holds for one app: its jobs, oldest first, and its batches."""

    jobs: list[Job] = dataclasses.field(default_factory=list)
    batches: dict[int, HeldBatch] = dataclasses.field(default_factory=dict)

    def clear(self) -> None:
        """Forget every job and batch."""
        self.jobs.clear()
        self.batches.clear()


#: Each app's records, by its state: kept here, beside the test adapter, so the app's state
#: (below the job definitions) holds nothing of theirs.
_RECORDS: weakref.WeakKeyDictionary[SolidQState, Records] = weakref.WeakKeyDictionary()


def records_of(state: SolidQState) -> Records:
    """The test adapter's records for ``state``'s app."""
    records = _RECORDS.get(state)
    if records is None:
        records = _RECORDS[state] = Records()
    return records


def find(state: SolidQState, batch_id: int) -> Batch | None:
    """Batch ``batch_id`` as ``solidq.batches.find`` gives it under the test adapter (None
    when there is none, or its block is still open)."""
    held = records_of(state).batches.get(batch_id)
    return None if held is None or held.enqueued_at is None else held.read()


def record(state: SolidQState, job: Job) -> None:
    """Record ``job``, in the batch whose block is open, if any."""
    opened = current.open_batch()
    if opened is not None:
        job.batch_id = opened.id
        opened.stored += 1
    records_of(state).jobs.append(job)


@contextlib.contextmanager
def batch(
    state: SolidQState,
    callbacks: dict[str, str | None],
    metadata: t.Mapping[str, object],
    parent_id: int | None = None,
) -> t.Iterator[current.OpenBatch]:
    """``solidq.batch()``'s block: its jobs are recorded in a new batch (a child of
    ``parent_id``, counted there as one job, when given); an exception takes them and the
    batch back. An empty batch finishes as the block ends.

    :raises flask_solidq.BatchAlreadyFinished: the parent had finished, or is gone.
    """
    held = HeldBatch(
        parent_id=parent_id,
        id=max(records_of(state).batches, default=0) + 1,
        metadata=batches.metadata_json(metadata),
        on_success=callbacks["on_success"],
        on_failure=callbacks["on_failure"],
        on_finish=callbacks["on_finish"],
        created_at=utcnow(),
    )
    records_of(state).batches[held.id] = held
    with _taken_back_on_error(state, held.id, new=True) as opened:
        yield opened
        if parent_id is not None:
            parent = _open(state, parent_id, "the batch opened as its child was not recorded")
            parent.total_jobs += 1
            parent.pending_jobs += 1
    held.total_jobs = held.pending_jobs = opened.stored
    held.enqueued_at = utcnow()
    if opened.stored == 0:
        _finish(state, held)


@contextlib.contextmanager
def adding_to(state: SolidQState, batch_id: int) -> t.Iterator[current.OpenBatch]:
    """A block that adds to batch ``batch_id``, counted onto it as the block ends.

    :raises flask_solidq.BatchAlreadyFinished: the batch finished (or is gone) by then; the
        block's jobs are taken back.
    """
    with _taken_back_on_error(state, batch_id, new=False) as opened:
        yield opened
        what = f"the {opened.stored} job(s) enqueued in this block were not recorded"
        held = _open(state, batch_id, what)
    held.total_jobs += opened.stored
    held.pending_jobs += opened.stored


def _open(state: SolidQState, batch_id: int, what: str) -> HeldBatch:
    """Batch ``batch_id``, checked to be open.

    :raises flask_solidq.BatchAlreadyFinished: it has finished, or is gone (``what`` says
        what was therefore not recorded).
    """
    held = records_of(state).batches.get(batch_id)
    if held is None or held.finished_at is not None or held.enqueued_at is None:
        raise errors.BatchAlreadyFinished(
            f"Batch {batch_id} {'has finished' if held else 'is gone'}; {what}. A batch"
            " finishes when nothing in it is pending: add to it from one of its own running"
            " jobs (with current_job.batch.enqueue():), which keeps it open."
        )
    return held


def job_ended(state: SolidQState, job: Job, *, failed: bool) -> None:
    """Count ``job``'s end in its open batch; the last pending job finishes the batch."""
    if job.batch_id is not None:
        _ended(state, job.batch_id, failed=failed)


def _ended(state: SolidQState, batch_id: int, *, failed: bool) -> None:
    """Count one job (or child batch) of batch ``batch_id`` ended."""
    held = records_of(state).batches.get(batch_id)
    if held is None or held.finished_at is not None or held.enqueued_at is None:
        return
    if failed:
        held.failed_jobs += 1
    else:
        held.completed_jobs += 1
    held.pending_jobs = max(held.pending_jobs - 1, 0)
    if held.pending_jobs == 0:
        _finish(state, held)


def clear(state: SolidQState) -> None:
    """Forget every batch."""
    records_of(state).batches.clear()


@contextlib.contextmanager
def _taken_back_on_error(
    state: SolidQState, batch_id: int, *, new: bool
) -> t.Iterator[current.OpenBatch]:
    """A block whose enqueues go into batch ``batch_id``; if it raises, the jobs it recorded
    (and the batch, when ``new``) are forgotten, as a rolled-back transaction's would be."""
    before = len(records_of(state).jobs)
    opened = current.OpenBatch(batch_id)
    try:
        with current.enqueuing_into(opened):
            yield opened
    except BaseException:
        added = {id(job) for job in records_of(state).jobs[before:] if job.batch_id == batch_id}
        records_of(state).jobs[:] = [job for job in records_of(state).jobs if id(job) not in added]
        if new:
            records_of(state).batches.pop(batch_id, None)
        raise


def _finish(state: SolidQState, held: HeldBatch) -> None:
    """Finish ``held``: record the callbacks it runs, outside any batch (in its parent, as
    jobs of it, for a child), then send ``batch_finish``; a child then counts as ended in its
    parent."""
    held.finished_at = utcnow()
    held.failed_at = held.finished_at if held.failed_jobs else None
    finished = held.read()
    kinds = {"on_finish", "on_failure" if held.failed_jobs else "on_success"}
    parent = records_of(state).batches.get(held.parent_id) if held.parent_id is not None else None
    into = current.OpenBatch(parent.id) if parent is not None else None
    with current.enqueuing_into(into):
        for kind in (kind for kind in CALLBACK_KINDS if kind in kinds):
            stored = getattr(held, kind)
            if stored is None:
                continue
            try:
                job = batches.callback_job(json.loads(stored), finished)
            except Exception:
                logger.exception("SolidQ couldn't build the %s callback of batch %s", kind, held.id)
                continue
            job_definitions.ADAPTER.call(job, state)
    batches.announce_finished([finished])
    if parent is not None and into is not None:
        parent.total_jobs += into.stored
        parent.pending_jobs += into.stored
        _ended(state, parent.id, failed=bool(held.failed_jobs))


#: ``solidq.batches.find`` under the test adapter reads the batches held here.
definitions_batches.HELD.fill(find)

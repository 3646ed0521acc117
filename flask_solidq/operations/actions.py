"""What a person does to jobs: retry or discard failed ones, discard waiting ones, run a
scheduled one now. The one implementation behind ``solidq.retry()`` and friends, the
``flask solidq retry``/``discard``/``run-now`` commands and the dashboard's buttons.

Every action works in batches of at most :data:`BATCH_SIZE` jobs, one transaction each, and
locks the execution rows it acts on with ``FOR UPDATE SKIP LOCKED``: two people (or a person
and a worker) acting on the same jobs at once never act twice on one job, and a job that
left the state an action wants (it ran, it was retried already) is simply not counted. Each
action returns how many jobs it changed.

* **retry** (failed jobs): the failed execution is deleted and the job becomes ready again
  (or blocked, by its concurrency limit), keeping its row, its id, its ``executions`` count
  and its collected calls; its ``retry_on`` rules get their attempts back. The error goes
  with the failed execution, as on Solid Queue: a job that fails again records its new one.
  A retried job doesn't coalesce. A job stored without a rate-limit or concurrency key takes
  the one its definition gives it now (:mod:`~flask_solidq.operations.retry_keys`).
* **discard** (failed, scheduled, ready or blocked jobs; never a running one): the job row
  is deleted with its executions and collected calls (foreign keys cascade), which frees its
  coalesce key if it held it; a ready job gives its concurrency slot back.
* **run now** (scheduled jobs, including rate-limited jobs waiting for their slot): the job
  becomes due now, ready or blocked; a rate-limited job is checked again when claimed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq import batches
from flask_solidq import identifiers
from flask_solidq.definitions.stored_errors import parse_error
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.operations import dispatch
from flask_solidq.operations import job_ends
from flask_solidq.operations import retry_keys
from flask_solidq.operations import retry_payloads
from flask_solidq.storage import db
from flask_solidq.timing import as_utc
from flask_solidq.timing import utcnow
from flask_solidq.transitions import executions
from flask_solidq.values import JobRef

#: The most jobs one transaction of an action changes.
BATCH_SIZE = 500


class Waiting(str, enum.Enum):
    """The states a job can be discarded from: every state but running and finished. In the
    order :func:`discard` goes through them: blocked before ready, because discarding a ready
    job gives its slot back, which may make a blocked job of the same key ready."""

    FAILED = "failed"
    SCHEDULED = "scheduled"
    BLOCKED = "blocked"
    READY = "ready"


_EXECUTIONS = {
    Waiting.FAILED: FAILED,
    Waiting.SCHEDULED: SCHEDULED,
    Waiting.READY: READY,
    Waiting.BLOCKED: BLOCKED,
}


@dataclasses.dataclass(frozen=True)
class Filters:
    """Which jobs a ``*_all`` action takes: every field given must match.

    ``error_class`` (the failed execution's exception class, e.g. ``"builtins.ValueError"``,
    or its last part, ``"ValueError"``), ``failed_before`` and ``failed_after`` apply to failed
    jobs only. ``batch`` takes the jobs of a batch and of its children, at any depth.
    """

    queue: str | None = None
    job: str | None = None
    error_class: str | None = None
    failed_before: dt.datetime | None = None
    failed_after: dt.datetime | None = None
    batch: int | None = None

    def __post_init__(self) -> None:
        if self.batch is not None and (
            isinstance(self.batch, bool) or not isinstance(self.batch, int)
        ):
            raise TypeError(f"batch= is a batch id, not {self.batch!r}.")
        for name in ("failed_before", "failed_after"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, dt.datetime):
                    raise TypeError(f"{name}= must be a datetime, not {value!r}.")
                object.__setattr__(self, name, as_utc(value))

    def check_state(self, state: Waiting) -> None:
        """Refuse failure filters for jobs that haven't failed, rather than ignore them
        (``discard_all("scheduled", error_class=...)`` would discard every scheduled job).

        :raises ValueError: a failure filter is given for another state.
        """
        given = [name for name in _FAILURE_FILTERS if getattr(self, name) is not None]
        if state is not Waiting.FAILED and given:
            raise ValueError(
                f"{', '.join(given)} filter(s) failed jobs only; {state.value} jobs have no error."
            )

    def where(
        self, execution: sa.Table, batch_ids: t.Sequence[int] = ()
    ) -> list[sa.ColumnElement[bool]]:
        """The SQL conditions on ``execution`` joined with ``solidq_jobs``; ``batch_ids``: the
        family of ``batch`` (:func:`~flask_solidq.batches.children.family`)."""
        conditions: list[sa.ColumnElement[bool]] = []
        if self.batch is not None:
            conditions.append(JOBS.c.batch_id.in_(batch_ids))
        if self.queue is not None:
            conditions.append(JOBS.c.queue_name == self.queue)
        if self.job is not None:
            conditions.append(JOBS.c.class_name == self.job)
        if execution is FAILED:
            if self.failed_before is not None:
                conditions.append(FAILED.c.created_at < self.failed_before)
            if self.failed_after is not None:
                conditions.append(FAILED.c.created_at > self.failed_after)
        return conditions

    def matches_error(self, error: str | None) -> bool:
        """Whether a failed execution's ``error`` has the wanted exception class."""
        if self.error_class is None:
            return True
        error_class, _message = parse_error(error)
        return self.error_class in (error_class, error_class.rpartition(".")[2])


_FAILURE_FILTERS = ("error_class", "failed_before", "failed_after")


T = t.TypeVar("T")


# Retry.


def retry(engine: sa.Engine, job_ids: t.Iterable[int]) -> int:
    """Retry the failed jobs among ``job_ids``; return how many were retried."""
    return sum(_retry_batch(engine, batch) for batch in db.batched(list(job_ids), BATCH_SIZE))


def retry_all(engine: sa.Engine, filters: Filters = Filters()) -> int:
    """Retry every failed job matching ``filters``; return how many were retried."""
    return _until_done(
        lambda: sum(_retry_batch(engine, b) for b in _batches(engine, FAILED, filters))
    )


def _retry_batch(engine: sa.Engine, job_ids: t.Sequence[int]) -> int:
    return _deadlock_safe(_retry_in_transaction, engine, job_ids)


def _retry_in_transaction(engine: sa.Engine, job_ids: t.Sequence[int]) -> int:
    now = utcnow()
    with db.write(engine) as connection:
        ids = _lock(connection, FAILED, job_ids)
        if not ids:
            return 0
        runs = retry_payloads.runs_of_failures(connection, ids)
        # Pending again in its batch (before a concurrency limit may discard it, which
        # counts it done), reopening the batch if it had finished.
        job_ends.reopen(connection, ids, now)
        retry_payloads.reset_rule_counters(connection, ids, runs, now)
        retry_keys.take_current_keys(connection, ids, now)
        dispatch.make_ready(connection, _refs(connection, ids), now)
        db.notify(connection, db.READY_CHANNEL)
    return len(ids)


# Discard.


def discard(engine: sa.Engine, job_ids: t.Iterable[int]) -> int:
    """Discard the jobs among ``job_ids`` that are failed, scheduled, ready or blocked;
    return how many were discarded. Running and finished jobs are left alone.

    One state after another; a job discarded is not looked for in the next states, where on
    SQLite a job stored meanwhile (a batch's callback) may have taken its id."""
    remaining = list(job_ids)
    discarded = 0
    for state in Waiting:
        gone: set[int] = set()
        for batch in db.batched(remaining, BATCH_SIZE):
            gone.update(_deadlock_safe(_discard_in_transaction, engine, state, batch))
        discarded += len(gone)
        remaining = [job_id for job_id in remaining if job_id not in gone]
    return discarded


def discard_all(
    engine: sa.Engine, state: Waiting = Waiting.FAILED, filters: Filters = Filters()
) -> int:
    """Discard every job in ``state`` matching ``filters``; return how many.

    :raises ValueError: a failure filter is given for jobs that haven't failed.
    """
    filters.check_state(state)
    execution = _EXECUTIONS[state]
    return _until_done(
        lambda: sum(
            _discard_batch(engine, state, batch) for batch in _batches(engine, execution, filters)
        )
    )


#: The states ``discard_all(batch=...)`` takes by default: every job still pending in the
#: batch (so that it finishes), not its failed ones.
PENDING = (Waiting.SCHEDULED, Waiting.BLOCKED, Waiting.READY)


def discard_pending(engine: sa.Engine, filters: Filters) -> int:
    """Discard every scheduled, blocked or ready job matching ``filters``; return how many."""
    return sum(discard_all(engine, state, filters) for state in PENDING)


def discard_in(engine: sa.Engine, state: Waiting, job_ids: t.Sequence[int]) -> int:
    """Discard those of ``job_ids`` (at most :data:`BATCH_SIZE`: one transaction) still in
    ``state``; return how many: the dashboard's selected rows of one list."""
    if len(job_ids) > BATCH_SIZE:
        raise ValueError(f"discard_in takes at most {BATCH_SIZE} jobs, not {len(job_ids)}.")
    return _discard_batch(engine, state, job_ids)


def _discard_batch(engine: sa.Engine, state: Waiting, job_ids: t.Sequence[int]) -> int:
    return len(_deadlock_safe(_discard_in_transaction, engine, state, job_ids))


def _discard_in_transaction(
    engine: sa.Engine, state: Waiting, job_ids: t.Sequence[int]
) -> list[int]:
    """Discard those of ``job_ids`` in ``state``; return their ids."""
    with db.write(engine) as connection:
        ids = _lock(connection, _EXECUTIONS[state], job_ids)
        if not ids:
            return []
        refs = _refs(connection, ids) if state is Waiting.READY else []
        job_ends.discard(connection, ids, utcnow(), failed=state is Waiting.FAILED)
        if state is Waiting.READY:  # a ready job held its concurrency slot: give it back
            job_ends.let_go(connection, refs)
    return ids


# Run now.


def run_now(engine: sa.Engine, job_ids: t.Iterable[int]) -> int:
    """Make the scheduled jobs among ``job_ids`` due now; return how many."""
    return sum(_run_now_batch(engine, batch) for batch in db.batched(list(job_ids), BATCH_SIZE))


def _run_now_batch(engine: sa.Engine, job_ids: t.Sequence[int]) -> int:
    return _deadlock_safe(_run_now_in_transaction, engine, job_ids)


def _run_now_in_transaction(engine: sa.Engine, job_ids: t.Sequence[int]) -> int:
    now = utcnow()
    with db.write(engine) as connection:
        ids = _lock(connection, SCHEDULED, job_ids)
        if not ids:
            return 0
        executions.due_now(connection, ids, now)
        dispatch.make_ready(connection, _refs(connection, ids), now)
        db.notify(connection, db.READY_CHANNEL)
    return len(ids)


# Shared.

#: The most passes a ``*_all`` action makes over its jobs.
MAX_PASSES = 3


def _until_done(one_pass: t.Callable[[], int]) -> int:
    """Run ``one_pass`` again while it still changed jobs (up to :data:`MAX_PASSES`): a pass
    skips the rows another transaction holds, and when that transaction rolls back (a
    deadlock's victim, a failed action) the rows are still to do."""
    total = 0
    for _pass in range(MAX_PASSES):
        done = one_pass()
        total += done
        if not done:
            break
    return total


def _deadlock_safe(batch: t.Callable[..., T], *args: t.Any) -> T:
    """Run one batch's transaction, again if MySQL/MariaDB picks it as a deadlock's victim
    (two people acting at once, or an action beside workers): nothing of it was committed, and
    the next try acts only on the jobs still in the wanted state."""
    return db.retrying_deadlocks(functools.partial(batch, *args), attempts=10)


def _lock(connection: sa.Connection, execution: sa.Table, job_ids: t.Sequence[int]) -> list[int]:
    """Lock the rows of ``execution`` of ``job_ids``; return the ids of the jobs that have
    one (rows another transaction holds are skipped: it is acting on them)."""
    query = sa.select(execution.c.job_id).where(execution.c.job_id.in_(job_ids))
    return sorted(connection.scalars(db.for_update(query, skip_locked=True)))


def _refs(connection: sa.Connection, ids: list[int]) -> list[JobRef]:
    rows = connection.execute(
        sa.select(
            JOBS.c.id, JOBS.c.queue_name, JOBS.c.priority, JOBS.c.class_name, JOBS.c.concurrency_key
        )
        .where(JOBS.c.id.in_(ids))
        .order_by(JOBS.c.id)
    )
    return [
        JobRef(row.id, row.queue_name, row.priority, row.class_name, row.concurrency_key, None)
        for row in rows
    ]


def _batches(engine: sa.Engine, execution: sa.Table, filters: Filters) -> t.Iterator[list[int]]:
    """The ids of the jobs in ``execution`` matching ``filters``, in batches, by job id
    (keyset: each batch starts after the last id of the one before, so jobs acted on don't
    shift the next batch, and jobs that arrive meanwhile with higher ids are included)."""
    family: list[int] = []
    if filters.batch is not None:
        with db.read(engine) as connection:
            family = batches.family(connection, filters.batch)
    after = 0
    while True:
        columns = [execution.c.job_id]
        if execution is FAILED:
            columns.append(FAILED.c.error)
        query = (
            sa.select(*columns)
            .select_from(execution.join(JOBS, JOBS.c.id == execution.c.job_id))
            .where(execution.c.job_id > after, *filters.where(execution, family))
            .order_by(execution.c.job_id)
            .limit(BATCH_SIZE)
        )
        with db.read(engine) as connection:
            rows = connection.execute(query).all()
        if not rows:
            return
        after = rows[-1].job_id
        batch = [
            row.job_id
            for row in rows
            if execution is not FAILED or filters.matches_error(row.error)
        ]
        if batch:
            yield batch


def resolve(engine: sa.Engine, references: t.Iterable[int | str]) -> list[int]:
    """The row ids (``provider_job_id``) of ``references``: row ids as they are (an int, or a
    string of the digits 0-9), and ``job_id`` UUIDs looked up; unknown ones drop out, and so
    do numbers no id can be (negative, or past a ``bigint``: no job has them)."""
    ids: list[int] = []
    uuids: list[str] = []
    for reference in references:
        if isinstance(reference, bool) or not isinstance(reference, (int, str)):
            raise TypeError(f"A job is named by its provider_job_id or job_id, not {reference!r}.")
        if isinstance(reference, int):
            ids.extend([reference] if identifiers.is_fit_id(reference) else [])
        elif identifiers.looks_like_number(reference):
            parsed = identifiers.parse_id(reference)
            ids.extend([] if parsed is None else [parsed])
        elif not identifiers.has_nul(reference):
            uuids.append(reference)
    if uuids:
        with db.read(engine) as connection:
            query = sa.select(JOBS.c.id).where(JOBS.c.active_job_id.in_(uuids))
            ids.extend(connection.scalars(query))
    return sorted(set(ids))


def count(engine: sa.Engine, state: Waiting, filters: Filters = Filters()) -> int:
    """How many jobs in ``state`` match ``filters`` now (what a ``*_all`` action would take,
    barring jobs that change meanwhile): for a confirmation prompt."""
    filters.check_state(state)
    return sum(len(batch) for batch in _batches(engine, _EXECUTIONS[state], filters))

"""Every way a job ends, fails, is discarded or comes back from failing: the one caller of
those changes' writers (:mod:`flask_solidq.transitions.ends`), running the hooks every end
reaches in one order. In the change's transaction: the attempt history, the coalesce key, the
batch's counts; once it commits: the controls' FINISH hooks (:func:`let_go`), before the
signals the caller sends.

A batch's counters are right only if every change of a batch job's state reaches
:func:`flask_solidq.batches.counts.account`. Writing those changes here, and nowhere
else, makes that a property of the module instead of a habit of each caller: a finisher
storing outcomes, a dead worker's claims failed, a person's retry or discard, a concurrency
limit discarding or failing a job as it becomes due. ``tests/transitions/test_only_writers.py``
checks that no other module calls them; ``tests/operations/test_job_ends.py`` drives each
path with a batch job.

What each change counts in the batch:

========================  ============================================================
:func:`finish`            completed (finished, or discarded by a ``discard_on`` rule)
:func:`fail`              failed
:func:`discard`           completed, unless the job had failed (counted then already)
:func:`reopen`            pending again (a failed job retried by hand; reopens a batch
                          that had finished)
========================  ============================================================

A retry by a job's own rules, an interruption, a deferral by a rate limit and a release of a
stopping or dead worker's claims keep the job pending: they change nothing here.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import typing as t

import sqlalchemy as sa

from flask_solidq import batches
from flask_solidq import controls
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import JOBS
from flask_solidq.operations import attempts
from flask_solidq.storage import db
from flask_solidq.transitions import ends
from flask_solidq.values import JobRef

logger = logging.getLogger("flask_solidq")

#: Job ids by the batch each is in (None: in no batch), for the changes whose callers know
#: them already (a claimed job carries its batch id); the others read them.
BatchesOf = t.Mapping[int, "int | None"]

#: How one job's change counts in its batch: its batch id (None: in no batch) and what it
#: counts as (a :class:`~flask_solidq.batches.counts.Tally` field).
_Counted = tuple["int | None", str]


def store_outcomes(
    connection: sa.Connection,
    finished: BatchesOf,
    failures: t.Sequence[tuple[int, str]],
    failed: BatchesOf,
    started: t.Mapping[int, dt.datetime],
    now: dt.datetime,
    *,
    preserve_finished: bool,
) -> None:
    """A finisher's outcomes: finish the jobs of ``finished`` (whose runs started as
    ``started`` says; marked finished, or deleted when finished jobs aren't kept), and keep
    ``failures`` (job id, error JSON) as failed, their batches given by ``failed``. Counted
    completed and failed, under one lock of their batches."""
    counted = [*_finish(connection, finished, started, now, preserve_finished)]
    counted += _fail(connection, failures, failed, now)
    _count(connection, counted, now)


def fail(
    connection: sa.Connection, failures: t.Sequence[tuple[int, str]], now: dt.datetime
) -> None:
    """Keep jobs as failed executions, each with its error JSON (a dead worker's claims).
    Counted failed."""
    if failures:
        batches_of = batch_ids(connection, [job_id for job_id, _error in failures])
        _count(connection, _fail(connection, failures, batches_of, now), now)


def discard(
    connection: sa.Connection, job_ids: t.Sequence[int], now: dt.datetime, *, failed: bool
) -> None:
    """Delete the jobs ``job_ids`` with their executions and collected calls (foreign keys
    cascade). Counted completed, unless they had ``failed`` (counted so already)."""
    _count(connection, _discard(connection, job_ids, failed=failed), now)


def hold_back(
    connection: sa.Connection,
    discarded: t.Sequence[int],
    failures: t.Sequence[tuple[int, str]],
    now: dt.datetime,
) -> None:
    """What a control decided as jobs became due: delete ``discarded`` (counted completed)
    and keep ``failures`` as failed (counted failed), under one lock of their batches."""
    counted = [*_discard(connection, discarded, failed=False)]
    if failures:
        counted += _fail(connection, failures, batch_ids(connection, [i for i, _ in failures]), now)
    _count(connection, counted, now)


def reopen(connection: sa.Connection, job_ids: t.Sequence[int], now: dt.datetime) -> None:
    """Delete the failed executions of ``job_ids``, retried by hand: the caller gives them
    their next execution. Counted pending again, reopening a batch that had finished."""
    if job_ids:
        batches_of = batch_ids(connection, job_ids)
        ends.unfail(connection, job_ids)
        _count(connection, [(batch_id, "reopened") for batch_id in batches_of.values()], now)


def let_go(connection: sa.Connection, jobs: t.Sequence[JobRef]) -> None:
    """Once the caller's transaction commits, run the controls' FINISH hooks for ``jobs``,
    which gave up what they held (a concurrency slot: they finished, failed, were discarded
    while ready, or were deferred). The one caller of ``controls.finish``.

    After the commit, so a hook that fails can't undo an outcome; registered now, so it runs
    before the signals the caller sends once committed."""
    if jobs:
        hooks = functools.partial(_finish_hooks, connection.engine, list(jobs))
        db.after_commit_on(connection, hooks)


def finish_held(
    engine: sa.Engine,
    process_id: int,
    jobs: t.Sequence[JobRef],
    now: dt.datetime,
    *,
    preserve_finished: bool,
    deadlock_attempts: int,
) -> set[int] | None:
    """Finish jobs ``process_id`` holds on the dialect's own fast path, outside any
    transaction of the caller's (trying a deadlock ``deadlock_attempts`` times); return the ids
    finished, or None where the dialect has no such path (nothing written). For jobs of no
    batch that ran without failing: there is no batch to count nor failure to keep, so of
    the end's hooks only the controls' FINISH hooks run, after it."""
    finish = functools.partial(
        ends.finish_held,
        engine,
        process_id,
        [job.id for job in jobs],
        now,
        preserve_finished=preserve_finished,
    )
    finished = db.retrying_deadlocks(finish, attempts=deadlock_attempts)
    if finished:
        _finish_hooks(engine, [job for job in jobs if job.id in finished])
    return finished


def _finish_hooks(engine: sa.Engine, jobs: list[JobRef]) -> None:
    """The controls' FINISH hooks. A hook that fails is logged: the outcomes stand, and the
    dispatcher's maintenance frees what it left held."""
    try:
        controls.finish(engine, jobs)
    except Exception:  # noqa: BLE001 - after the commit, nothing is left to roll back
        logger.warning("SolidQ's FINISH hooks failed for %d jobs", len(jobs), exc_info=True)


def batch_ids(connection: sa.Connection, job_ids: t.Sequence[int]) -> dict[int, int | None]:
    """The batch of each of ``job_ids`` that is in one (one indexed read)."""
    rows = connection.execute(
        sa.select(JOBS.c.id, JOBS.c.batch_id).where(
            JOBS.c.id.in_(job_ids), JOBS.c.batch_id.is_not(None)
        )
    )
    return {row.id: row.batch_id for row in rows}


def _finish(
    connection: sa.Connection,
    finished: BatchesOf,
    started: t.Mapping[int, dt.datetime],
    now: dt.datetime,
    preserve_finished: bool,
) -> list[_Counted]:
    ends.finish(connection, list(finished), started, now, preserve_finished=preserve_finished)
    return [(batch_id, "completed") for batch_id in finished.values()]


def _fail(
    connection: sa.Connection,
    failures: t.Sequence[tuple[int, str]],
    batches_of: BatchesOf,
    now: dt.datetime,
) -> list[_Counted]:
    """Store ``failures`` and add each to its job's attempts
    (:mod:`~flask_solidq.operations.attempts`).

    A coalesced job that fails before its start freed its key (its worker died, or the
    release itself failed) would keep the key, and later calls would join a failed job: the
    key is freed here (the job keeps its calls, for a retry)."""
    if not failures:
        return []
    ends.fail(connection, failures, now)
    attempts.record(connection, list(failures), now)
    ids = [job_id for job_id, _error in failures]
    connection.execute(COALESCE_KEYS.delete().where(COALESCE_KEYS.c.job_id.in_(ids)))
    return [(batches_of.get(job_id), "failed") for job_id in ids]


def _discard(
    connection: sa.Connection, job_ids: t.Sequence[int], *, failed: bool
) -> list[_Counted]:
    if not job_ids:
        return []
    batches_of = {} if failed else batch_ids(connection, job_ids)
    ends.discard(connection, job_ids)
    return [(batch_id, "completed") for batch_id in batches_of.values()]


def _count(connection: sa.Connection, counted: t.Iterable[_Counted], now: dt.datetime) -> None:
    """Apply the changes to their batches: the one call of
    :func:`~flask_solidq.batches.counts.account`, once per transaction's change."""
    tallies = batches.tally_by_batch(counted)
    batches.account(connection.engine, connection, tallies, now)

"""Every way a job ends, fails, is discarded or comes back from failing: the only writers of
those changes, each counting it in the job's batch in the same transaction.

A batch's counters are right only if every change of a batch job's state reaches
:func:`flask_solidq.operations.batches.account`. Writing those changes here, and nowhere
else, makes that a property of the module instead of a habit of each caller: a finisher
storing outcomes, a dead worker's claims failed, a person's retry or discard, a concurrency
limit discarding or failing a job as it becomes due. ``tests/operations/test_job_ends.py``
checks that no other module writes them, and drives each path with a batch job.

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
import typing as t

import sqlalchemy as sa

from flask_solidq import batches
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.operations import attempts

#: Job ids by the batch each is in (None: in no batch), for the changes whose callers know
#: them already (a claimed job carries its batch id); the others read them.
BatchesOf = t.Mapping[int, "int | None"]

#: How one job's change counts in its batch: its batch id (None: in no batch) and what it
#: counts as (a :class:`~flask_solidq.operations.batches.Tally` field).
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
        connection.execute(FAILED.delete().where(FAILED.c.job_id.in_(job_ids)))
        _count(connection, [(batch_id, "reopened") for batch_id in batches_of.values()], now)


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
    done = list(finished)
    if not done:
        return []
    if preserve_finished:
        statement, params = _mark_finished(started, done)
        connection.execute(statement, {**params, "now": now})
    else:
        connection.execute(_DELETE_JOBS, {"ids": done})
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
    connection.execute(
        _INSERT_FAILED,
        [{"job_id": job_id, "error": error, "created_at": now} for job_id, error in failures],
    )
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
    connection.execute(JOBS.delete().where(JOBS.c.id.in_(job_ids)))
    return [(batch_id, "completed") for batch_id in batches_of.values()]


def _count(connection: sa.Connection, counted: t.Iterable[_Counted], now: dt.datetime) -> None:
    """Apply the changes to their batches: the one call of
    :func:`~flask_solidq.operations.batches.account`, once per transaction's change."""
    tallies = batches.tally_by_batch(counted)
    batches.account(connection.engine, connection, tallies, now)


def _mark_finished(
    started: t.Mapping[int, dt.datetime], done: list[int]
) -> tuple[sa.Update, dict[str, t.Any]]:
    """The one UPDATE that finishes ``done``, each with its run's start, and its parameters.

    The start is one parameter when the jobs share it, or a CASE with an arm (an ``IN``
    list) per distinct start. The group still costs one statement, and its text is compiled
    once per number of arms (bound parameters, not literals, so SQLAlchemy's cache serves
    it)."""
    by_start: dict[dt.datetime, list[int]] = {}
    for job_id in done:
        by_start.setdefault(started[job_id], []).append(job_id)
    if len(by_start) == 1:
        ((start, _ids),) = by_start.items()
        return _MARK_FINISHED_AT, {"ids": done, "started": start}
    params: dict[str, t.Any] = {"ids": done}
    for arm, (start, ids) in enumerate(by_start.items()):
        params[f"ids_{arm}"] = ids
        params[f"started_{arm}"] = start
    return _mark_finished_arms(len(by_start)), params


@functools.lru_cache(maxsize=16)
def _mark_finished_arms(arms: int) -> sa.Update:
    """:data:`_MARK_FINISHED` with a CASE of ``arms`` arms: ``ids_<n>`` started at
    ``started_<n>``."""
    whens = [
        (
            JOBS.c.id.in_(sa.bindparam(f"ids_{arm}", expanding=True)),
            sa.bindparam(f"started_{arm}", type_=_STARTED_AT_TYPE),
        )
        for arm in range(arms)
    ]
    return _MARK_FINISHED.values(started_at=sa.case(*whens))


_INSERT_FAILED = FAILED.insert()
_IDS: sa.BindParameter[t.Any] = sa.bindparam("ids", expanding=True)
_MARK_FINISHED = (
    JOBS.update()
    .where(JOBS.c.id.in_(_IDS))
    .values(finished_at=sa.bindparam("now"), updated_at=sa.bindparam("now"))
)
_STARTED_AT_TYPE = JOBS.c.started_at.type
_MARK_FINISHED_AT = _MARK_FINISHED.values(
    started_at=sa.bindparam("started", type_=_STARTED_AT_TYPE)
)
_DELETE_JOBS = JOBS.delete().where(JOBS.c.id.in_(_IDS))

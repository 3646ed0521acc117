"""The writers of a job's end: finished, failed, discarded, or its failure taken back.

Only :mod:`flask_solidq.operations.job_ends` calls these: it runs, in the same transaction,
the hooks every end must reach (attempt history, the coalesce key, the batch's counts).
``tests/transitions/test_only_writers.py`` holds that no other module calls them, and no
module outside this package writes these tables.
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.storage import db


def finish(
    connection: sa.Connection,
    job_ids: t.Sequence[int],
    started: t.Mapping[int, dt.datetime],
    now: dt.datetime,
    *,
    preserve_finished: bool,
) -> None:
    """Mark ``job_ids`` finished, each with its run's start from ``started`` (or delete them,
    when finished jobs aren't kept)."""
    done = list(job_ids)
    if not done:
        return
    if preserve_finished:
        statement, params = _mark_finished(started, done)
        connection.execute(statement, {**params, "now": now})
    else:
        connection.execute(_DELETE_JOBS, {"ids": done})


def finish_held(
    engine: sa.Engine,
    process_id: int,
    job_ids: list[int],
    now: dt.datetime,
    *,
    preserve_finished: bool,
) -> set[int] | None:
    """The dialect's own way to finish jobs ``process_id`` holds, outside any transaction of
    the caller's (:meth:`flask_solidq.storage.dialects.base.Dialect.finish_held`); the ids it
    finished, or None where the dialect has none."""
    return db.dialect(engine).finish_held(
        engine,
        process_id,
        job_ids,
        now,
        preserve_finished=preserve_finished,
        stamp_type=JOBS.c.finished_at.type,
    )


def fail(
    connection: sa.Connection, failures: t.Sequence[tuple[int, str]], now: dt.datetime
) -> None:
    """Keep each ``(job_id, error JSON)`` as a failed execution."""
    if failures:
        connection.execute(
            _INSERT_FAILED,
            [{"job_id": job_id, "error": error, "created_at": now} for job_id, error in failures],
        )


def discard(connection: sa.Connection, job_ids: t.Sequence[int]) -> None:
    """Delete jobs with their executions and collected calls (the foreign keys cascade)."""
    if job_ids:
        connection.execute(_DELETE_JOBS, {"ids": list(job_ids)})


def unfail(connection: sa.Connection, job_ids: t.Sequence[int]) -> None:
    """Delete the failed executions of ``job_ids`` (the caller gives them their next one)."""
    if job_ids:
        connection.execute(FAILED.delete().where(FAILED.c.job_id.in_(list(job_ids))))


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

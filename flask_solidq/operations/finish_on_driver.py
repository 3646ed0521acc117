"""A group of finished jobs stored on SQLite and MySQL/MariaDB on the driver's connection.

The finisher's commonest group is jobs that finished, of no batch: release the claims this
process still holds on them and mark those jobs finished, in one transaction. Through
SQLAlchemy's Connection its ``DELETE ... RETURNING`` and ``UPDATE`` (each with an expanding
``IN`` list) cost a third of a no-op job's CPU in a SQLite or MariaDB worker (cProfile:
about 55 µs a job, groups of a few jobs), for statements whose text depends only on how
many jobs and distinct starts the group holds. Here they are written once per shape and run
in :func:`flask_solidq.storage.driver_writes.transaction` (the same transaction, writer lock and
errors as the Connection's). PostgreSQL finishes such a group in one statement of its own
(:data:`flask_solidq.storage.dialects.postgres.FINISH`); everything else (failures, retries,
batches, a
caller's transaction, an engine with execution listeners) takes
:func:`flask_solidq.operations.finalize._store_held`.

What is stored is the same to the byte: ``now`` goes through the column's own bind
processor, and each job's start is its claim's ``created_at`` as the driver read it back
(SQLite's stored text, MySQL's ``DATETIME``), bound again unchanged.
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

from flask_solidq.models.tables import JOBS
from flask_solidq.storage import driver_writes

if t.TYPE_CHECKING:
    import sqlalchemy as sa


def finish_held(
    engine: sa.Engine, process_id: int, job_ids: list[int], now: dt.datetime
) -> set[int]:
    """Delete the claims ``process_id`` still holds on ``job_ids`` and mark those jobs
    finished at ``now``, each started when its claim was made, in one transaction; return the
    ids of the jobs it finished (the others had lost their claims).

    :raises sqlalchemy.exc.DBAPIError: the database failed (a deadlock among them, which the
        caller tries again); nothing was stored.
    """
    dialect = engine.dialect
    mark = "?" if dialect.paramstyle == "qmark" else "%s"
    held = (*job_ids, process_id)
    with driver_writes.transaction(engine) as run:
        if dialect.delete_returning:
            returning = " RETURNING job_id, created_at"
            rows = run(_delete_claims(mark, len(job_ids), returning), held).fetchall()
        else:  # MySQL (or an old SQLite): read the claims' starts, locked, then delete them
            lock = " FOR UPDATE" if dialect.name == "mysql" else ""
            rows = run(_read_claims(mark, len(job_ids), lock), held).fetchall()
            if rows:
                run(_delete_claims(mark, len(job_ids)), held)
        if rows:
            sql, params = _mark_finished(mark, _stamp(dialect)(now), rows)
            run(sql, params)
    return {job_id for job_id, _started in rows}


def _marks(mark: str, count: int) -> str:
    return ", ".join([mark] * count)


@functools.lru_cache(maxsize=256)
def _delete_claims(mark: str, count: int, returning: str = "") -> str:
    return (
        f"DELETE FROM solidq_claimed_executions WHERE job_id IN ({_marks(mark, count)})"
        f" AND process_id = {mark}{returning}"
    )


@functools.lru_cache(maxsize=256)
def _read_claims(mark: str, count: int, lock: str) -> str:
    return (
        "SELECT job_id, created_at FROM solidq_claimed_executions"
        f" WHERE job_id IN ({_marks(mark, count)}) AND process_id = {mark}{lock}"
    )


def _mark_finished(
    mark: str, stamp: t.Any, claims: t.Sequence[t.Sequence[t.Any]]
) -> tuple[str, tuple[t.Any, ...]]:
    """The UPDATE that finishes the jobs of ``claims`` (``(job_id, start)`` rows) at
    ``stamp``, and its parameters: the start is one parameter when the jobs share it, or a
    CASE with an arm (an ``IN`` list) per distinct start."""
    by_start: dict[t.Any, list[int]] = {}
    for job_id, started in claims:
        by_start.setdefault(started, []).append(job_id)
    groups = list(by_start.items())
    if len(groups) == 1:
        ((start, ids),) = groups
        return _finish_at_one_start(mark, len(ids)), (stamp, stamp, start, *ids)
    params: list[t.Any] = [stamp, stamp]
    for start, ids in groups:
        params += [*ids, start]
    finished = [job_id for _start, ids in groups for job_id in ids]
    arms = tuple(len(ids) for _start, ids in groups)
    return _finish_at_starts(mark, arms), (*params, *finished)


@functools.lru_cache(maxsize=256)
def _finish_at_one_start(mark: str, count: int) -> str:
    return (
        f"UPDATE solidq_jobs SET finished_at = {mark}, updated_at = {mark}, started_at = {mark}"
        f" WHERE id IN ({_marks(mark, count)})"
    )


@functools.lru_cache(maxsize=256)
def _finish_at_starts(mark: str, arms: tuple[int, ...]) -> str:
    """The UPDATE for jobs started at ``len(arms)`` distinct times, ``arms[n]`` of them at
    the n-th: its parameters are the stamp twice, each arm's ids and start, then every id."""
    whens = " ".join(f"WHEN id IN ({_marks(mark, count)}) THEN {mark}" for count in arms)
    return (
        f"UPDATE solidq_jobs SET finished_at = {mark}, updated_at = {mark},"
        f" started_at = CASE {whens} END WHERE id IN ({_marks(mark, sum(arms))})"
    )


@functools.lru_cache(maxsize=8)
def _stamp(dialect: sa.Dialect) -> t.Callable[[dt.datetime], t.Any]:
    """How the driver takes a time for ``finished_at``: the column's own bind processor."""
    process = driver_writes.bind_processor(JOBS.c.finished_at.type, dialect)
    return process if process is not None else (lambda value: value)

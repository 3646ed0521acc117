"""What SQLite's and MySQL/MariaDB's dialects share: their fast paths run on the driver's own
connection (:mod:`flask_solidq.storage.driver_writes`), and they have no statement that
chains writes (PostgreSQL's data-modifying CTEs).

* A single enqueue: its two fixed INSERTs, each compiled once, in one transaction on the
  pooled DBAPI connection.
* The finisher's commonest group, jobs that finished, of no batch: release the claims this
  process still holds on them and mark those jobs finished, in one transaction. Through
  SQLAlchemy's Connection its ``DELETE ... RETURNING`` and ``UPDATE`` (each with an expanding
  ``IN`` list) cost a third of a no-op job's CPU in a SQLite or MariaDB worker (about 55 µs a
  job, groups of a few jobs), for statements whose text depends only on how many jobs and
  distinct starts the group holds. Here they are written once per shape, with the driver's
  placeholders and every value bound, and run in
  :func:`flask_solidq.storage.driver_writes.transaction` (the same transaction, writer lock
  and errors as the Connection's). What is stored is the same to the byte: ``now`` goes
  through the column's own bind processor, and each job's start is its claim's
  ``created_at`` as the driver read it back (SQLite's stored text, MySQL's ``DATETIME``),
  bound again unchanged.

Either takes the ordinary way (the method answers None) on another driver, or when something
listens to the engine's statements (see :func:`flask_solidq.storage.driver_writes.applies`).
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq.storage import driver_writes
from flask_solidq.storage.dialects.base import DriverRow
from flask_solidq.storage.dialects.base import EnqueueStatements
from flask_solidq.storage.dialects.base import Row

#: A claim's job id and its ``created_at`` as the driver read it back.
Claim = tuple[int, object]


class DriverDialect:
    """The fast paths of SQLite and MySQL/MariaDB; each subclass gives its placeholder and
    how a claim is read for update when the database has no ``DELETE ... RETURNING``."""

    name: str
    writes_in_one_statement = False
    counts_from_index_alone = True

    #: The driver's positional placeholder (``sqlite3``'s ``?``, PyMySQL's ``%s``).
    placeholder: str
    #: What locks the claims read before they are deleted, where ``DELETE ... RETURNING``
    #: is missing.
    claims_lock: str

    def listens(self, engine: sa.Engine) -> bool:
        """No ``LISTEN``: this machine's sockets wake its processes instead."""
        return False

    def notify(self, connection: sa.Connection, channel: str, payload: str) -> None:
        """Nobody listens: nothing to send."""

    def prepare_counts(self, connection: sa.Connection) -> None:
        """Nothing to set up."""

    def counts_per_slot(
        self,
        stamp: sa.Column[dt.datetime],
        since: dt.datetime,
        slots: int,
        slot_minutes: int,
        where: t.Sequence[sa.ColumnElement[bool]],
    ) -> sa.Select[int, int] | None:
        """None: an index answers the grouped count alone."""
        return None

    def insert_with_execution(
        self, engine: sa.Engine, statements: EnqueueStatements, row: Row, now: dt.datetime
    ) -> int | None:
        """The job's INSERT, then its execution's, in one transaction on the driver's
        connection."""
        if not driver_writes.applies(engine):
            return None
        ready = row["scheduled_at"] <= now
        execution: dict[str, object] = {
            "queue_name": row["queue_name"],
            "priority": row["priority"],
            "created_at": now,
        }
        if not ready:
            execution["scheduled_at"] = row["scheduled_at"]
        return driver_writes.insert_with_execution(
            engine,
            statements.job,
            row,
            statements.ready if ready else statements.scheduled,
            execution,
        )

    def insert_all_autocommitted(
        self, engine: sa.Engine, rows: t.Sequence[Row], holds: t.Sequence[bool], now: dt.datetime
    ) -> list[int] | None:
        """None: no statement stores jobs with their executions."""
        return None

    def insert_all(
        self,
        connection: sa.Connection,
        rows: t.Sequence[Row],
        holds: t.Sequence[bool],
        now: dt.datetime,
    ) -> list[int]:
        raise NotImplementedError(f"{self.name} has no statement that chains inserts")

    def pipelines(self, engine: sa.Engine) -> bool:
        return False

    def insert_pipelined(
        self, engine: sa.Engine, chunks: t.Iterable[t.Sequence[Row]], now: dt.datetime
    ) -> list[int]:
        raise NotImplementedError(f"{self.name} has no pipeline mode")

    def claim_in_one_statement(
        self,
        engine: sa.Engine,
        params: t.Mapping[str, object],
        *,
        skip_locked: bool,
        checked: frozenset[str],
    ) -> list[DriverRow]:
        raise NotImplementedError(f"{self.name} has no statement that chains writes")

    def finish_held(
        self,
        engine: sa.Engine,
        process_id: int,
        job_ids: t.Sequence[int],
        now: dt.datetime,
        *,
        preserve_finished: bool,
        stamp_type: sa.types.TypeEngine[dt.datetime],
    ) -> set[int] | None:
        """On the driver's connection, kept jobs only: the claims deleted (read locked first
        where there's no ``DELETE ... RETURNING``), then one ``UPDATE`` of their jobs."""
        if not preserve_finished or not driver_writes.applies(engine):
            return None
        mark, count = self.placeholder, len(job_ids)
        held = (*job_ids, process_id)
        with driver_writes.transaction(engine) as run:
            if engine.dialect.delete_returning:
                returning = " RETURNING job_id, created_at"
                rows = run(_delete_claims(mark, count, returning), held).fetchall()
            else:  # MySQL (or an old SQLite): read the claims' starts, locked, then delete them
                rows = run(_read_claims(mark, count, self.claims_lock), held).fetchall()
                if rows:
                    run(_delete_claims(mark, count), held)
            if rows:
                sql, params = _mark_finished(mark, _stamp(engine.dialect, stamp_type)(now), rows)
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
    mark: str, stamp: object, claims: t.Sequence[Claim]
) -> tuple[str, tuple[object, ...]]:
    """The UPDATE that finishes the jobs of ``claims`` (``(job_id, start)`` rows) at
    ``stamp``, and its parameters: the start is one parameter when the jobs share it, or a
    CASE with an arm (an ``IN`` list) per distinct start."""
    by_start: dict[object, list[int]] = {}
    for job_id, started in claims:
        by_start.setdefault(started, []).append(job_id)
    groups = list(by_start.items())
    if len(groups) == 1:
        ((start, ids),) = groups
        return _finish_at_one_start(mark, len(ids)), (stamp, stamp, start, *ids)
    params: list[object] = [stamp, stamp]
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
def _stamp(
    dialect: sa.Dialect, type_: sa.types.TypeEngine[dt.datetime]
) -> t.Callable[[dt.datetime], object]:
    """How the driver takes a time for ``finished_at``: the column's own bind processor."""
    process = driver_writes.bind_processor(type_, dialect)
    return process if process is not None else (lambda value: value)

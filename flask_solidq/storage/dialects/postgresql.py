"""PostgreSQL's :class:`~flask_solidq.storage.dialects.base.Dialect`: its hand-written
statements, its wake-up channels, JIT off for the count pages, the minute bucket, and the
fast paths that run them on psycopg's own connection.

These few statements are PostgreSQL-only because they use what only PostgreSQL has,
data-modifying CTEs (one round trip where the other databases need four), ``unnest`` over
array parameters, and ``pg_notify``; each is text with bound parameters, built once. The
operations reach them through :data:`DIALECT`'s methods and never build SQL text themselves.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from flask_solidq.storage import fast_path
from flask_solidq.storage import pooler
from flask_solidq.storage.dialects import postgresql_bulk as bulk
from flask_solidq.storage.dialects.base import READY_CHANNEL as READY_CHANNEL
from flask_solidq.storage.dialects.base import SCHEDULED_CHANNEL as SCHEDULED_CHANNEL
from flask_solidq.storage.dialects.base import DriverRow
from flask_solidq.storage.dialects.base import EnqueueStatements
from flask_solidq.storage.dialects.base import Row
from flask_solidq.storage.dialects.base import added_values
from flask_solidq.storage.dialects.base import delete_in
from flask_solidq.storage.dialects.base import insert_counted
from flask_solidq.timing import naive_utc
from flask_solidq.values import ClaimedJob

#: Turns JIT compilation off for the rest of a transaction (see
#: :meth:`PostgreSQL.prepare_counts`).
JIT_OFF = "SET LOCAL jit = off"


def _counts_per_slot(
    stamp: sa.Column[dt.datetime],
    since: dt.datetime,
    slots: int,
    slot_minutes: int,
    where: t.Sequence[sa.ColumnElement[bool]],
) -> sa.Select[int, int]:
    """``(slot, rows)`` for each of ``slots`` slots of ``slot_minutes`` from ``since``: one
    count over ``stamp``'s index range per slot (the last open-ended, so a stamp after the
    window counts in it), rather than grouping every row by its slot. Each row is still
    visited (no index-only scan before VACUUM), but no longer hashed by a computed minute:
    a queue's day of 330,000 finished jobs took 110-125 ms so, 240-270 ms grouped."""
    slot = sa.func.generate_series(0, slots - 1).table_valued("slot").render_derived("slots")
    since_param = sa.bindparam("slots_since", since, type_=stamp.type)
    start = since_param + sa.func.make_interval(0, 0, 0, 0, 0, slot.c.slot * slot_minutes)
    end = sa.case(
        (slot.c.slot == slots - 1, sa.literal_column("'infinity'::timestamp")),
        else_=start + sa.func.make_interval(0, 0, 0, 0, 0, slot_minutes),
    )
    rows = (
        sa.select(sa.func.count())
        .select_from(stamp.table)
        .where(stamp >= start, stamp < end, *where)
        .scalar_subquery()
    )
    return sa.select(slot.c.slot, rows)


def _minutes_between(
    start: sa.ColumnElement[dt.datetime], end: sa.ColumnElement[dt.datetime]
) -> sa.ColumnElement[float]:
    """Whole minutes from ``start`` to ``end``. ``date_part`` gives the seconds as a float,
    where ``EXTRACT`` gives a numeric (PostgreSQL 14+), whose division cost a queue's page
    about 100 ms over the day's 300,000 finished jobs; a float holds a day's microseconds
    exactly enough, and a whole minute divides exactly."""
    return sa.func.floor(sa.func.date_part("epoch", end - start) / 60)


def _claim(by_queue: bool, skip_locked: bool, guarded: bool) -> sa.TextClause:
    """Lock up to ``:limit`` ready rows, delete them, insert their claims and read the jobs.

    Only while ``:process_id`` is registered: its row is locked first (``FOR KEY SHARE``,
    which a heartbeat's update doesn't wait for but a pruning's ``FOR UPDATE`` does), and a
    claim by a process whose row is gone claims nothing (see :mod:`flask_solidq.operations.claim`).

    ``guarded``: claim nothing if one of the locked rows is a job of the definitions named in
    ``:checked`` (those a control may defer at claim), and say so with one row whose
    ``checked`` is true; the caller then claims in a transaction that runs the hooks. A batch
    with no such job still costs one statement.

    The locked rows are deleted by their ``ctid`` (a TID scan: straight to each row, whatever
    the statistics say). Joined to the candidates by id (``USING``), the delete was planned
    from the table's statistics, and with none yet (a backlog enqueued since the last
    ``ANALYZE``) as a hash join over a scan of every ready row, or a scan filtering on the
    ids: a claim's cost grew with the backlog (150 jobs from 30,000 ready: 9-17 ms against
    3-5.6 ms). A locked row keeps its ``ctid`` until the statement ends, and ready rows are
    only ever inserted and deleted, never updated.
    """
    queue_filter = "AND queue_name = :queue_name" if by_queue else ""
    lock = "FOR UPDATE SKIP LOCKED" if skip_locked else "FOR UPDATE"
    columns = """jobs.id, jobs.active_job_id, jobs.class_name, jobs.queue_name, jobs.priority,
               jobs.arguments, jobs.concurrency_key, jobs.rate_limit_key, jobs.batch_id,
               jobs.rate_limit_charges, jobs.scheduled_at"""
    guard = guard_condition = guard_rows = ""
    if guarded:
        guard = """, checked AS (
            SELECT 1 FROM candidates JOIN solidq_jobs AS jobs ON jobs.id = candidates.job_id
            WHERE jobs.class_name = ANY(CAST(:checked AS varchar[]))
            LIMIT 1
        )"""
        guard_condition = "AND NOT EXISTS (SELECT 1 FROM checked)"
        nulls = ", ".join(["NULL"] * len(ClaimedJob._fields))
        guard_rows = f"""
        UNION ALL
        SELECT {nulls}, TRUE FROM checked"""
        columns += ", FALSE AS checked"
    return sa.text(
        f"""
        WITH registered AS (
            SELECT id FROM solidq_processes WHERE id = :process_id FOR KEY SHARE
        ), candidates AS (
            SELECT ctid, job_id FROM solidq_ready_executions
            WHERE EXISTS (SELECT 1 FROM registered)
            AND queue_name NOT IN (SELECT queue_name FROM solidq_pauses) {queue_filter}
            ORDER BY priority, job_id
            LIMIT :limit
            {lock}
        ){guard}, deleted AS (
            DELETE FROM solidq_ready_executions AS ready
            WHERE ready.ctid = ANY(ARRAY(SELECT ctid FROM candidates)) {guard_condition}
            RETURNING ready.job_id
        ), claimed AS (
            INSERT INTO solidq_claimed_executions (job_id, process_id, created_at)
            SELECT job_id, :process_id, :now FROM deleted
            RETURNING job_id
        )
        SELECT {columns}
        FROM solidq_jobs AS jobs JOIN claimed ON claimed.job_id = jobs.id{guard_rows}
        """
    )


#: The whole claim in one statement, by (one queue rather than all, SKIP LOCKED, guarded).
CLAIM = {
    (by_queue, skip_locked, guarded): _claim(by_queue, skip_locked, guarded)
    for by_queue in (False, True)
    for skip_locked in (False, True)
    for guarded in (False, True)
}


def _finish(preserve_finished: bool) -> sa.TextClause:
    """Release the claims ``:process_id`` still holds on ``:ids`` and finish their jobs."""
    finish = (
        "UPDATE solidq_jobs AS jobs SET finished_at = :now, updated_at = :now,"
        " started_at = released.created_at FROM released"
        if preserve_finished
        else "DELETE FROM solidq_jobs AS jobs USING released"
    )
    return sa.text(
        f"""
        WITH released AS (
            DELETE FROM solidq_claimed_executions
            WHERE process_id = :process_id AND job_id = ANY(CAST(:ids AS bigint[]))
            RETURNING job_id, created_at
        )
        {finish} WHERE jobs.id = released.job_id
        RETURNING jobs.id
        """
    )


#: Finishing a batch of jobs in one statement, by whether finished jobs are kept.
FINISH = {preserve: _finish(preserve) for preserve in (True, False)}

#: Wake the processes that ``LISTEN`` on ``:channel`` (on any machine): sent inside a
#: transaction, it is delivered when that transaction commits, and not at all if it rolls back.
NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")


def id_array(ids: t.Iterable[int]) -> str:
    """``ids`` as a PostgreSQL array literal, for ``ANY(CAST(:ids AS bigint[]))``.

    A plain string parameter: the driver's own list adapter quotes every element through a
    regular expression, which costs more than the statement it feeds.
    """
    return "{" + ",".join(str(int(id_)) for id_ in ids) + "}"


def _ids(rows: t.Iterable[DriverRow]) -> list[int]:
    return [int(id_) for (id_,) in rows]


class PostgreSQL:
    """PostgreSQL (see the module's docstring); psycopg 3 takes the fast paths
    (:mod:`flask_solidq.storage.fast_path`), any other driver the same statements through
    SQLAlchemy's Connection."""

    name = "postgresql"
    writes_in_one_statement = True
    counts_from_index_alone = False
    #: ``clock_timestamp()``, the time at the moment it is read (``now()`` would be the
    #: transaction's start, older than a lock the transaction waited for).
    clock: sa.TextClause | None = sa.text("SELECT clock_timestamp()")

    def listens(self, engine: sa.Engine) -> bool:
        """Through psycopg 3; behind a pooler, only with a direct URL to listen on (see
        :func:`flask_solidq.storage.pooler.listen_engine`)."""
        return engine.dialect.driver == "psycopg" and pooler.is_heard(engine)

    def notify(self, connection: sa.Connection, channel: str, payload: str) -> None:
        connection.execute(NOTIFY, {"channel": channel, "payload": payload})

    def prepare_counts(self, connection: sa.Connection) -> None:
        """JIT compilation off for the transaction: such counts probe the jobs' primary key
        once per execution row, which the planner prices high enough to JIT-compile, and
        compiling cost 20-700 ms of a page that runs in tens of milliseconds without it."""
        connection.exec_driver_sql(JIT_OFF)

    def minutes_between(
        self, start: sa.ColumnElement[dt.datetime], end: sa.ColumnElement[dt.datetime]
    ) -> sa.ColumnElement[float]:
        return _minutes_between(start, end)

    def counts_per_slot(
        self,
        stamp: sa.Column[dt.datetime],
        since: dt.datetime,
        slots: int,
        slot_minutes: int,
        where: t.Sequence[sa.ColumnElement[bool]],
    ) -> sa.Select[int, int] | None:
        return _counts_per_slot(stamp, since, slots, slot_minutes, where)

    def insert_ignoring_duplicates(
        self, connection: sa.Connection, table: sa.Table, rows: t.Sequence[t.Mapping[str, object]]
    ) -> int:
        """``ON CONFLICT DO NOTHING``, counted by its ``RETURNING``."""
        statement = postgresql.insert(table).on_conflict_do_nothing()
        return insert_counted(connection, statement, table, rows)

    def delete_by_ids(
        self, connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]
    ) -> None:
        delete_in(connection, table, ids)

    def add_to_rows(
        self,
        connection: sa.Connection,
        table: sa.Table,
        rows: t.Sequence[t.Mapping[str, object]],
        *,
        keys: t.Sequence[str],
        maxima: t.Sequence[str],
    ) -> None:
        """``ON CONFLICT DO UPDATE``."""
        statement = postgresql.insert(table)
        statement = statement.on_conflict_do_update(
            index_elements=list(keys),
            set_=added_values(table, statement.excluded, keys, maxima, sa.func.greatest),
        )
        connection.execute(statement, list(rows))

    def insert_with_execution(
        self, engine: sa.Engine, statements: EnqueueStatements, row: Row, now: dt.datetime
    ) -> int:
        """One autocommitted statement (the job's insert feeds its execution's), on psycopg's
        connection through :func:`flask_solidq.storage.fast_path.fetch_autocommitted`."""
        due = row["scheduled_at"] <= now
        statement = statements.job_with_ready if due else statements.job_with_scheduled
        params = {
            name: naive_utc(value) if isinstance(value, dt.datetime) else value
            for name, value in row.items()
        }
        params["execution_created_at"] = naive_utc(now)
        ((job_id,),) = fast_path.fetch_autocommitted(engine, statement, params)
        return int(job_id)

    def insert_all_autocommitted(
        self, engine: sa.Engine, rows: t.Sequence[Row], holds: t.Sequence[bool], now: dt.datetime
    ) -> list[int] | None:
        """The text statement of :mod:`~flask_solidq.storage.dialects.postgresql_bulk` in
        autocommit, for at most one chunk: a statement is atomic and durable as a transaction
        of its own, and this saves the round trips of ``BEGIN`` and ``COMMIT``, two of a bulk
        enqueue's three."""
        fits = len(rows) <= bulk.CHUNK and not bulk.keyed(rows, holds)
        statement = bulk.as_text(rows, now) if fits else None
        if statement is None:
            return None
        return _ids(fast_path.fetch_autocommitted(engine, statement[0], statement[1]))

    def insert_all(
        self,
        connection: sa.Connection,
        rows: t.Sequence[Row],
        holds: t.Sequence[bool],
        now: dt.datetime,
    ) -> list[int]:
        """One statement of :mod:`~flask_solidq.storage.dialects.postgresql_bulk` per chunk:
        the text one for a chunk whose jobs no control keys, the arrays one for any other."""
        ids: list[int] = []
        for first in range(0, len(rows), bulk.CHUNK):
            chunk = rows[first : first + bulk.CHUNK]
            chunk_holds = holds[first : first + bulk.CHUNK]
            text = None if bulk.keyed(chunk, chunk_holds) else bulk.as_text(chunk, now)
            statement, params, binary = text or bulk.as_arrays(chunk, chunk_holds, now)
            result = fast_path.fetch_in_transaction(connection, statement, params, binary=binary)
            ids.extend(_ids(result))
        return ids

    def pipelines(self, engine: sa.Engine) -> bool:
        return fast_path.pipelines(engine)

    def insert_pipelined(
        self, engine: sa.Engine, chunks: t.Iterable[t.Sequence[Row]], now: dt.datetime
    ) -> list[int]:
        """Each chunk's statement is sent as the one before runs
        (:func:`flask_solidq.storage.fast_path.fetch_pipelined`), and the whole enqueue takes
        one round trip: the client builds a chunk's rows while the server inserts the chunk
        before. A row that can't be built rolls back what was sent."""
        statements = (
            bulk.as_text(rows, now) or bulk.as_arrays(rows, [False] * len(rows), now)
            for rows in chunks
        )
        results = fast_path.fetch_pipelined(engine, statements)
        return [id_ for result in results for id_ in _ids(result)]

    def claim_in_one_statement(
        self,
        engine: sa.Engine,
        params: t.Mapping[str, object],
        *,
        skip_locked: bool,
        checked: frozenset[str],
    ) -> list[DriverRow]:
        """:data:`CLAIM`'s statement for this claim, in autocommit."""
        statement = CLAIM[(params["queue_name"] is not None, skip_locked, bool(checked))]
        values = dict(params)
        if checked:
            values["checked"] = sorted(checked)
        return fast_path.fetch_autocommitted(engine, statement, values)

    def finish_held(
        self,
        engine: sa.Engine,
        process_id: int,
        job_ids: t.Sequence[int],
        now: dt.datetime,
        *,
        preserve_finished: bool,
        stamp_type: sa.types.TypeEngine[dt.datetime],
    ) -> set[int]:
        """:data:`FINISH`'s statement, in autocommit."""
        params = {"process_id": process_id, "ids": id_array(job_ids), "now": naive_utc(now)}
        rows = fast_path.fetch_autocommitted(engine, FINISH[preserve_finished], params)
        return {job_id for (job_id,) in rows}


#: PostgreSQL's dialect.
DIALECT = PostgreSQL()

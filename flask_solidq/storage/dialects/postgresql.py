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
import operator
import typing as t

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from flask_solidq.storage import fast_path
from flask_solidq.storage import pooler
from flask_solidq.storage.dialects.base import READY_CHANNEL as READY_CHANNEL
from flask_solidq.storage.dialects.base import SCHEDULED_CHANNEL as SCHEDULED_CHANNEL
from flask_solidq.storage.dialects.base import DriverRow
from flask_solidq.storage.dialects.base import EnqueueStatements
from flask_solidq.storage.dialects.base import Row
from flask_solidq.storage.dialects.base import delete_in
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
               jobs.rate_limit_charges"""
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

#: The ``solidq_jobs`` columns :data:`BULK_ENQUEUE` takes as arrays (``unnest``), with their
#: types: every job's, then the controls' keys.
_BULK_COLUMNS = (
    ("queue_name", "varchar"),
    ("class_name", "varchar"),
    ("arguments", "text"),
    ("priority", "integer"),
    ("active_job_id", "varchar"),
    ("scheduled_at", "timestamp"),
    ("concurrency_key", "varchar"),
    ("rate_limit_key", "varchar"),
    ("rate_limit_charges", "text"),
)


def _bulk_enqueue() -> sa.TextClause:
    """Insert up to 10,000 jobs and their executions in one statement; return their ids in
    the order given.

    The rows travel as one array per column (``unnest``), so the statement stays a few lines
    long whatever the batch size; the jobs of one bulk enqueue share ``:batch_id`` (the batch
    being enqueued into, or none). Each job's id is drawn from the table's sequence in
    ``input`` (``MATERIALIZED``: once per row, as ``nextval`` is volatile), so the executions
    take it from there: no join of the new jobs back to their input, and the ids come back in
    input order without a key to match them by. Jobs whose ``holds`` is true (a control may
    hold them back when they become ready) get no ready row.
    """
    names = [name for name, _type in _BULK_COLUMNS]
    arrays = ", ".join(f"CAST(:{name} AS {type_}[])" for name, type_ in _BULK_COLUMNS)
    listed = ", ".join(names)
    rows = f"""
            SELECT nextval((SELECT pg_get_serial_sequence('solidq_jobs', 'id'))) AS id, *
            FROM unnest({arrays}, CAST(:holds AS boolean[])) WITH ORDINALITY
                AS input ({listed}, holds, position)"""
    return _bulk_statement(rows, listed, held=" AND NOT holds")


def _bulk_enqueue_text() -> sa.TextClause:
    """:func:`_bulk_enqueue` for a chunk no control keys, its columns sent as text: each
    column's values joined by ``:separator`` (a character none of them holds), split by
    ``string_to_array`` in the server, ``priority`` joined by commas, and ``scheduled_at``
    ``'now'`` for a job due at ``:now`` (the enqueue's clock, not PostgreSQL's ``'now'``:
    the ``CASE`` takes it before any cast).

    One string a column instead of an array: psycopg writes a binary array element by element
    in Python, 2 µs a job of a bulk enqueue's CPU; ``str.join`` doesn't loop in Python, and
    the server's ``string_to_array`` costs it no more than reading the arrays (measured).
    """
    texts = ", ".join(
        f"string_to_array(CAST(:{name} AS text), CAST(:separator AS text))"
        for name in ("queue_name", "class_name", "arguments")
    )
    priorities = "CAST(string_to_array(CAST(:priority AS text), ',') AS integer[])"
    ids = "string_to_array(CAST(:active_job_id AS text), CAST(:separator AS text))"
    due = "string_to_array(CAST(:scheduled_at AS text), CAST(:separator AS text))"
    rows = f"""
            SELECT nextval((SELECT pg_get_serial_sequence('solidq_jobs', 'id'))) AS id,
                   queue_name, class_name, arguments, priority, active_job_id,
                   CASE due WHEN 'now' THEN :now ELSE CAST(due AS timestamp) END AS scheduled_at,
                   position
            FROM unnest({texts}, {priorities}, {ids}, {due}) WITH ORDINALITY
                AS input (queue_name, class_name, arguments, priority, active_job_id, due,
                          position)"""
    listed = "queue_name, class_name, arguments, priority, active_job_id, scheduled_at"
    return _bulk_statement(rows, listed, held="")


def _bulk_statement(rows: str, listed: str, *, held: str) -> sa.TextClause:
    """A bulk enqueue's statement around ``rows``, the query of its ``input``: each job's id
    (drawn from the sequence), the ``listed`` columns of ``solidq_jobs`` and its ``position``;
    the ready rows' condition ends with ``held``."""
    return sa.text(
        f"""
        WITH input AS MATERIALIZED ({rows}
        ), new_jobs AS (
            INSERT INTO solidq_jobs (id, {listed}, batch_id, created_at, updated_at)
            SELECT id, {listed}, CAST(:batch_id AS bigint), :now, :now FROM input
        ), ready AS (
            INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)
            SELECT id, queue_name, priority, :now FROM input
            WHERE scheduled_at <= :now{held}
        ), scheduled AS (
            INSERT INTO solidq_scheduled_executions (job_id, queue_name, priority, scheduled_at,
                                                     created_at)
            SELECT id, queue_name, priority, scheduled_at, :now FROM input
            WHERE scheduled_at > :now
        )
        SELECT id FROM input ORDER BY position
        """
    )


#: A bulk enqueue's statements: :data:`BULK_ENQUEUE_TEXT` for a chunk with no job a control
#: keys (its columns joined as text, see :func:`joined_columns`), :data:`BULK_ENQUEUE` for
#: any other (its columns as arrays, the controls' among them).
BULK_ENQUEUE = _bulk_enqueue()
BULK_ENQUEUE_TEXT = _bulk_enqueue_text()

#: The columns :data:`BULK_ENQUEUE` takes as arrays, besides ``holds``.
BULK_ENQUEUE_COLUMNS = tuple(name for name, _type in _BULK_COLUMNS)
#: The columns a chunk fits :data:`BULK_ENQUEUE_TEXT` without: None in every row, and no job
#: held.
BULK_ENQUEUE_CONTROL_COLUMNS = ("concurrency_key", "rate_limit_key", "rate_limit_charges")

#: The parameters of :data:`BULK_ENQUEUE` that are arrays: sent in binary format.
BULK_ENQUEUE_ARRAYS = (*BULK_ENQUEUE_COLUMNS, "holds")

#: What :data:`BULK_ENQUEUE_TEXT` may split its columns by: control characters, which no
#: payload holds (JSON escapes them), nor any name but one made to.
_SEPARATORS = "\x1f\x1e\x1d\x1c" + "".join(map(chr, range(1, 9)))


def joined_columns(columns: dict[str, list[str]]) -> dict[str, str] | None:
    """:data:`BULK_ENQUEUE_TEXT`'s parameters for a chunk's text columns (``scheduled_at``
    among them, ``'now'`` or ISO text): each joined by the first separator none of the values
    holds, which it also gives; None when each separator is in some value, or a column would
    join to an empty string (which ``string_to_array`` reads as no element at all)."""
    for separator in _SEPARATORS:
        joined = {name: separator.join(values) for name, values in columns.items()}
        fits = all(
            text and text.count(separator) == len(columns[name]) - 1
            for name, text in joined.items()
        )
        if fits:
            return {**joined, "separator": separator}
    return None


#: Wake the processes that ``LISTEN`` on ``:channel`` (on any machine): sent inside a
#: transaction, it is delivered when that transaction commits, and not at all if it rolls back.
NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")


def id_array(ids: t.Iterable[int]) -> str:
    """``ids`` as a PostgreSQL array literal, for ``ANY(CAST(:ids AS bigint[]))``.

    A plain string parameter: the driver's own list adapter quotes every element through a
    regular expression, which costs more than the statement it feeds.
    """
    return "{" + ",".join(str(int(id_)) for id_ in ids) + "}"


#: The most jobs one bulk enqueue statement inserts.
CHUNK = 10_000

#: A chunk's statement, its parameters, and those of them sent in binary format.
_Statement = tuple[sa.TextClause, dict[str, object], t.Collection[str]]

_control_keys = operator.itemgetter(*BULK_ENQUEUE_CONTROL_COLUMNS)
_NO_CONTROL_KEYS = (None,) * len(BULK_ENQUEUE_CONTROL_COLUMNS)
_TEXT_COLUMNS = ("queue_name", "class_name", "arguments", "active_job_id")


def _keyed(chunk: t.Sequence[Row], holds: t.Sequence[bool]) -> bool:
    """Whether a job of ``chunk`` has a control's key, or may be held back (``holds``)."""
    return any(holds) or {*map(_control_keys, chunk)} != {_NO_CONTROL_KEYS}


def _as_text(chunk: t.Sequence[Row], now: dt.datetime) -> _Statement | None:
    """:data:`BULK_ENQUEUE_TEXT` for a chunk no control keys, or None when its values leave
    no separator to join them by."""
    columns = {name: list(map(operator.itemgetter(name), chunk)) for name in _TEXT_COLUMNS}
    # Most jobs are due at once: their scheduled_at is ``now`` itself.
    columns["scheduled_at"] = [
        "now" if row["scheduled_at"] is now else naive_utc(row["scheduled_at"]).isoformat(" ")
        for row in chunk
    ]
    joined = joined_columns(columns)
    if joined is None:
        return None
    params: dict[str, object] = {
        **joined,
        "priority": ",".join(map(int.__repr__, map(operator.itemgetter("priority"), chunk))),
        "batch_id": chunk[0]["batch_id"],
        "now": naive_utc(now),
    }
    return BULK_ENQUEUE_TEXT, params, ()


def _as_arrays(chunk: t.Sequence[Row], holds: t.Sequence[bool], now: dt.datetime) -> _Statement:
    """:data:`BULK_ENQUEUE` for a chunk: every column an array, sent in binary format."""
    naive_now = naive_utc(now)
    columns: dict[str, list[t.Any]] = {
        name: [row[name] for row in chunk] for name in BULK_ENQUEUE_COLUMNS
    }
    columns["scheduled_at"] = [
        naive_now if value is now else naive_utc(value) for value in columns["scheduled_at"]
    ]
    params: dict[str, object] = {
        **columns,
        "holds": list(holds),
        "batch_id": chunk[0]["batch_id"],
        "now": naive_now,
    }
    return BULK_ENQUEUE, params, BULK_ENQUEUE_ARRAYS


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
        """``ON CONFLICT DO NOTHING``; RETURNING counts what was inserted (the driver's
        rowcount doesn't, for many rows)."""
        key = next(iter(table.primary_key.columns))
        statement = postgresql.insert(table).on_conflict_do_nothing().returning(key)
        return len(connection.execute(statement, rows).all())

    def delete_by_ids(
        self, connection: sa.Connection, table: sa.Table, ids: t.Sequence[int]
    ) -> None:
        delete_in(connection, table, ids)

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
        """:data:`BULK_ENQUEUE_TEXT` in autocommit, at most :data:`CHUNK` jobs: a statement
        is atomic and durable as a transaction of its own, and this saves the round trips of
        ``BEGIN`` and ``COMMIT``, two of a bulk enqueue's three."""
        fits = len(rows) <= CHUNK and not _keyed(rows, holds)
        statement = _as_text(rows, now) if fits else None
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
        """One statement per :data:`CHUNK` jobs. The rows travel as one value per column
        (its values joined as text, or an array: ``unnest``), so the statement stays a few
        lines long whatever the number of jobs: nothing to render or parse per row. A chunk
        whose jobs no control keys takes :data:`BULK_ENQUEUE_TEXT`, any other
        :data:`BULK_ENQUEUE`, with the controls' columns."""
        ids: list[int] = []
        for first in range(0, len(rows), CHUNK):
            chunk, chunk_holds = rows[first : first + CHUNK], holds[first : first + CHUNK]
            keyed = _keyed(chunk, chunk_holds)
            statement, params, binary = (None if keyed else _as_text(chunk, now)) or _as_arrays(
                chunk, chunk_holds, now
            )
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
            _as_text(rows, now) or _as_arrays(rows, [False] * len(rows), now) for rows in chunks
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

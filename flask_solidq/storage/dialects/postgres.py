"""What PostgreSQL needs that SQLAlchemy Core doesn't render for it: its hand-written
statements, its wake-up channels, JIT off for the count pages and the minute bucket.

Everything else is SQLAlchemy Core, which renders for each dialect (MySQL's and SQLite's own
needs are in :mod:`~flask_solidq.storage.dialects.mysql` and
:mod:`~flask_solidq.storage.dialects.sqlite`). These few statements are
PostgreSQL-only because they use what only PostgreSQL has, data-modifying CTEs (one round trip
where the other databases need four), ``unnest`` over array parameters, and ``pg_notify``.
The operations pick them through :mod:`flask_solidq.storage.db`'s capability checks
(``supports_insert_in_cte``) and never build SQL text themselves.
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq.values import ClaimedJob

#: The channels ``LISTEN``/``NOTIFY`` wake-ups travel on (see
#: :mod:`flask_solidq.processes.job_notices`): jobs became ready (workers listen), a job was
#: scheduled for the time in the payload (dispatchers listen).
READY_CHANNEL = "solidq_ready"
SCHEDULED_CHANNEL = "solidq_scheduled"

#: Turns JIT compilation off for the rest of a transaction (see
#: :func:`flask_solidq.storage.db.read_for_counts`).
JIT_OFF = "SET LOCAL jit = off"


def counts_per_slot(
    stamp: sa.Column[dt.datetime],
    since: dt.datetime,
    slots: int,
    slot_minutes: int,
    where: t.Sequence[sa.ColumnElement[bool]],
) -> sa.Select[t.Any]:
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


def minutes_between(
    start: sa.ColumnElement[dt.datetime], end: sa.ColumnElement[dt.datetime]
) -> sa.ColumnElement[t.Any]:
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

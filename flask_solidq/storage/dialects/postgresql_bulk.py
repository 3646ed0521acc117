"""PostgreSQL's bulk enqueue: up to :data:`CHUNK` jobs and their executions in one
statement, the rows travelling as one value per column (``unnest``), so the statement stays a
few lines long whatever the number of jobs: nothing to render or parse per row. A chunk no
control keys takes :data:`BULK_ENQUEUE_TEXT` (its columns joined as text), any other
:data:`BULK_ENQUEUE` (arrays, the controls' columns among them). Run by
:class:`flask_solidq.storage.dialects.postgresql.PostgreSQL`.
"""

from __future__ import annotations

import datetime as dt
import operator
import typing as t

import sqlalchemy as sa

from flask_solidq.storage.dialects.base import Row
from flask_solidq.timing import naive_utc

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


#: The most jobs one bulk enqueue statement inserts.
CHUNK = 10_000

#: A chunk's statement, its parameters, and those of them sent in binary format.
Statement = tuple[sa.TextClause, dict[str, object], t.Collection[str]]

_control_keys = operator.itemgetter(*BULK_ENQUEUE_CONTROL_COLUMNS)
_NO_CONTROL_KEYS = (None,) * len(BULK_ENQUEUE_CONTROL_COLUMNS)
_TEXT_COLUMNS = ("queue_name", "class_name", "arguments", "active_job_id")


def keyed(chunk: t.Sequence[Row], holds: t.Sequence[bool]) -> bool:
    """Whether a job of ``chunk`` has a control's key, or may be held back (``holds``)."""
    return any(holds) or {*map(_control_keys, chunk)} != {_NO_CONTROL_KEYS}


def as_text(chunk: t.Sequence[Row], now: dt.datetime) -> Statement | None:
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


def as_arrays(chunk: t.Sequence[Row], holds: t.Sequence[bool], now: dt.datetime) -> Statement:
    """:data:`BULK_ENQUEUE` for a chunk: every column an array, sent in binary format."""
    naive_now = naive_utc(now)
    # Any: the values of a column of job rows (Row), each column of its own type.
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

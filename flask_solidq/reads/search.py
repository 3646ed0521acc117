"""Searching the jobs of one state for people: by id, by ``job_id``, or by a text found in
their arguments or (failed jobs) their error. Read-only; behind the dashboard's search box.

A text is never found inside a value ``SOLIDQ_FILTER_ARGUMENTS`` hides: the page would show
the job, the value ``[FILTERED]``, and so confirm a guess of the secret. Such matches are read
and dropped, so a page may hold fewer jobs than its size; its cursor still leads on.

An id or a ``job_id`` is an index lookup. A text is a substring match that no index serves,
so it is **bounded**: one page scans at most :data:`SCAN_LIMIT` jobs of the filter (the
newest, below the page's keyset cursor) and says when it stopped there, as Mission Control
does; the next page scans the next ones. A page costs the same at the millionth job as at
the first, whatever the text.

The queue and job filters offer the names that exist (:func:`queue_names`,
:func:`job_names`): each name found by one index seek past the last, so the cost follows the
names, never the jobs.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import typing as t

import sqlalchemy as sa

from flask_solidq import argument_filter
from flask_solidq.definitions import arguments
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.reads import browse

#: The most jobs one page of a text search reads.
SCAN_LIMIT = 10_000
#: The longest text a search takes (a job id is 36 characters; an argument's value, a few
#: words).
MAX_QUERY = 200
#: The most names a filter offers.
MAX_NAMES = 100

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_DIGITS = re.compile(r"[0-9]+")


class Kind(str, enum.Enum):
    """What a search's text is taken for."""

    ID = "id"
    JOB_ID = "job_id"
    TEXT = "text"


def parse(text: str) -> tuple[Kind, str]:
    """What ``text`` is taken for, and what is looked for: digits are a row id
    (``provider_job_id``); a UUID is a ``job_id``; anything else is looked for in the
    arguments and errors, and so is a text in double quotes, without them (``"42"``: an
    argument's value that is a number, which bare would be an id)."""
    if len(text) > 2 and text[0] == text[-1] == '"':
        return Kind.TEXT, text[1:-1]
    if _DIGITS.fullmatch(text):
        return Kind.ID, text
    if _UUID.fullmatch(text):
        return Kind.JOB_ID, text
    return Kind.TEXT, text


@dataclasses.dataclass(frozen=True)
class Filter:
    """The jobs a list or a search is of: a state, and optionally a queue and a job name."""

    state: browse.State
    queue: str | None = None
    job: str | None = None


@dataclasses.dataclass(frozen=True)
class Found:
    """A page of a search."""

    jobs: list[browse.JobSummary]
    #: How many jobs the page read (a text search; for an id, the jobs found).
    scanned: int
    #: The text search stopped at :data:`SCAN_LIMIT` jobs: there may be more matches past them.
    bounded: bool
    #: The keyset cursor of the next page (``before``), or None on the last one.
    next_before: int | None


def search(
    connection: sa.Connection,
    where: Filter,
    text: str,
    *,
    before: int | None = None,
    limit: int = 50,
    scan: int | None = None,
) -> Found:
    """Up to ``limit`` jobs of ``where`` matching ``text`` (see :func:`parse`), newest
    first, with ids below ``before``; a text read in at most ``scan`` jobs (by default
    :data:`SCAN_LIMIT`)."""
    kind, text = parse(text)
    if kind is not Kind.TEXT:
        query = _jobs(where).where(_same_job(kind, text)).order_by(JOBS.c.id.desc()).limit(limit)
        jobs = _summaries(connection, query, where.state)
        return Found(jobs, len(jobs), bounded=False, next_before=None)
    return _text_search(connection, where, text, before, limit, scan or SCAN_LIMIT)


def _text_search(
    connection: sa.Connection,
    where: Filter,
    text: str,
    before: int | None,
    limit: int,
    scan: int,
) -> Found:
    """The matches among the newest ``scan`` jobs of ``where`` below ``before``, in one
    statement that reads them once: they are read in a derived table (a LIMIT inside ``IN``
    is one MySQL refuses), counted (with the lowest id: the next page's cursor) by window
    functions over it, and sorted matches first, so the rows that come back are the page's
    matches (and, past them, rows that only carry the count)."""
    in_arguments = JOBS.c.arguments.icontains(text, autoescape=True)
    matches = [in_arguments]
    if where.state is browse.State.FAILED:
        matches.append(FAILED.c.error.icontains(text, autoescape=True))
    shown = argument_filter.current()
    # Matched in the window, so what the window functions keep of each row is narrow: the
    # arguments only of the rows they matched, to look at them again once filtered.
    extra: list[sa.ColumnElement[object]] = [sa.case((sa.or_(*matches), 1), else_=0).label("hit")]
    if shown.pattern is not None:
        extra.append(sa.case((in_arguments, JOBS.c.arguments), else_=None).label("matched"))
        if len(matches) > 1:
            extra.append(sa.case((matches[1], 1), else_=0).label("in_error"))
    window = _jobs(where, *extra)
    if before is not None:
        window = window.where(JOBS.c.id < before)
    scanned = window.order_by(JOBS.c.id.desc()).limit(scan).subquery("scanned")
    # Every scanned row, in the order they were read (no sort: they come so). Not
    # min(id) OVER (): MariaDB recomputes a MIN over the whole partition for every row,
    # 10,000 x 10,000 (2-18 s a page); the last id read is the lowest.
    order, every = scanned.c.id.desc(), (None, None)
    query = (
        sa.select(
            scanned,
            sa.func.count().over(order_by=order, rows=every).label("read"),
            sa.func.last_value(scanned.c.id).over(order_by=order, rows=every).label("lowest"),
        )
        .order_by(scanned.c.hit.desc(), scanned.c.id.desc())
        .limit(limit)
    )
    rows = connection.execute(query).mappings().all()
    hits = [row for row in rows if row["hit"]]
    jobs = [browse.summary(row, where.state) for row in hits if _shown_match(row, text, shown)]
    read, lowest = (int(rows[0]["read"]), rows[0]["lowest"]) if rows else (0, None)
    bounded = read >= scan
    # The cursor follows the rows matched, shown or not: a page short of hidden matches
    # still leads to the next one.
    if len(hits) == limit:
        next_before: int | None = hits[-1]["id"]
    else:
        next_before = lowest if bounded else None
    return Found(jobs, read, bounded=bounded and len(hits) < limit, next_before=next_before)


def _shown_match(row: sa.RowMapping, text: str, shown: argument_filter.ArgumentFilter) -> bool:
    """Whether a matched row still matches ``text`` as people are shown it: a match only
    inside a filtered value (``SOLIDQ_FILTER_ARGUMENTS``) is none, or searching would tell
    a secret by probing for it."""
    if shown.pattern is None or row.get("in_error") or row["matched"] is None:
        return True
    try:
        payload = json.loads(row["matched"])
    except (ValueError, RecursionError):
        return True  # a row written by hand: shown as it is, so matched as it is
    filtered = shown.filtered_payload(payload)
    # Nothing hidden: the database's match stands (MySQL's collations also match "e" to "é",
    # which a Python comparison would not).
    return filtered == payload or text.lower() in arguments.dumps(filtered).lower()


# Any: the columns of a Table (not a mapped class) are untyped, and SQLAlchemy 2.0 and 2.1
# spell a typed row or select differently.
def _jobs(where: Filter, *extra: sa.ColumnElement[object]) -> sa.Select[t.Any]:
    return browse.select_jobs(where.state, *extra, queue=where.queue, job=where.job)


def _same_job(kind: Kind, text: str) -> sa.ColumnElement[bool]:
    """The job whose id, or ``job_id`` (stored as written: lower case from Python's
    ``uuid4``, upper case perhaps by hand), ``text`` is."""
    if kind is Kind.ID:
        return JOBS.c.id == int(text)
    return JOBS.c.active_job_id.in_(sorted({text, text.lower()}))


# Any: as for _jobs.
def _summaries(
    connection: sa.Connection, query: sa.Select[t.Any], state: browse.State
) -> list[browse.JobSummary]:
    return [browse.summary(row, state) for row in connection.execute(query).mappings()]


def queue_names(connection: sa.Connection, limit: int = MAX_NAMES) -> list[str]:
    """The names of the queues that have jobs, in order, at most ``limit``."""
    return _distinct(connection, JOBS.c.queue_name, limit)


def job_names(connection: sa.Connection, limit: int = MAX_NAMES) -> list[str]:
    """The names of the jobs stored, in order, at most ``limit``."""
    return _distinct(connection, JOBS.c.class_name, limit)


def _distinct(connection: sa.Connection, column: sa.Column[str], limit: int) -> list[str]:
    """The distinct values of ``column``, one index seek each (a loose index scan: each the
    least value past the last; ``SELECT DISTINCT`` would read every job's entry). Both
    columns lead an index (``ix_solidq_jobs_for_filtering``, ``class_name``'s own)."""
    names: list[str] = []
    while len(names) < limit:
        query = sa.select(sa.func.min(column))
        if names:
            query = query.where(column > names[-1])
        name = connection.scalar(query)
        if name is None:
            break
        names.append(name)
    return names

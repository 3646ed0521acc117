"""A collecting job's calls, for people: a page of its ``solidq_coalesced_calls`` rows,
oldest first, as the job will receive them. Read-only; behind the dashboard's job page.

Pages are keyset-paginated on the call's id (``after``: the last id of the previous page),
along the ``(job_id, id)`` index, so the thousandth page of a full job costs what the first does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import sqlalchemy as sa

from flask_solidq import argument_filter
from flask_solidq.models.tables import COALESCED_CALLS
from flask_solidq.values import JSONValue


@dataclasses.dataclass(frozen=True)
class StoredCall:
    """One collected call as a page shows it."""

    id: int
    created_at: dt.datetime
    #: Its positional arguments in their stored JSON form (the payload's ``args``, filtered
    #: by ``SOLIDQ_FILTER_ARGUMENTS``), or the whole stored text when it isn't a payload.
    args: JSONValue
    #: Its keyword arguments, stored form (empty without any).
    kwargs: dict[str, JSONValue]


@dataclasses.dataclass(frozen=True)
class CallsPage:
    calls: list[StoredCall]
    #: The cursor of the next page (the last call's id), None on the last page.
    next_after: int | None


def calls_page(
    connection: sa.Connection, job_id: int, *, after: int | None = None, limit: int = 50
) -> CallsPage:
    """Up to ``limit`` calls of job ``job_id`` whose id is past ``after``, oldest first."""
    query = (
        sa.select(COALESCED_CALLS.c.id, COALESCED_CALLS.c.created_at, COALESCED_CALLS.c.arguments)
        .where(COALESCED_CALLS.c.job_id == job_id)
        .order_by(COALESCED_CALLS.c.id)
        .limit(limit + 1)  # one more says whether a next page exists
    )
    if after is not None:
        query = query.where(COALESCED_CALLS.c.id > after)
    rows = connection.execute(query).all()
    shown = argument_filter.current()
    calls = [
        StoredCall(row.id, row.created_at, *_arguments(row.arguments, shown))
        for row in rows[:limit]
    ]
    return CallsPage(calls, calls[-1].id if len(rows) > limit else None)


def _arguments(
    text: str | None, shown: argument_filter.ArgumentFilter
) -> tuple[JSONValue, dict[str, JSONValue]]:
    """The call's arguments from its stored payload (``Call.job_data``: ``args``, and
    ``kwargs`` when it has any), filtered by ``shown``; the text itself when it isn't one."""
    try:
        payload = json.loads(text or "null")
    except ValueError:
        return text, {}
    if not isinstance(payload, dict) or "args" not in payload:
        return text, {}
    kwargs = payload.get("kwargs")
    return shown.filtered(payload["args"]), shown.filtered(
        kwargs if isinstance(kwargs, dict) else {}
    )

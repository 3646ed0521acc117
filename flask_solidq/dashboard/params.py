"""What the dashboard takes from a request, checked before it reaches the database: a value
the database would refuse is answered with 400 and a line saying what was wrong, never with
the driver's error as a 500.

PostgreSQL refuses a NUL character in text and an integer past ``bigint``; MySQL refuses a
queue name longer than its column. So every query, form and path parameter is refused whole
when it holds a NUL (:func:`check`, before any view), as is a path parameter with a dot
segment (:func:`dot_segment`: a browser would turn its URL into another path); ids and
integer cursors are whole numbers that fit a ``bigint`` (:func:`job_id`, :func:`record_id`,
:func:`int_cursor`), and a queue named in a pause or resume path fits its column
(:func:`queue_name`).
"""

from __future__ import annotations

import typing as t

from flask import abort
from flask import request

from flask_solidq import identifiers
from flask_solidq.dashboard import flash
from flask_solidq.reads import queue_pages
from flask_solidq.reads import search

#: The largest id a ``bigint`` (the jobs' primary key) holds.
MAX_ID = identifiers.MAX_ID
#: The longest queue name the tables hold (``solidq_pauses.queue_name``, a ``String(255)``).
MAX_QUEUE_NAME = identifiers.MAX_NAME_LENGTH


def done() -> str | None:
    """What the last action did, to say on the page: its flash (:mod:`.flash`), which this
    page is the last to show."""
    return flash.message()


def refuse(message: str) -> t.NoReturn:
    """Answer 400 with ``message`` (shown on Werkzeug's error page, escaped)."""
    abort(400, description=message)


def check() -> None:
    """``before_request``: refuse a request any of whose parameters holds a NUL character
    (no column of the queue's tables can hold one, and PostgreSQL's driver raises on it), or
    any of whose path parameters has a dot segment (:func:`dot_segment`)."""
    sources: list[tuple[str, t.Iterable[tuple[str, object]]]] = [
        ("query parameter", request.args.items(multi=True)),
        ("path parameter", (request.view_args or {}).items()),
    ]
    if request.method == "POST":
        sources.append(("form field", request.form.items(multi=True)))
    for kind, items in sources:
        for name, value in items:
            if isinstance(value, str) and identifiers.has_nul(value):
                refuse(f"The {kind} {name!r} holds a NUL character, which no name or id has.")
    _refuse_dot_segments()


def _refuse_dot_segments() -> None:
    for name, value in (request.view_args or {}).items():
        if isinstance(value, str) and dot_segment(value):
            refuse(
                f"The path parameter {name!r} is {shown(value)}, which has a '.' or '..' part"
                " between slashes: a browser resolves such a part, so its URL would lead to"
                " another page. A queue or key so named has no page of the dashboard; the"
                " CLI reaches it."
            )


def dot_segment(text: str) -> bool:
    """Whether ``text``, put in a path as the dashboard's URLs put it (slashes kept, since a
    queue's name may have them: ``/mail``, ``a//b``), has a part that is ``.`` or ``..``.

    Browsers and ``fetch`` resolve such a part (``%2e`` too) before they send the request, so
    ``/solidq/queue/..%2F..%2Fpublic``, decoded by the server to the queue ``../../public``,
    would render a page whose own URL, built again from that name, leads out of the
    dashboard. Refusing these names blocks every such path, whatever its encoding, and keeps
    every other name reachable."""
    return any(part in {".", ".."} for part in text.split("/"))


def job_id(text: str, name: str = "job id") -> int:
    """``text`` as a job's id: a whole number from 0 to :data:`MAX_ID`, or 400."""
    return record_id(text, name, kind="job")


def record_id(text: str, name: str, kind: str = "batch") -> int:
    """``text`` as the id of a ``kind`` row (a job's, a batch's: every primary key is a
    ``bigint``): a whole number from 0 to :data:`MAX_ID`, or 400."""
    value = identifiers.parse_id(text)
    if value is None:
        refuse(f"The {name} {shown(text)} is not a {kind} id: a whole number from 0 to {MAX_ID}.")
    return value


def job_reference(text: str) -> int | str:
    """A job page's reference: an id (checked as :func:`job_id`), or a job's ``job_id``
    (anything not made of digits, looked up as text). A signed number, or a number in other
    scripts' digits, is refused rather than looked up: it can only be a mistyped id."""
    if identifiers.looks_like_number(text):
        return job_id(text)
    return text


def int_cursor(name: str) -> int | None:
    """The keyset cursor ``name`` of the query string that holds an id: absent or empty is
    the first page; anything but an id is 400 (a page silently restarted would hide it)."""
    text = request.args.get(name) or None
    return None if text is None else job_id(text, name=f"cursor {name!r}")


def text_cursor(name: str) -> str | None:
    """The keyset cursor ``name`` of the query string that holds a key (NULs are refused by
    :func:`check`); absent or empty is the first page."""
    return request.args.get(name) or None


def search_text(name: str = "q") -> str | None:
    """The search box's text (:mod:`flask_solidq.reads.search`), trimmed: absent or blank is
    no search; longer than :data:`~flask_solidq.reads.search.MAX_QUERY`, or digits past
    :data:`MAX_ID` (an id no job has), is 400."""
    text = (request.args.get(name) or "").strip()
    if not text:
        return None
    if len(text) > search.MAX_QUERY:
        refuse(
            f"The search is {len(text)} characters long: it takes at most {search.MAX_QUERY}"
            " (an id, a job_id, or a text of the arguments or error)."
        )
    if search.parse(text)[0] is search.Kind.ID:
        job_id(text, name="searched id")
    return text


def queue_search_text(name: str = "q") -> str | None:
    """The overview's search of queue names (:mod:`flask_solidq.reads.queue_pages`),
    trimmed: absent or blank is no search; longer than a queue name can be is 400."""
    text = (request.args.get(name) or "").strip()
    if len(text) > queue_pages.MAX_QUERY:
        refuse(
            f"The search is {len(text)} characters long: a queue's name has at most"
            f" {queue_pages.MAX_QUERY}."
        )
    return text or None


def selected_ids(name: str, most: int) -> list[int]:
    """The ids of the form's checked rows (``name``, repeated), each checked as
    :func:`job_id`, without repeats; more than ``most`` is 400 (a page has no more rows)."""
    ids = sorted({job_id(text, name="selected job id") for text in request.form.getlist(name)})
    if len(ids) > most:
        refuse(f"{len(ids)} jobs are selected: a page has at most {most}.")
    return ids


def queue_name(text: str) -> str:
    """A queue named in a pause or resume path: at most :data:`MAX_QUEUE_NAME` characters."""
    if len(text) > MAX_QUEUE_NAME:
        refuse(
            f"The queue name is {len(text)} characters long: a queue's name has at most"
            f" {MAX_QUEUE_NAME}."
        )
    return text


def shown(text: str) -> str:
    """``text`` as an error message quotes it: shortened, so a huge value makes a short page."""
    return repr(text if len(text) <= 40 else text[:40] + "...")

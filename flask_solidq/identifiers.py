"""What an id, a name or a key must be for the database to keep it, the same on every
database: the one rule the enqueue, the CLI and the dashboard check before a query is sent.

An id is a primary key, a ``bigint``: a whole number from 0 to :data:`MAX_ID`, written in the
ASCII digits 0-9 (Python's ``int()`` also reads Arabic-Indic and other scripts' digits; an id
typed in them can only be a mistake). A name or key is text without a NUL character, which
PostgreSQL refuses in text and SQLite would store (to be refused later, by the dashboard and
the metrics' readers), of at most :data:`MAX_NAME_LENGTH` characters, the ``VARCHAR(255)`` of
the queue and key columns.
"""

from __future__ import annotations

import re

#: The largest id a ``bigint`` (every table's primary key) holds.
MAX_ID = 2**63 - 1

#: The longest queue name or key the tables take: ``VARCHAR(255)`` on every database.
MAX_NAME_LENGTH = 255

#: What an id is written with.
ID_RULE = f"a whole number from 0 to {MAX_ID}, in the digits 0-9"

_ASCII_DIGITS = re.compile(r"[0-9]+")
_SIGNED_NUMBER = re.compile(r"\s*[-+]?[0-9]+\s*")


def parse_id(text: str) -> int | None:
    """``text`` as an id, or None when it isn't one (see :data:`ID_RULE`)."""
    if _ASCII_DIGITS.fullmatch(text) is None:
        return None
    value = int(text)
    return value if value <= MAX_ID else None


def is_fit_id(value: int) -> bool:
    """Whether the number ``value`` can be an id (0 to :data:`MAX_ID`)."""
    return 0 <= value <= MAX_ID


def looks_like_number(text: str) -> bool:
    """Whether ``text`` is written as a number, signed, padded or in any script's digits:
    where a job is named by its id or by its ``job_id``, such a text can only be a mistyped
    id, never a ``job_id`` (a UUID)."""
    return _SIGNED_NUMBER.fullmatch(text) is not None or text.strip().isdigit()


def has_nul(text: str) -> bool:
    """Whether ``text`` holds a NUL character, which no name, key or id may hold."""
    return "\x00" in text


def name_problem(text: str, what: str, max_length: int = MAX_NAME_LENGTH) -> str | None:
    """Why ``text`` can't be stored as the ``what`` (``"queue name"``), or None when it can:
    it holds a NUL character, or it is longer than ``max_length``. The reason never quotes
    ``text`` (a key is built from a job's arguments)."""
    if has_nul(text):
        return f"The {what} holds a NUL character (\\x00), which no database column keeps."
    if len(text) > max_length:
        return f"The {what} is {len(text)} characters long; it takes at most {max_length}."
    return None


def check_name(text: str, what: str, max_length: int = MAX_NAME_LENGTH) -> None:
    """Refuse a name or key the database can't keep (:func:`name_problem`).

    :raises ValueError: ``text`` holds a NUL character or is too long; the message says which.
    """
    problem = name_problem(text, what, max_length)
    if problem is not None:
        raise ValueError(problem)

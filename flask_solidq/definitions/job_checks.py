"""The checks of a job's enqueue options (``queue_name``, ``priority``, ``set(wait=,
wait_until=, queue=, priority=)``): each value must fit the column it is stored in, on every
database, or the call raises before anything is stored (a queue name: the rule of
:mod:`flask_solidq.identifiers`)."""

from __future__ import annotations

import datetime as dt
import inspect

from flask_solidq import identifiers
from flask_solidq.definitions import argument_codecs
from flask_solidq.timing import as_utc
from flask_solidq.timing import to_seconds
from flask_solidq.timing import utcnow

#: The longest queue name the tables take.
MAX_NAME_LENGTH = identifiers.MAX_NAME_LENGTH

#: The range of ``priority``: the column is a 32-bit INTEGER on every database.
MIN_PRIORITY = -(2**31)
MAX_PRIORITY = 2**31 - 1

#: The earliest and latest time a job may be scheduled for (``set(wait=)``,
#: ``set(wait_until=)``). MySQL's DATETIME is documented from year 1000 to 9999 and Python's
#: datetime ends with year 9999; the day short of its end leaves room for the time between
#: ``set()`` and the enqueue, and for arithmetic on the stored time.
EARLIEST_SCHEDULED_AT = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
LATEST_SCHEDULED_AT = dt.datetime(9999, 12, 31, tzinfo=dt.timezone.utc)

SCHEDULE_RANGE = (
    f"between {EARLIEST_SCHEDULED_AT:%Y-%m-%d} and {LATEST_SCHEDULED_AT:%Y-%m-%d} (UTC)"
)


def check_queue(value: object, *, where: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{where} must be a non-empty queue name, not {value!r}.")
    if identifiers.has_nul(value):
        raise ValueError(
            f"{where} holds a NUL character (\\x00), which no database column keeps: {value!r}."
        )
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{where} must be at most {MAX_NAME_LENGTH} characters long.")
    if not argument_codecs.encodable(value):
        raise ValueError(f"{where} must be UTF-8 text, without lone surrogates: {value!r}.")


def check_priority(value: object, *, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be an int (lower runs first), not {value!r}.")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ValueError(
            f"{where} must be between {MIN_PRIORITY} and {MAX_PRIORITY} (the priority column is"
            f" a 32-bit INTEGER on every database), not {value}."
        )


def check_wait(wait: object) -> float:
    """``set(wait=)`` in seconds, checked to schedule the job no later than
    LATEST_SCHEDULED_AT from now."""
    seconds = to_seconds(wait, name="set(wait=)", allow_zero=True)
    latest = (LATEST_SCHEDULED_AT - utcnow()).total_seconds()
    if seconds > latest:
        raise ValueError(
            f"set(wait=) must be at most {latest:.0f} seconds, not {wait!r}: the scheduled time"
            f" must fall {SCHEDULE_RANGE}."
        )
    return seconds


def check_wait_until(wait_until: object) -> dt.datetime:
    """``set(wait_until=)`` in UTC, checked to fall between EARLIEST_SCHEDULED_AT and
    LATEST_SCHEDULED_AT."""
    if not isinstance(wait_until, dt.datetime):
        raise TypeError(f"set(wait_until=) must be a datetime, not {wait_until!r}.")
    try:
        scheduled_at = as_utc(wait_until)
    except OverflowError:  # Its offset takes it past year 1 or 9999.
        scheduled_at = None
    if scheduled_at is None or not EARLIEST_SCHEDULED_AT <= scheduled_at <= LATEST_SCHEDULED_AT:
        raise ValueError(
            f"set(wait_until=) must fall {SCHEDULE_RANGE}, not {wait_until.isoformat()}."
        )
    return scheduled_at


def check_not_async(job_class: type) -> None:
    """Refuse a job whose work is a coroutine function (``async def``): the workers don't run
    coroutines yet, so such a job would be marked finished without a line of it running.

    :raises TypeError: ``perform`` (or the decorated function) is ``async def``.
    """
    work = getattr(job_class, "function", None) or getattr(job_class, "perform", None)
    if inspect.iscoroutinefunction(work):
        raise TypeError(
            f"Job {job_class.__qualname__} is an async def: flask-solidq doesn't run coroutines"
            " yet. Define it with def, and run the coroutine inside with asyncio.run(...)."
        )

"""The one clock and the duration parser every other module uses.

Times inside flask-solidq are aware UTC datetimes (names end in ``_at``); durations are float
seconds once parsed (names end in ``_interval``, ``_timeout``, ``_duration`` or ``_per``).

Every time the queue reads, in this process, comes through :func:`utcnow` or
:func:`flask_solidq.storage.database_clock.now`, and both honour one override, :func:`frozen_at`:
the
seam :func:`flask_solidq.testing.frozen_clock` sets, so a test steps through a rate limit or a
debounce window without patching the modules that read the time. Monotonic timers (sleeps,
polls, timeouts) stay real: they measure waiting, not the queue's time.
"""

from __future__ import annotations

import datetime as dt

UTC = dt.timezone.utc

#: The time every reader of this process takes while a frozen clock is on (None: the real
#: one). Process-wide on purpose, not per thread: a job's own threads and the finisher's
#: read the same frozen time as the test that froze it.
_frozen_at: dt.datetime | None = None


def utcnow() -> dt.datetime:
    """The current time, aware, in UTC (the frozen time while a frozen clock is on)."""
    frozen = _frozen_at
    return frozen if frozen is not None else dt.datetime.now(UTC)


def frozen_at() -> dt.datetime | None:
    """The frozen time every reader of this process takes, or None when the clocks are real."""
    return _frozen_at


def set_frozen_at(value: dt.datetime | None) -> None:
    """Freeze this process's time at ``value`` (aware; None: back to the real clocks). Only
    :class:`flask_solidq.testing.clock.FrozenClock` calls it."""
    global _frozen_at
    _frozen_at = None if value is None else as_utc(value)


def as_utc(value: dt.datetime) -> dt.datetime:
    """Return ``value`` as an aware UTC datetime; a naive value is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def naive_utc(value: dt.datetime) -> dt.datetime:
    """``value`` in UTC without its tzinfo, as the tables store it (for raw SQL parameters)."""
    return as_utc(value).replace(tzinfo=None)


def to_seconds(value: object, *, name: str, allow_zero: bool = False) -> float:
    """Parse a duration given as a :class:`~datetime.timedelta` or a number of seconds.

    :param name: the option's name, for the error message.
    :raises TypeError: ``value`` is neither a timedelta nor a number.
    :raises ValueError: ``value`` is negative (or zero, unless ``allow_zero``).
    """
    if isinstance(value, bool) or not isinstance(value, (dt.timedelta, int, float)):
        raise TypeError(
            f"{name} must be a timedelta or a number of seconds, not {type(value).__name__}."
        )
    seconds = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite duration, not {value!r}.")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        bound = "zero or more" if allow_zero else "more than zero"
        raise ValueError(f"{name} must be {bound} seconds, not {value!r}.")
    return seconds

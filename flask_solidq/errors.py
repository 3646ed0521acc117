"""The flask-solidq error family.

Every error flask-solidq raises on purpose derives from :class:`SolidQError`. A subclass's
docstring is its default message, so a subclass is a name and a sentence; data rides along as
attributes, and the underlying database error, where there is one, on ``__cause__``.

Bad declarations (a control decorator given an invalid option) raise the built-in
:class:`ValueError` or :class:`TypeError` instead, at decoration time.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import typing as t


class SolidQError(Exception):
    """A flask-solidq error."""

    def __init__(self, message: str | None = None, *args: object) -> None:
        super().__init__(message or (self.__doc__ or "").strip(), *args)


class PendingMigrations(SolidQError):
    """The flask-solidq tables don't exist yet. Run `flask solidq install`, then
    `flask db upgrade`."""

    def __init__(self, missing_tables: t.Iterable[str] = ()) -> None:
        self.missing_tables = sorted(missing_tables)
        message = (
            "The flask-solidq tables don't exist in the queue's database yet"
            + (f" (missing: {', '.join(self.missing_tables)})" if self.missing_tables else "")
            + ". Run `flask solidq install`, then `flask db upgrade`. Each process checks once, "
            "so restart running workers after migrating."
        )
        super().__init__(message)


class BatchAlreadyFinished(SolidQError):
    """Jobs were enqueued into a batch that had finished (or whose row was cleared): the
    block that tried rolled back, and none of its jobs was stored. A batch finishes when
    nothing in it is pending; a running job of the batch keeps it open, so add to a batch from
    its own jobs (``with current_job.batch.enqueue():``)."""


class EnqueueError(SolidQError):
    """The job could not be stored because the database failed; the cause is chained."""


class SerializationError(SolidQError):
    """A job argument can't be stored as JSON."""

    def __init__(self, message: str, *, position: str | None = None) -> None:
        self.position = position
        super().__init__(message)


class DeserializationError(SolidQError):
    """A stored job argument can't be loaded again."""


class CollectedJobMismatch(SolidQError):
    """A job stored with collected calls no longer declares ``coalesce(on_conflict="collect")``.
    Restore the declaration and retry the failed job to run its calls, or discard it."""


class JobNotFound(SolidQError):
    """A stored job names a job definition this process can't load."""


class ResumptionLimitReached(SolidQError):
    """A job with steps was interrupted more times than its ``max_resumptions=`` (or
    ``SOLIDQ_MAX_RESUMPTIONS``) allows; it failed, its progress kept for a retry."""


class StepsChanged(SolidQError):
    """A job's steps no longer match its saved progress: a step saved as done or in progress
    is reached in another order, or not at all. The job fails (no ``retry_on`` rule applies:
    running it again changes nothing), its progress kept."""


class ProcessCommandRefused(SolidQError):
    """A quiet or stop command was not given: no such process, a name that matches more
    than one, a process already stopping, or one the command doesn't apply to. The message
    says which; ``flask solidq status`` lists the processes with their ids."""


class RateLimited(SolidQError):
    """The API a job calls said "too many requests" (HTTP 429): raise it from the job's
    ``perform`` with how long to wait, and every rate-limit budget the job was admitted by
    admits nothing for that long. The job waits (deferred, as over its rate limit), is not
    failed, and spends no attempt; ``retry_on`` and ``discard_on`` never see it.

    ``retry_after`` is seconds (an int or float above 0), a positive ``timedelta``, or an
    aware ``datetime`` (an HTTP ``Retry-After`` may be a date; one already past pauses
    nothing, and the job waits for its next slot). A date is read against this host's clock
    when raised; the pause is then counted on the database's clock, as every claim is.

    ``solidq.rate_limiter.acquire`` raises it too, with ``keys``, when its budgets admit
    nothing within its timeout: then ``retry_after`` is how long until they would, and it
    pauses nothing (an ``acquire`` block it crosses doesn't take it for an API's 429).

    :raises TypeError, ValueError: ``retry_after`` is none of those.
    """

    def __init__(
        self, retry_after: float | dt.timedelta | dt.datetime, *, keys: t.Sequence[str] = ()
    ) -> None:
        #: How long to wait (a ``timedelta``) or until when (an aware ``datetime``, UTC).
        self.retry_after = pause_of(retry_after, name="RateLimited(retry_after=)", until=True)
        #: The budgets that admitted nothing (``acquire``'s timeout); empty for an API's 429.
        self.keys = tuple(keys)
        when = self.retry_after
        shown = when.isoformat() if isinstance(when, dt.datetime) else f"{when.total_seconds():g}s"
        if self.keys:
            budgets = ", ".join(repr(key) for key in self.keys)
            what = "budget" if len(self.keys) == 1 else "budgets"
            message = f"Rate limited by the {what} {budgets}: admitted again in {shown}."
        else:
            message = f"Rate limited by the API: retry after {shown}."
        super().__init__(message)

    @classmethod
    def from_retry_after(
        cls, value: str | None, *, default: float | dt.timedelta = 60.0
    ) -> RateLimited:
        """The back-off an HTTP ``Retry-After`` header asks for: seconds (``"120"``) or an
        HTTP date (``"Wed, 21 Oct 2026 07:28:00 GMT"``); ``default`` when the header is
        missing (None) or says neither (or no positive number of seconds)."""
        text = (value or "").strip()
        if text.isdigit() and int(text) > 0:
            return cls(int(text))
        try:
            date = email.utils.parsedate_to_datetime(text) if text else None
        except (TypeError, ValueError):
            date = None
        if date is not None and date.tzinfo is not None:
            return cls(date)
        return cls(default)

    def pause(self, now: dt.datetime | None = None) -> dt.timedelta:
        """How long the back-off lasts from ``now`` (this host's clock by default): the
        ``retry_after`` given, or the time left until its date (none once it is past)."""
        if isinstance(self.retry_after, dt.timedelta):
            return self.retry_after
        now = now or dt.datetime.now(dt.timezone.utc)
        return max(dt.timedelta(0), self.retry_after - now)


@t.overload
def pause_of(value: object, *, name: str, until: t.Literal[False] = False) -> dt.timedelta: ...
@t.overload
def pause_of(value: object, *, name: str, until: bool) -> dt.timedelta | dt.datetime: ...
def pause_of(value: object, *, name: str, until: bool = False) -> dt.timedelta | dt.datetime:
    """A back-off's length as given to ``name``: seconds above 0 or a positive ``timedelta``
    (a ``timedelta``); with ``until``, an aware ``datetime`` too (kept, in UTC).

    :raises TypeError: ``value`` is of none of those types (a bool counts as none).
    :raises ValueError: the seconds or the ``timedelta`` aren't above 0 (or aren't finite),
        or the ``datetime`` is naive.
    """
    if isinstance(value, dt.datetime) and until:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{name} takes an aware datetime (with a timezone), not the naive {value!r}."
            )
        return value.astimezone(dt.timezone.utc)
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        kinds = "seconds, a timedelta or an aware datetime" if until else "seconds or a timedelta"
        raise TypeError(f"{name} takes {kinds}, not {type(value).__name__}.")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{name} must be more than 0 seconds, not {value!r}.")
    try:
        return dt.timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"{name} is too long a pause: {value!r} seconds.") from None

"""The flask-solidq error family.

Every error flask-solidq raises on purpose derives from :class:`SolidQError`. A subclass's
docstring is its default message, so a subclass is a name and a sentence; data rides along as
attributes, and the underlying database error, where there is one, on ``__cause__``.

Bad declarations (a control decorator given an invalid option) raise the built-in
:class:`ValueError` or :class:`TypeError` instead, at decoration time.
"""

from __future__ import annotations

import typing as t


class SolidQError(Exception):
    """A flask-solidq error."""

    def __init__(self, message: str | None = None, *args: t.Any) -> None:
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

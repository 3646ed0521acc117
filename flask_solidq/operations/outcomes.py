"""How a run of a claimed job ended (:class:`Outcome`), as the finisher stores it, and the
error text a failed execution keeps (:func:`error_json`; read back by
:func:`flask_solidq.definitions.stored_errors.parse_error`)."""

from __future__ import annotations

import datetime as dt
import enum
import traceback
import typing as t

from flask_solidq.definitions import arguments

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob

#: Backtrace lines kept in a failed execution's error.
BACKTRACE_LINES = 60


class OutcomeKind(str, enum.Enum):
    """How a run ended."""

    FINISHED = "finished"
    DISCARDED = "discarded"
    RETRIED = "retried"
    FAILED = "failed"
    #: Stopped at a step's checkpoint by a stopping worker: back to its queue at once, with
    #: its progress, spending no attempt (see :mod:`flask_solidq.definitions.steps`).
    INTERRUPTED = "interrupted"
    #: Raised :class:`~flask_solidq.errors.RateLimited` (the API said 429): its budgets pause,
    #: and it waits as a job its rate limit deferred, spending no attempt.
    DEFERRED = "deferred"


class Retry(t.NamedTuple):
    """Where and when the next attempt of a retried job runs, and its updated payload."""

    arguments: str
    scheduled_at: dt.datetime
    queue_name: str
    priority: int
    #: The stored key; a job stored without one (enqueued before its definition declared
    #: a rate limit) gets the key its definition gives it now.
    rate_limit_key: str | None = None
    #: The seconds the rule said to wait (``signals.retry``'s ``wait``).
    wait: float = 0.0


class Outcome(t.NamedTuple):
    """The end of one run of a claimed job, waiting to be stored."""

    claimed: ClaimedJob
    kind: OutcomeKind
    error: str | None = None
    retry: Retry | None = None
    job: Job | None = None
    #: What the run raised (a retry's, discard's or failure's ``error`` signal payload).
    exception: BaseException | None = None
    #: A failed job's payload with its step progress, stored with the failure so that a
    #: retry by hand resumes from it; None for a job without steps.
    arguments: str | None = None
    #: A ``DEFERRED`` job's back-off: how long its budgets admit nothing, counted from the
    #: database's clock when the outcome is stored.
    pause: dt.timedelta | None = None
    #: A ``DEFERRED`` job that never started: at its start its budget was paused, so it goes
    #: back to wait and the charge its claim made is given back (see :func:`_held_at_start`).
    held_at_start: bool = False


def error_json(error: BaseException, *, executions: int | None = None) -> str:
    """A failed execution's ``error``: the exception's class, message and backtrace, and how
    many times the job ran, this run included (``executions``; the stored payload only counts
    the runs a retry recorded)."""
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    data: dict[str, t.Any] = {
        "exception_class": f"{type(error).__module__}.{type(error).__qualname__}",
        "message": str(error),
        "backtrace": "".join(lines).splitlines()[-BACKTRACE_LINES:],
    }
    if executions is not None:
        data["executions"] = executions
    return arguments.dumps(data)


def failure_json(exception_class: str, message: str) -> str:
    """A failed execution's ``error`` for a failure that isn't an exception in this process
    (a worker that died, say)."""
    return arguments.dumps(
        {"exception_class": exception_class, "message": message, "backtrace": []}
    )

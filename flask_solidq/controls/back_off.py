"""Back-offs: the API a job calls said 429, so its rate-limit budgets admit nothing for a while.

A job raises :class:`~flask_solidq.errors.RateLimited` (stored by the finisher, which defers
the job: :mod:`flask_solidq.operations.finalize`), or the app calls
``solidq.rate_limiter.back_off(key, seconds)``. Either way the budgets' rows are locked as a
claim locks them (sorted by key, a missing one inserted), the pause is counted from the
database's clock read under those locks, as the claims that compare with it read it, and
``backed_off_until`` is written in the same transaction; a pause never shortens a longer one
already there. The arithmetic that honours it is in :mod:`~flask_solidq.controls.gcra`
("Backing off").
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import database_clock
from flask_solidq import signals
from flask_solidq.controls import budgets
from flask_solidq.timing import utcnow


class BackedOff(t.NamedTuple):
    """What a back-off wrote: the budgets it locked (to hand out slots from and save), the
    database's time it counted from, and until when each key is paused now."""

    locked: budgets.Locked
    now: dt.datetime
    until: dict[str, dt.datetime]


def pause(connection: sa.Connection, pauses: t.Mapping[str, dt.timedelta]) -> BackedOff:
    """Pause each budget key of ``pauses`` for its length from the database's clock, in the
    caller's transaction, which keeps the budgets locked; the caller hands out any slots it
    needs from them, then saves them (:func:`flask_solidq.controls.budgets.save`)."""
    # No budget (a job without a rate limit told 429): nothing to lock, only the clock.
    locked = budgets.lock(connection, pauses, utcnow()) if pauses else budgets.Locked()
    now = database_clock.now(connection)
    until = {}
    for key, length in pauses.items():
        budget = locked[key]
        end = now + length
        if budget.backed_off_until is None or budget.backed_off_until < end:
            budget.backed_off_until = end
        until[key] = budget.backed_off_until
    return BackedOff(locked, now, until)


def announce(
    sender: object,
    keys: list[str],
    until: dt.datetime,
    *,
    job_id: int | None = None,
    class_name: str | None = None,
) -> None:
    """Send ``rate_limit_back_off`` for a committed back-off (a receiver that raises is
    logged: the pause stands)."""
    signals.send_safely(
        signals.rate_limit_back_off,
        sender,
        keys=keys,
        until=until,
        job_id=job_id,
        class_name=class_name,
    )

"""Back-offs: the API a job calls said 429, so its rate-limit budgets admit nothing for a while.

A job raises :class:`~flask_solidq.errors.RateLimited` (stored by the finisher, which defers
the job: :mod:`flask_solidq.operations.finalize`), or the app calls
``solidq.rate_limiter.back_off(key, seconds=...)``. Either way the budgets' rows are locked as a
claim locks them (sorted by key, a missing one inserted), the pause is counted from the
database's clock read under those locks, as the claims that compare with it read it, and
``backed_off_until`` is written in the same transaction; a pause never shortens a longer one
already there. The arithmetic that honours it is in :mod:`~flask_solidq.controls.rate_limit.gcra`
("Backing off").

A pause is worth most in the milliseconds after the 429, so a job's is not left to its
finisher's next batch: the thread that heard it notes it in this process at once
(:mod:`~flask_solidq.controls.rate_limit.local_pauses`: this process's claims and starts honour it
from then on) and writes it in a transaction of its own before the job's outcome is handed on
(:func:`heard`), which is when every other process's claims and starts see it. The finisher
writes it again with the outcome (a no-op: a pause never shortens), so a failed early write
loses nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
import typing as t

import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import local_pauses
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import utcnow

logger = logging.getLogger("flask_solidq")


class BackedOff(t.NamedTuple):
    """What a back-off wrote: the budgets it locked (to hand out slots from and save), the
    database's time it counted from, and until when each key is paused now."""

    locked: budgets.Locked
    now: dt.datetime
    until: dict[str, dt.datetime]


def pause(connection: sa.Connection, pauses: t.Mapping[str, dt.timedelta]) -> BackedOff:
    """Pause each budget key of ``pauses`` for its length from the database's clock, in the
    caller's transaction, which keeps the budgets locked; the caller hands out any slots it
    needs from them, then saves them (:func:`flask_solidq.controls.rate_limit.budgets.save`)."""
    # No budget (a job without a rate limit told 429): nothing to lock, only the clock.
    locked = budgets.lock(connection, pauses, utcnow()) if pauses else budgets.Locked()
    now = database_clock.now(connection)
    until = {}
    for key, length in pauses.items():
        budget = locked[key]
        if length > dt.timedelta(0):
            budget.back_off(now + length)
        until[key] = budget.backed_off_until or now
    return BackedOff(locked, now, until)


def heard(engine: sa.Engine, pauses: t.Mapping[str, dt.timedelta]) -> None:
    """An API said 429 to this process: note the pause of each key here at once, then write
    it in a transaction of its own, so that other processes see it before the outcome that
    carries it is stored. A failed write is logged, not raised: the outcome writes the same
    pause when it is stored."""
    for key, length in pauses.items():
        local_pauses.BOARD.note([key], length.total_seconds())
    if not pauses:
        return
    try:
        db.retrying_deadlocks(lambda: _store_unless_missing(engine, pauses))
    except sa.exc.DBAPIError as error:
        if budget_table.TABLE.noticed_missing(engine, error):
            return  # no budgets to pause: the limit fails closed (see budget_table)
        _log_unwritten(pauses)
    except Exception:  # noqa: BLE001 - the outcome stores the pause anyway
        _log_unwritten(pauses)


def _store_unless_missing(engine: sa.Engine, pauses: t.Mapping[str, dt.timedelta]) -> None:
    with db.write(engine) as connection:
        if budget_table.TABLE.is_missing(connection):
            return
        backed_off = pause(connection, pauses)
        budgets.save(connection, backed_off.locked, backed_off.now)


def _log_unwritten(pauses: t.Mapping[str, dt.timedelta]) -> None:
    logger.warning(
        "SolidQ couldn't write the back-off of %s at once; it is written with the job's outcome",
        ", ".join(sorted(pauses)),
        exc_info=True,
    )


def store(engine: sa.Engine, pauses: t.Mapping[str, dt.timedelta]) -> BackedOff:
    """Pause the budgets of ``pauses`` in a transaction of its own (see :func:`pause`)."""
    with db.write(engine) as connection:
        backed_off = pause(connection, pauses)
        budgets.save(connection, backed_off.locked, backed_off.now)
    return backed_off


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

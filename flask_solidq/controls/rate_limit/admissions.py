"""Admissions taken by code outside jobs: ``with solidq.rate_limiter.acquire("stripe"):``.

A web request or a script takes an admission from a budget as a worker's claim does: the
budget rows are locked (sorted by key, a missing one inserted), the database's clock is read
under the locks, and the claim's GCRA arithmetic admits or refuses
(:func:`~flask_solidq.controls.rate_limit.rate_charges.admit`). Admitted a moment ahead (see
"Charging ahead" in :mod:`~flask_solidq.controls.rate_limit.gcra`), the caller waits for that
moment, as a
worker's thread does, so the window bound holds on the times charged, across jobs and callers
alike. Refused, it sleeps until the budgets' next admission and tries again, up to its
timeout; a back-off (``backed_off_until``) makes that admission later, as it does a claim's.

An API's 429 raised inside the block (``RateLimited`` without ``keys``) pauses the budgets
through the same path as ``rate_limiter.back_off``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import time
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq.controls.rate_limit import back_off
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import local_pauses
from flask_solidq.controls.rate_limit import rate_charges
from flask_solidq.storage import database_clock
from flask_solidq.storage import db
from flask_solidq.timing import frozen_at
from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask_solidq.controls.rate_limit.rate_charges import Charge


@dataclasses.dataclass(frozen=True)
class Admission:
    """What ``rate_limiter.acquire`` admitted."""

    #: The budgets charged, by key (none for a call that isn't limited).
    keys: tuple[str, ...]
    #: The moment charged, by the database's clock; None when nothing was charged.
    admitted_at: dt.datetime | None


@contextlib.contextmanager
def acquire(
    engine: sa.Engine, charges: list[Charge], timeout: float | None
) -> t.Iterator[Admission]:
    """Take an admission from every budget of ``charges`` at one moment, waiting up to
    ``timeout`` seconds for it (None: as long as it takes); inside the block, a
    ``RateLimited`` without ``keys`` pauses those budgets for its ``retry_after``, then
    propagates.

    :raises flask_solidq.errors.RateLimited: (with ``keys``) the budgets admit nothing within
        ``timeout``, raised as soon as their next admission is known to come too late.
    :raises RuntimeError: a ``solidq.transaction()`` block is open on the queue's engine.
    """
    if db.in_transaction(engine):
        raise RuntimeError(
            "rate_limiter.acquire() can't run inside solidq.transaction(): its admission has"
            " to commit at once (the call it admits happens whether that block commits or"
            " not), and the budget's row stays locked until it does. Acquire before the block."
        )
    admission = _admit(engine, charges, timeout)
    try:
        yield admission
    except errors.RateLimited as limited:
        pause = limited.pause()
        if admission.keys and not limited.keys and pause > dt.timedelta(0):
            pause_all(engine, {key: pause for key in admission.keys})
        raise


def pause_all(engine: sa.Engine, pauses: t.Mapping[str, dt.timedelta]) -> dict[str, dt.datetime]:
    """Pause each budget of ``pauses`` for its length from the database's clock, in a
    transaction of its own; send ``rate_limit_back_off`` once it committed. Return until when
    each key is paused now (a longer pause already there is kept)."""
    for key, length in pauses.items():  # this process honours it at once, before the commit
        local_pauses.BOARD.note([key], length.total_seconds())
    with budget_table.required(), db.write(engine) as connection:
        backed_off = back_off.pause(connection, pauses)
        budgets.save(connection, backed_off.locked, backed_off.now)
        until = backed_off.until
        latest = max(until.values())
        db.after_commit_on(connection, lambda: back_off.announce(None, list(until), latest))
    return until


def _admit(engine: sa.Engine, charges: list[Charge], timeout: float | None) -> Admission:
    if not charges:
        return Admission((), None)
    keys = tuple(dict.fromkeys(charge.key for charge in charges))
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        admitted_at, wait = _try_once(engine, charges)
        if admitted_at is not None:
            if frozen_at() is None and wait > 0:
                time.sleep(wait)  # admitted for a moment just ahead: start no sooner
            return Admission(keys, admitted_at)
        left = None if deadline is None else deadline - time.monotonic()
        # Under a frozen clock no time passes while this sleeps; otherwise a budget's next
        # admission only moves later (others charge it, a back-off), never earlier.
        if frozen_at() is not None or (left is not None and wait > left):
            raise errors.RateLimited(wait, keys=keys)
        time.sleep(wait)


def _try_once(engine: sa.Engine, charges: list[Charge]) -> tuple[dt.datetime | None, float]:
    """Charge every budget if they admit within their charge-ahead; return the moment
    charged and how far ahead of the database's clock it is, or None and the seconds until
    they would all admit."""
    with budget_table.required(), db.write(engine) as connection:
        locked = budgets.lock(connection, (charge.key for charge in charges), utcnow())
        now = database_clock.now(connection)
        written = local_pauses.write_into(locked, (charge.key for charge in charges), now)
        ahead = dt.timedelta(0) if frozen_at() is not None else None
        at = rate_charges.admit(locked, charges, now, ahead)
        if at is not None or written:
            budgets.save(connection, locked, now)
        if at is not None:
            return at, (at - now).total_seconds()
        available = max(locked[c.key].available_at(c.rate, now, c.units) for c in charges)
    return None, (available - now).total_seconds()

"""Store the jobs that raised ``RateLimited``: pause their budgets and defer them.

Part of storing a batch of outcomes (:mod:`flask_solidq.operations.finalize`), in its
transaction: :func:`pause` before the jobs' claims are deleted (budgets first, as a claim
locks them), :func:`defer` after. Each job's budgets (the ones it was admitted
by: :func:`flask_solidq.controls.rate_limit.rate_charges.of`) are paused from the database's clock
(:mod:`flask_solidq.controls.rate_limit.back_off`), and the job goes back to wait exactly as a job
its
rate limit deferred at claim does:

* a scheduled execution at the latest of its budgets' next slots, which come after the pause
  (a job without a budget: the pause's end);
* the job row's own ``scheduled_at`` untouched, so the execution due later than it reads as
  deferred (:data:`flask_solidq.controls.rate_limit.budgets.IS_DEFERRED`: the dashboard, ``status``
  and the metrics count it there);
* no attempt recorded, and ``executions`` as before the run (the payload is saved, with any
  step progress);
* without the budgets table (:mod:`~flask_solidq.controls.rate_limit.budget_table`), no budget is
  paused: the job waits out its pause as a job without a rate limit does;
* its concurrency slot given back once the outcome committed (the FINISH hooks, as a claim's
  deferral gives it back in its ``after_claim``); it takes one again, or blocks, when it comes
  back due.

The ``rate_limit_back_off`` signal is sent per job once the transaction committed.

A job held at its start by a pause (:attr:`~flask_solidq.operations.outcomes.Outcome
.held_at_start`: admitted before the 429, not started) is stored the same way, but it never
ran: its claim's charges are given back to its budgets (no further than the moment of the
deferral, :meth:`~flask_solidq.controls.rate_limit.gcra.Budget.correct`), it pauses nothing but what
its process heard and hadn't stored, and ``defer_rate_limited`` is sent for it instead.
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq import signals
from flask_solidq.controls.rate_limit import back_off
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit import rate_charges
from flask_solidq.controls.rate_limit.rate_charges import Charge
from flask_solidq.definitions import registry
from flask_solidq.storage import db
from flask_solidq.transitions import executions
from flask_solidq.transitions import jobs as job_rows
from flask_solidq.values import JobRef

if t.TYPE_CHECKING:
    from flask_solidq.operations.outcomes import Outcome
    from flask_solidq.operations.outcomes import Retry


class Paused(t.NamedTuple):
    """The back-off of a batch's deferred jobs, written: each job's budgets, by job id, and
    what the pause locked and wrote."""

    limits: dict[int, list[Charge]]
    backed_off: back_off.BackedOff


def pause(connection: sa.Connection, outcomes: list[Outcome]) -> Paused:
    """Pause the budgets of ``outcomes`` (``DEFERRED`` ones), each key for the longest pause
    asked of it, and keep them locked for :func:`defer`. Runs before the claims are deleted
    (see the finisher's transaction), so a job whose claim turns out lost still paused its
    budgets: the API did say 429."""
    limits = {o.claimed.id: rate_charges.of(o.claimed) for o in outcomes}
    if any(limits.values()) and not budget_table.exists(connection):
        # Asked each time, not remembered: a table dropped since would fail the finisher's
        # transaction on every try. Without budgets, each job waits out its pause as a job
        # without a rate limit does; back at a claim, it waits again while the table is gone.
        limits = {job_id: [] for job_id in limits}
    pauses: dict[str, dt.timedelta] = {}
    for outcome in outcomes:
        for charge in limits[outcome.claimed.id]:
            key = charge.key
            pauses[key] = max(pauses.get(key, dt.timedelta(0)), _pause(outcome))
    backed_off = back_off.pause(connection, pauses)
    for outcome in outcomes:
        if outcome.held_at_start:  # it never started: its claim's charges are given back
            for charge in limits[outcome.claimed.id]:
                budget = backed_off.locked[charge.key]
                budget.correct(charge.rate, backed_off.now, -charge.units)
    return Paused(limits, backed_off)


def defer(
    connection: sa.Connection, paused: Paused, outcomes: list[Outcome], now: dt.datetime
) -> dict[int, Retry]:
    """Schedule each job of ``outcomes`` (the ``DEFERRED`` ones whose claims were deleted) at
    its slot after the pause, and save the budgets; return each job's retry with the time it
    was scheduled at, by job id. ``now`` is this host's time, for ``updated_at`` stamps."""
    backed_off = paused.backed_off
    retries: dict[int, Retry] = {}
    for outcome in outcomes:
        retries[outcome.claimed.id] = t.cast("Retry", outcome.retry)._replace(
            scheduled_at=_due_at(outcome, paused.limits[outcome.claimed.id], backed_off)
        )
    if backed_off.locked.rows:
        budgets.save(connection, backed_off.locked, backed_off.now)
    if not outcomes:
        return retries
    # The payload keeps its step progress (``executions`` as before the run); the row's
    # ``scheduled_at`` stays: the execution due later than it is what reads as deferred.
    job_rows.save_arguments(
        connection, [(job_id, retry.arguments) for job_id, retry in retries.items()], now
    )
    refs = [
        JobRef.of(outcome.claimed, scheduled_at=retries[outcome.claimed.id].scheduled_at)
        for outcome in outcomes
    ]
    executions.schedule(connection, refs, now)
    earliest = min(retry.scheduled_at for retry in retries.values())
    db.notify(connection, db.SCHEDULED_CHANNEL, repr(earliest.timestamp()))
    for outcome in outcomes:
        db.after_commit_on(connection, _announcement(outcome, paused, retries))
    return retries


def _announcement(
    outcome: Outcome, paused: Paused, retries: dict[int, Retry]
) -> t.Callable[[], None]:
    """What to send once the deferral committed: ``rate_limit_back_off`` for a job that heard
    the 429, ``defer_rate_limited`` for one held at its start by a pause."""
    keys = [charge.key for charge in paused.limits[outcome.claimed.id]]
    if not _heard_429(outcome):
        return functools.partial(
            signals.send_safely,
            signals.defer_rate_limited,
            registry.find(outcome.claimed.class_name),
            class_name=outcome.claimed.class_name,
            keys=keys,
            job_ids=[outcome.claimed.id],
            size=1,
        )
    backed_off = paused.backed_off
    until = [backed_off.until[key] for key in keys] or [backed_off.now + _pause(outcome)]
    job = outcome.job
    return functools.partial(
        back_off.announce,
        type(job) if job is not None else None,
        keys,
        max(until),
        job_id=outcome.claimed.id,
        class_name=outcome.claimed.class_name,
    )


def _heard_429(outcome: Outcome) -> bool:
    """Whether the job heard an API's 429; not when it was held at its start by a pause, or
    refused by its own budgets (``acquire`` timed out in its run: ``RateLimited`` with
    ``keys``)."""
    refused = isinstance(outcome.exception, errors.RateLimited) and outcome.exception.keys
    return not (outcome.held_at_start or refused)


def _pause(outcome: Outcome) -> dt.timedelta:
    return outcome.pause or dt.timedelta(0)


def _due_at(outcome: Outcome, charges: list[Charge], backed_off: back_off.BackedOff) -> dt.datetime:
    """When the job is looked at again: the latest of its budgets' next slots, each after the
    pause (taken on that budget, as a claim's deferral takes one), and not before the wait
    its outcome asks (the pause; an ``acquire``'s time until its budgets admit); with no
    budget, that wait's end."""
    now = backed_off.now
    wait = now + dt.timedelta(seconds=t.cast("Retry", outcome.retry).wait)
    if not charges:
        return wait
    return max(wait, rate_charges.defer(backed_off.locked, charges, now)[1])

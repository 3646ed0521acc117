"""A job's charges: every budget its rate limits charge at the claim, and how many units.

A job under one limit of one unit is charged by its ``rate_limit_key`` alone, the column
Solid Queue's limits use. Stacked limits (``limits_rate(name=)``) and limits counted in units
(``limits_rate(cost=)``) need more: the enqueue writes every budget and its units into
``solidq_jobs.rate_limit_charges``, evaluated once with the call's arguments (as the key is),
so a claim never runs a key or cost callable. Here: that column written and read, and the
admission of one job against all its budgets at once (every budget admits it, or none is
charged).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import typing as t

from flask_solidq.controls.rate_limit import gcra
from flask_solidq.definitions import registry

if t.TYPE_CHECKING:
    from flask_solidq.controls.rate_limit.budgets import Locked
    from flask_solidq.definitions.job import Job
    from flask_solidq.definitions.rate_limits import RateLimit
    from flask_solidq.values import ClaimedJob
    from flask_solidq.values import ControlKeys


@dataclasses.dataclass(frozen=True)
class Charge:
    """One budget a claim of a job charges: the limit, the budget's key, the units."""

    limit: RateLimit
    key: str
    units: int = 1

    @property
    def rate(self) -> gcra.Rate:
        return gcra.rate_of(self.limit)


def stamp(job: Job, row: ControlKeys) -> None:
    """Write the call's budget key (``rate_limit_key``, its main limit's) and, when it has
    more than one limit or one counted in units, every charge (``rate_limit_charges``).

    :raises ValueError: a key is too long, or a cost is outside 1 to its limit's burst.
    :raises TypeError: a cost callable gave something other than an int.
    """
    limits = type(job)._declared.active_rate_limits
    if not limits:
        return
    job_name, args, kwargs = type(job).job_name, job.arguments, job.kwargs
    stored = [limit.stored_key(job_name, args, kwargs) for limit in limits]
    row["rate_limit_key"] = stored[0]
    if len(limits) == 1 and not limits[0].counts_units:
        return
    charges = [
        [limit.name or "", key, limit.units_for(job_name, args, kwargs)]
        for limit, key in zip(limits, stored, strict=True)
        if key
    ]
    row["rate_limit_charges"] = json.dumps(charges, separators=(",", ":"))


def of(job: ClaimedJob) -> list[Charge]:
    """The charges a claim of ``job`` makes, by its definition's limits now.

    With ``rate_limit_charges`` stored, those of its limits still declared (a units count
    above a limit's burst now is cut to the burst: it would never be admitted otherwise).
    Without, its main limit's budget (``rate_limit_key``; the bare budget of the definition
    for a job stored before it declared the limit, none for a blank key). None for a job whose
    definition doesn't load or declares no limit now.
    """
    definition = registry.find(job.class_name, job.arguments)
    limits = definition._declared.active_rate_limits if definition is not None else ()
    if not limits:
        return []
    if job.rate_limit_charges is not None:
        stored = parse(job.rate_limit_charges)
        if stored is not None:
            by_name = {limit.name or "": limit for limit in limits}
            return [
                Charge(by_name[name], key, min(units, by_name[name].burst))
                for name, key, units in stored
                if name in by_name and key
            ]
    key = job.rate_limit_key
    if key is None:
        key = t.cast("type[Job]", definition).job_name
    return [Charge(limits[0], key)] if key else []


def parse(text: str) -> list[tuple[str, str, int]] | None:
    """The stored charges, or None for text that isn't a list of ``[name, key, units]``
    (the job is then charged by its main key, as one stored without them)."""
    try:
        charges = json.loads(text)
        return [(str(name), str(key), max(1, int(units))) for name, key, units in charges]
    except (ValueError, TypeError):
        return None


def admit(
    states: Locked, charges: list[Charge], now: dt.datetime, ahead: dt.timedelta | None
) -> dt.datetime | None:
    """Charge every budget of ``charges`` at the latest time one of them admits its units,
    when that is within ``ahead`` of ``now`` (by default each rate's ``charge_ahead``, the
    least of them); return that time, or None when one budget refuses (none is charged).

    Each budget is charged at the same moment, the one the job starts after, so the window
    bound of each holds on it (see "Charging ahead" in
    :mod:`~flask_solidq.controls.rate_limit.gcra`).
    """
    if len(charges) == 1:  # the usual case: one budget's own arithmetic
        (charge,) = charges
        return states[charge.key].admit_ahead(charge.rate, now, ahead, charge.units)
    most = min(charge.rate.charge_ahead for charge in charges)
    if ahead is not None:
        most = min(most, ahead)
    at = max(states[c.key].available_at(c.rate, now, c.units) for c in charges)
    if at - now > most:
        return None
    for charge in charges:
        states[charge.key].charge(charge.rate, at, charge.units)
    return at


def defer(states: Locked, charges: list[Charge], now: dt.datetime) -> tuple[str, dt.datetime]:
    """When a job its budgets refused looks again, and which budget says so: the latest of
    their next free slots, taken on that budget alone (the others' slots stay free for jobs
    that need only them); :data:`~flask_solidq.controls.rate_limit.gcra.MAX_AHEAD` from now (or the
    end of its back-off) when one of them has none that soon."""
    if len(charges) == 1:  # the usual case: one budget's own slot
        (charge,) = charges
        return charge.key, gcra.retry_time(states[charge.key], charge.rate, now, charge.units)
    latest: tuple[dt.datetime, Charge] | None = None
    for charge in charges:
        budget = states[charge.key]
        slot = budget.peek_slot(charge.rate, now, charge.units)
        if slot is None:
            return charge.key, budget.looks_again(now)
        if latest is None or slot > latest[0]:
            latest = (slot, charge)
    assert latest is not None  # a limited job has at least one charge
    slot, charge = latest
    states[charge.key].last_slot_at = slot
    return charge.key, slot

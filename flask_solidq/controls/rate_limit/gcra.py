"""The rate limit's arithmetic: GCRA over one budget, and the staggered slots of waiting jobs.

Pure functions of a budget's two times and the clock, with no database, so they are tested on
their own (a budget also notes the times it admitted at, for its ring of recent admissions,
:mod:`.admission_ring`, which the arithmetic never reads). For a limit of ``to`` per ``per``
with ``burst``:

* the emission interval is ``T = per / (to - burst + 1)``, rounded *up* to the microsecond
  (rounding down could let a window of ``per`` hold one claim more than ``to``), and the
  tolerance is ``tau = (burst - 1) * T``;
* ``tat``, the theoretical arrival time, is when the budget is next fully "on time". A claim at
  ``now`` is admitted when ``now >= tat - tau``; then ``tat = max(tat, now) + T``. A missing or
  idle budget (``tat <= now``) admits ``burst`` claims at once, then one every ``T``;
* in any window of length ``per`` (half open), admissions number at most ``to``: the last of
  ``n`` admissions comes at least ``(n - burst) * T`` after the first, and
  ``(to - burst + 1) * T = per``.

**Units.** A limit counted in units (``limits_rate(cost=)``) charges ``n`` units at once: a
claim of ``n`` is admitted when ``now >= tat - (burst - n) * T`` and sets
``tat = max(tat, now) + n * T`` (one unit is the rule above). The bound holds counted in
units: if admissions of ``n_1 ... n_k`` units (``S`` in all) fall in one window, the first at
``t_1``, then before the last ``tat >= t_1 + (S - n_k) * T``, so the last comes at
``t_k >= t_1 + (S - burst) * T``, and ``t_k - t_1 < per = (to - burst + 1) * T`` gives
``S <= to``. A job under several limits is charged on each budget at the same moment
(:mod:`~flask_solidq.controls.rate_limit.rate_charges`), so each budget's bound holds on its own.
A correction (:meth:`Budget.correct`, ``rate_limit_used``) moves ``tat`` as a charge of the
difference would: more units owed, up to the cap below, or units given back no further than
the moment of the correction, so nothing is admitted in the past on their account.

The bound assumes each budget is charged with clock readings that never go back: a claim
reads its clock only once it holds its budgets' locks
(:class:`~flask_solidq.controls.base.ClaimClock`), and the cap below would otherwise let a
stale reading lower a budget's debt. Clocks of different hosts must agree.

A looser limit caps the debt ``tat - now`` at ``burst * T`` of the new limit (the most a budget
under that limit can owe, give or take a claim charged ahead: see below), so admissions
restart within one new interval (plus :attr:`Rate.charge_ahead` at most); a tighter one starts
from the budget as the old limit left it.

**Charging ahead.** A worker whose claim reaches a budget a hair before its next admission
(the claim of the job that held the slot before it ran a few milliseconds late, so ``tat``
moved those milliseconds on) would otherwise go to the back of the line and leave its slot
empty: under ``burst=1`` every such miss costs a whole interval, and a backlog drained at
two thirds of the rate. So a claim within :attr:`Rate.charge_ahead` of the admission is admitted
*for that moment* (:meth:`Budget.admit_ahead`): the budget is charged at it, the claim row is
stamped with it, and the worker's thread waits for it before the job starts. Lateness then
no longer adds up: each admission comes at its slot or at the latest lateness so far, and
the window bound holds on the charged times, which are the ones the jobs start after.

The bound holds whatever order the charges come in: an admission at ``t`` after ``n - 1``
others, in the order they were charged, needs ``t >= tat - tau``, and ``tat`` is at least
``t_i + (n - i) * T`` for each earlier ``t_i``, so any ``m`` admissions of a window span
``(m - burst) * T`` or more, whichever of them was charged first. What must not happen is
the looser-limit cap lowering a debt that a charge ahead made: a later claim reads a clock
up to ``charge_ahead`` behind that charge. So the cap only cuts a debt more than
``charge_ahead`` past ``burst * T``, which no charge under the same limit leaves.

**Backing off.** An API's 429 (``RateLimited``, ``back_off``) sets ``backed_off_until``: a
budget admits nothing before it (:meth:`Budget.admit` refuses, :meth:`Budget.available_at`
and the slots start from it), and a longer pause is never shortened (:meth:`Budget.back_off`).
Its ``tat`` is left as it was: after the pause the budget admits at most its burst at once,
then one per interval, as a quiet one does. A job admitted before the pause that didn't start
gives its charge back (:meth:`Budget.correct` with the units negative).

A job the budget refuses waits for a *slot*: the next free one, ``T`` after the last slot
handed out and not before the budget could admit it, at most :data:`MAX_AHEAD` from now. A
slot is a hint of when to look again and never charges the budget.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fractions
import functools
import math
import typing as t

from flask_solidq.controls.rate_limit import admission_ring

if t.TYPE_CHECKING:
    from flask_solidq.definitions.rate_limits import RateLimit

#: How far ahead slots are handed out; a job past that looks again this long from now,
#: without taking a slot.
MAX_AHEAD = dt.timedelta(minutes=5)

#: How close to its budget's next admission a claim is admitted for that moment, its worker
#: thread waiting for it, instead of being sent to wait for a slot (see "Charging ahead"): a
#: quarter of the interval, within these bounds. Above the tens of milliseconds a claim runs
#: late after its slot on a loaded machine, and short enough that a thread held for it loses
#: little next to the interval it waits out anyway.
MIN_CHARGE_AHEAD = dt.timedelta(milliseconds=50)
MAX_CHARGE_AHEAD = dt.timedelta(milliseconds=250)


@dataclasses.dataclass(frozen=True)
class Rate:
    """A limit, as the arithmetic needs it: its interval and burst."""

    interval: dt.timedelta
    burst: int

    @classmethod
    def of(cls, to: int, per: float, burst: int) -> Rate:
        """The rate of ``to`` per ``per`` seconds with ``burst``; the interval is rounded up
        to the microsecond, in exact arithmetic (``per`` is read to the nanosecond, so a float
        such as 0.1 counts as the tenth it stands for)."""
        nanoseconds = round(per * 1_000_000_000)
        microseconds = math.ceil(fractions.Fraction(nanoseconds, 1000 * (to - burst + 1)))
        return cls(dt.timedelta(microseconds=microseconds), burst)

    @property
    def charge_ahead(self) -> dt.timedelta:
        """How far ahead of the clock a claim may be charged (see "Charging ahead")."""
        return min(max(self.interval / 4, MIN_CHARGE_AHEAD), MAX_CHARGE_AHEAD)

    @property
    def tolerance(self) -> dt.timedelta:
        """``tau``: how early before ``tat`` a claim is still admitted."""
        return self.interval * (self.burst - 1)

    def tolerance_for(self, units: int) -> dt.timedelta:
        """How early before ``tat`` a claim of ``units`` is still admitted: ``(burst - units)
        * T`` (``tau`` for one unit; never admitted when ``units`` exceeds the burst)."""
        return self.interval * (self.burst - units)


def rate_of(limit: RateLimit) -> Rate:
    """``limit`` as the arithmetic takes it (the same object for the same figures)."""
    return _rate(limit.to, limit.per, limit.burst)


@functools.lru_cache(maxsize=1024)
def _rate(to: int, per: float, burst: int) -> Rate:
    return Rate.of(to, per, burst)


@dataclasses.dataclass
class Budget:
    """The state of one budget (a ``solidq_rate_limits`` row); ``None`` for a missing row."""

    tat: dt.datetime | None = None
    last_slot_at: dt.datetime | None = None
    #: Its recent admissions, second by second, as stored (:mod:`.admission_ring`): a
    #: picture of the budget for people, never read by the arithmetic.
    admissions: str | None = None
    #: The times it admitted at since it was read, and the units of each, which :meth:`ring`
    #: adds to the stored ones.
    admitted_at: list[tuple[dt.datetime, int]] = dataclasses.field(default_factory=list)
    #: Until when it admits nothing (see "Backing off"); None when it was never paused.
    backed_off_until: dt.datetime | None = None

    def admit(self, rate: Rate, now: dt.datetime, units: int = 1) -> bool:
        """Charge ``units`` at ``now`` if the budget admits them; say whether it did."""
        tat = self._capped_tat(rate, now)
        self.tat = tat
        if (tat is not None and now < tat - rate.tolerance_for(units)) or self._pauses(now):
            return False
        self.charge(rate, now, units)
        return True

    def charge(self, rate: Rate, at: dt.datetime, units: int = 1) -> None:
        """Charge ``units`` at ``at``, which the caller found admitted (:meth:`available_at`
        at or before ``at``): ``tat = max(tat, at) + units * T``."""
        tat = self._capped_tat(rate, at)
        self.tat = max(tat or at, at) + rate.interval * units
        self.admitted_at.append((at, units))

    def admit_ahead(
        self, rate: Rate, now: dt.datetime, ahead: dt.timedelta | None = None, units: int = 1
    ) -> dt.datetime | None:
        """Charge ``units`` at the budget's next admission of them when that is at most
        ``ahead`` (at most, and by default, ``rate.charge_ahead``) from ``now`` (``now``
        itself when the budget admits now); return the time charged, or None when the budget
        refused (then nothing was charged)."""
        ahead = rate.charge_ahead if ahead is None else min(ahead, rate.charge_ahead)
        self.tat = self._capped_tat(rate, now)
        at = self.available_at(rate, now, units)
        if at - now > ahead or not self.admit(rate, at, units):
            return None
        return at

    def correct(self, rate: Rate, now: dt.datetime, units: int) -> None:
        """Charge ``units`` more (fewer, when negative) than a claim charged: a call that
        used more or less than its estimate. A debt is raised to at most ``burst`` intervals
        past ``now`` (what the cap would cut anyway, so a correction never makes the next
        claim cut a debt) and a refund lowers ``tat`` to ``now`` at most: units given back
        are admitted from the correction on, never in the past."""
        if not units:
            return
        tat = self._capped_tat(rate, now) or now
        moved = tat + rate.interval * units
        self.tat = min(moved, now + rate.interval * rate.burst) if units > 0 else max(moved, now)

    def ring(self) -> str | None:
        """Its admissions' ring as it is to be saved: the stored one and those since, in
        units."""
        return admission_ring.record_all(self.admissions, self.admitted_at)

    def available_at(self, rate: Rate, now: dt.datetime, units: int = 1) -> dt.datetime:
        """The earliest time ``units`` would be admitted (``now`` when they would be now)."""
        tat = self._capped_tat(rate, now)
        at = now if tat is None else max(now, tat - rate.tolerance_for(units))
        paused = self.backed_off_until
        return paused if paused is not None and at < paused else at

    def next_slot(self, rate: Rate, now: dt.datetime, units: int = 1) -> dt.datetime | None:
        """Hand out the next free slot to a job the budget refused; None when it would be
        more than :data:`MAX_AHEAD` away (the job then looks again that long from now)."""
        slot = self.peek_slot(rate, now, units)
        if slot is not None:
            self.last_slot_at = slot
        return slot

    def peek_slot(self, rate: Rate, now: dt.datetime, units: int = 1) -> dt.datetime | None:
        """The slot :meth:`next_slot` would hand out, without taking it."""
        slot = self.available_at(rate, now, units)
        if self.last_slot_at is not None:
            slot = max(slot, self.last_slot_at + rate.interval * units)
        return None if slot > now + MAX_AHEAD else slot

    def looks_again(self, now: dt.datetime) -> dt.datetime:
        """When a job with no slot looks again: :data:`MAX_AHEAD` from now, or the end of a
        longer back-off (nothing is admitted before it)."""
        later = now + MAX_AHEAD
        paused = self.backed_off_until
        return paused if paused is not None and paused > later else later

    def is_idle(self, now: dt.datetime) -> bool:
        """Whether the budget admits exactly as a missing one would: full, and no slot handed
        out ahead of ``now``. Such a row can be deleted without changing any admission."""
        return (
            (self.tat is None or self.tat <= now)
            and (self.last_slot_at is None or self.last_slot_at <= now)
            and not self._pauses(now)
        )

    def back_off(self, until: dt.datetime) -> None:
        """Admit nothing before ``until`` (an API's 429); a longer pause already there is
        kept."""
        if self.backed_off_until is None or self.backed_off_until < until:
            self.backed_off_until = until

    def _pauses(self, now: dt.datetime) -> bool:
        """Whether a back-off still holds the budget at ``now``."""
        return self.backed_off_until is not None and now < self.backed_off_until

    def _capped_tat(self, rate: Rate, now: dt.datetime) -> dt.datetime | None:
        """``tat``, its debt cut to ``burst`` intervals when it is more than
        ``rate.charge_ahead`` past them (a looser limit's; never a charge ahead's)."""
        if self.tat is None:
            return None
        cap = now + rate.interval * rate.burst
        return cap if self.tat > cap + rate.charge_ahead else self.tat


def retry_time(budget: Budget, rate: Rate, now: dt.datetime, units: int = 1) -> dt.datetime:
    """When a refused job looks again: its slot, or :data:`MAX_AHEAD` from now (the end of
    a longer back-off: nothing is admitted before it)."""
    return budget.next_slot(rate, now, units) or budget.looks_again(now)

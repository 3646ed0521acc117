"""The rate limit's arithmetic, without a database: GCRA over one budget
(:mod:`flask_solidq.controls.rate_limit.gcra`) and the staggered slots of refused jobs.

The guarantees of the seed's "What the limit guarantees" and "How waiting works", checked on
exact microsecond times: the interval rounded up, a burst at once then one per interval, no
window of ``per`` holding more than ``to``, the looser-limit cap, slots one interval apart and
never more than five minutes ahead, and idle budgets that admit as missing ones do.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
from fractions import Fraction

import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from flask_solidq.controls.rate_limit.gcra import MAX_AHEAD
from flask_solidq.controls.rate_limit.gcra import MAX_CHARGE_AHEAD
from flask_solidq.controls.rate_limit.gcra import MIN_CHARGE_AHEAD
from flask_solidq.controls.rate_limit.gcra import Budget
from flask_solidq.controls.rate_limit.gcra import Rate
from flask_solidq.controls.rate_limit.gcra import retry_time
from flask_solidq.timing import UTC

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MICROSECOND = dt.timedelta(microseconds=1)


def us(n: int) -> dt.timedelta:
    return dt.timedelta(microseconds=n)


def seconds(n: float) -> dt.timedelta:
    return dt.timedelta(seconds=n)


def microseconds(delta: dt.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def admit_all(budget: Budget, rate: Rate, now: dt.datetime, attempts: int) -> int:
    """Attempt ``attempts`` claims at ``now``; return how many the budget admitted."""
    return sum(budget.admit(rate, now) for _ in range(attempts))


# Strategies: a valid limit (interval at least 1 ms, as limits_rate requires), as the
# microseconds of ``per`` and ``to``, ``burst``.


@st.composite
def limits(draw: st.DrawFn, max_to: int = 30) -> tuple[int, int, int]:
    to = draw(st.integers(1, max_to))
    burst = draw(st.integers(1, to))
    slots = to - burst + 1
    per_us = draw(st.integers(1_000 * slots, 120_000_000))
    return to, per_us, burst


def rate_of(to: int, per_us: int, burst: int) -> Rate:
    return Rate.of(to, per_us / 1_000_000, burst)


# -- the interval ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "to, per, burst, interval_us",
    [
        (100, 60, 10, 659_341),  # 60 / 91 = 0.659340659... s, rounded up
        (1, 5, 1, 5_000_000),
        (10, 1, 6, 200_000),
        (10, 1, 3, 125_000),
        (3, 1, 1, 333_334),  # 333,333.33... rounded up, never down
        (2, 1, 2, 1_000_000),
        (100, 60, 100, 60_000_000),  # burst = to: one a minute after the burst
        (10, 10, 2, 1_111_112),
        (1000, 1, 1, 1_000),  # the shortest interval a declaration may have
        (7, 0.7, 1, 100_000),  # float noise in per * 1e6 doesn't round an exact interval up
        (3, 0.3, 1, 100_000),
        (10, dt.timedelta(minutes=1).total_seconds(), 1, 6_000_000),
    ],
)
def test_the_interval_is_per_over_to_minus_burst_plus_one_rounded_up_to_the_microsecond(
    to, per, burst, interval_us
):
    rate = Rate.of(to, per, burst)

    assert rate.interval == us(interval_us)
    assert rate.burst == burst
    assert rate.tolerance == us(interval_us) * (burst - 1)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), slots=st.integers(1, 1_000_000), burst=st.integers(1, 50))
def test_the_interval_is_the_smallest_microsecond_count_that_spaces_to_within_per(
    data, slots, burst
):
    # For per in whole microseconds, (to - burst + 1) intervals never fit in less than per,
    # and the interval is ceil(per / (to - burst + 1)) exactly, or (float noise in
    # per * 1e6 for a per of hours) one microsecond more, which only spaces claims wider.
    per_us = data.draw(st.integers(1_000 * slots, 10**10), label="per_us")
    to = slots + burst - 1
    expected = math.ceil(Fraction(per_us, slots))

    interval = microseconds(Rate.of(to, per_us / 1_000_000, burst).interval)

    assert interval * slots >= per_us
    assert expected <= interval <= expected + 1
    if per_us < 10**9:
        assert interval == expected


def test_the_interval_is_rounded_up_even_by_a_sliver_of_a_microsecond():
    # 3,600,000,001 us / 3,000,000 = 1200.000000333 us: limits_rate accepts this (1.2 ms).
    rate = Rate.of(3_000_000, 3600.000001, 1)

    assert rate.interval == us(1_201)
    assert rate.interval * 3_000_000 >= seconds(3600.000001)


# -- admission -------------------------------------------------------------------------------


def test_a_fresh_budget_admits_exactly_burst_at_once_then_one_per_interval():
    rate = Rate.of(10, 10, 3)  # T = 1.25 s
    budget = Budget()

    assert admit_all(budget, rate, T0, 10) == 3
    assert budget.tat == T0 + 3 * rate.interval
    for step in range(1, 8):
        moment = T0 + step * rate.interval
        assert not budget.admit(rate, moment - MICROSECOND), step
        assert budget.admit(rate, moment), step
        assert not budget.admit(rate, moment), step


def test_a_budget_with_burst_one_spaces_every_claim_by_the_interval():
    rate = Rate.of(1, 5, 1)
    budget = Budget()

    assert budget.admit(rate, T0)
    assert not budget.admit(rate, T0 + seconds(5) - MICROSECOND)
    assert budget.admit(rate, T0 + seconds(5))
    assert not budget.admit(rate, T0 + seconds(5))


def test_a_claim_is_admitted_at_exactly_tat_minus_tau_and_refused_a_microsecond_before():
    rate = Rate.of(10, 10, 3)  # T = 1.25 s, tau = 2.5 s
    tat = T0 + seconds(30)
    early = Budget(tat=tat)

    assert not early.admit(rate, tat - rate.tolerance - MICROSECOND)
    assert early.tat == tat  # a refusal doesn't charge the budget

    on_time = Budget(tat=tat)
    assert on_time.admit(rate, tat - rate.tolerance)
    assert on_time.tat == tat + rate.interval  # max(tat, now) + T


def test_a_late_claim_charges_from_now_not_from_the_old_tat():
    rate = Rate.of(10, 10, 3)
    budget = Budget(tat=T0)

    assert budget.admit(rate, T0 + seconds(100))
    assert budget.tat == T0 + seconds(100) + rate.interval


def test_a_missing_budget_is_available_now_and_a_spent_one_at_tat_minus_tau():
    rate = Rate.of(10, 10, 3)

    assert Budget().available_at(rate, T0) == T0
    assert Budget(tat=T0 - seconds(1)).available_at(rate, T0) == T0
    assert Budget(tat=T0 + seconds(3)).available_at(rate, T0) == T0 + seconds(0.5)
    assert Budget(tat=T0 + seconds(1)).available_at(rate, T0) == T0  # within the tolerance


#: How the next claims of a sequence come: after a random pause (microseconds), or exactly
#: when the budget next admits (None), the tightest a backlog can press on it.
Step = tuple[int | None, int]

steps = st.lists(
    st.tuples(st.one_of(st.none(), st.integers(0, 30_000_000)), st.integers(1, 4)),
    min_size=1,
    max_size=150,
)


@settings(max_examples=300, deadline=None)
@given(limit=limits(), sequence=steps)
def test_no_window_of_per_holds_more_than_to_admissions(limit, sequence):
    """Claims attempted at random (sorted) times and at the very moments the budget admits,
    several at one instant, admitted or not: every half-open window [start, start + per)
    holds at most ``to`` admissions. Refused claims take slots, which never charge."""
    to, per_us, burst = limit
    rate = rate_of(to, per_us, burst)
    budget = Budget()
    now = T0
    admitted: list[dt.datetime] = []
    for pause, attempts in sequence:
        now = budget.available_at(rate, now) if pause is None else now + us(pause)
        for _ in range(attempts):
            if budget.admit(rate, now):
                admitted.append(now)
            else:
                retry_time(budget, rate, now)

    # The busiest window starts at an admission; count those in [a, a + per).
    per = us(per_us)
    for index, start in enumerate(admitted):
        in_window = sum(1 for moment in admitted[index:] if moment < start + per)
        assert in_window <= to, (start, admitted)


@settings(max_examples=200, deadline=None)
@given(
    limit=limits(),
    debt_us=st.integers(0, 600_000_000),
    quiet_us=st.integers(0, 600_000_000),
)
def test_a_quiet_budget_admits_exactly_burst_at_once(limit, debt_us, quiet_us):
    # Whatever the budget owed, once its tat has passed it admits burst at once, no more.
    to, per_us, burst = limit
    rate = rate_of(to, per_us, burst)
    tat = T0 + us(debt_us)
    budget = Budget(tat=tat, last_slot_at=tat)
    now = tat + us(quiet_us)

    assert admit_all(budget, rate, now, burst + 3) == burst


def test_a_quiet_budget_after_a_backlog_lets_the_declared_burst_through():
    rate = Rate.of(100, 60, 10)
    budget = Budget()
    assert admit_all(budget, rate, T0, 50) == 10
    moment = T0
    for _ in range(40):
        moment += rate.interval
        assert admit_all(budget, rate, moment, 3) == 1

    quiet = budget.tat
    assert quiet is not None
    assert admit_all(budget, rate, quiet, 50) == 10


# -- changing the limit ----------------------------------------------------------------------


def test_a_looser_limit_caps_the_debt_at_burst_new_intervals():
    old = Rate.of(10, 600, 10)  # T = 600 s
    new = Rate.of(100, 60, 10)  # T = 0.659341 s
    budget = Budget()
    assert admit_all(budget, old, T0, 10) == 10
    assert budget.tat == T0 + seconds(6000)  # owed 100 minutes under the old limit

    # The first claim under the new limit is refused, and caps the debt it stores.
    assert budget.available_at(new, T0) == T0 + new.interval
    assert not budget.admit(new, T0)
    assert budget.tat == T0 + new.interval * new.burst
    assert not budget.admit(new, T0 + new.interval - MICROSECOND)
    assert budget.admit(new, T0 + new.interval)


@settings(max_examples=300, deadline=None)
@given(old=limits(), new=limits(), debt_us=st.integers(0, 10**10), attempts=st.integers(0, 40))
def test_admissions_restart_within_one_new_interval_whatever_the_debt(old, new, debt_us, attempts):
    old_rate, new_rate = rate_of(*old), rate_of(*new)
    budget = Budget()
    admit_all(budget, old_rate, T0, attempts)  # the old limit's own debt
    if debt_us:
        budget.tat = T0 + us(debt_us)  # or any debt at all

    # Within one new interval, or charge_ahead more: a debt that little past the new burst
    # could be a claim charged ahead under the new limit itself, which the cap must keep.
    restart = T0 + new_rate.interval + new_rate.charge_ahead
    assert budget.available_at(new_rate, T0) <= restart
    budget.admit(new_rate, T0)  # the first claim under the new limit, admitted or not
    assert budget.tat is not None
    assert budget.tat <= T0 + new_rate.interval * new_rate.burst + new_rate.charge_ahead
    assert budget.admit(new_rate, restart)


def test_a_debt_just_past_the_burst_is_kept_and_one_further_is_cut():
    rate = Rate.of(1, 1, 1)  # T = 1 s, charge_ahead 0.25 s
    kept = Budget(tat=T0 + seconds(1.25))
    assert kept.available_at(rate, T0) == T0 + seconds(1.25)
    cut = Budget(tat=T0 + seconds(1.25) + MICROSECOND)
    assert cut.available_at(rate, T0) == T0 + seconds(1)


# -- charging ahead --------------------------------------------------------------------------


def test_a_claim_a_hair_early_is_charged_at_the_admission_and_lateness_does_not_add_up():
    rate = Rate.of(5, 1, 1)  # T = 0.2 s
    budget = Budget()
    assert budget.admit_ahead(rate, T0) == T0
    # The next claim comes 3 ms early: charged at T0 + T, not sent to wait.
    assert budget.admit_ahead(rate, T0 + seconds(0.197)) == T0 + seconds(0.2)
    # One 7 ms late is charged when it comes; the next, 2 ms late, waits the 5 ms for it.
    assert budget.admit_ahead(rate, T0 + seconds(0.407)) == T0 + seconds(0.407)
    assert budget.admit_ahead(rate, T0 + seconds(0.602)) == T0 + seconds(0.607)
    assert budget.tat == T0 + seconds(0.807)


@pytest.mark.parametrize(
    ("to", "per", "ahead"),
    [(5, 1, MIN_CHARGE_AHEAD), (1, 1, dt.timedelta(seconds=0.25)), (1, 60, MAX_CHARGE_AHEAD)],
)
def test_a_claim_is_charged_ahead_by_a_quarter_interval_within_bounds(to, per, ahead):
    assert Rate.of(to, per, 1).charge_ahead == ahead


def test_a_claim_further_than_charge_ahead_is_refused_and_charges_nothing():
    rate = Rate.of(5, 1, 1)  # T = 0.2 s: charge_ahead 50 ms
    budget = Budget()
    assert budget.admit_ahead(rate, T0) == T0
    early = T0 + seconds(0.2) - seconds(0.05) - MICROSECOND
    assert budget.admit_ahead(rate, early) is None
    assert budget.tat == T0 + seconds(0.2)
    assert budget.admit_ahead(rate, early, ahead=dt.timedelta(0)) is None
    assert budget.admit_ahead(rate, early + MICROSECOND) == T0 + seconds(0.2)


@settings(max_examples=300, deadline=None)
@given(limit=limits(), sequence=steps, ahead_us=st.one_of(st.none(), st.integers(0, 250_000)))
def test_charges_ahead_keep_every_window_of_per_within_to(limit, sequence, ahead_us):
    """As the window test above, with every claim allowed to be charged up to ``ahead`` past
    its clock: the charged times, whatever order they came in, never put more than ``to`` in
    a window of ``per``. The clock itself never goes back."""
    to, per_us, burst = limit
    rate = rate_of(to, per_us, burst)
    ahead = None if ahead_us is None else us(ahead_us)
    most = rate.charge_ahead if ahead is None else min(ahead, rate.charge_ahead)
    budget = Budget()
    now = T0
    charged: list[dt.datetime] = []
    for pause, attempts in sequence:
        target = budget.available_at(rate, now) - most if pause is None else now + us(pause)
        now = max(now, target)
        for _ in range(attempts):
            at = budget.admit_ahead(rate, now, ahead)
            if at is None:
                retry_time(budget, rate, now)
            else:
                assert now <= at <= now + most
                charged.append(at)

    per = us(per_us)
    charged.sort()
    for index, start in enumerate(charged):
        in_window = sum(1 for moment in charged[index:] if moment < start + per)
        assert in_window <= to, (start, charged)


def test_a_tighter_limit_starts_from_the_budget_as_the_old_one_left_it():
    old = Rate.of(10, 10, 3)  # T = 1.25 s: 3 at once leave tat at T0 + 3.75 s
    new = Rate.of(2, 10, 1)  # T = 5 s, no tolerance
    budget = Budget()
    assert admit_all(budget, old, T0, 3) == 3
    assert budget.tat == T0 + seconds(3.75)

    # Neither a fresh budget of the new limit (now) nor one new interval on (T0 + 5 s).
    assert budget.available_at(new, T0) == T0 + seconds(3.75)
    assert not budget.admit(new, T0 + seconds(3.75) - MICROSECOND)
    assert budget.admit(new, T0 + seconds(3.75))
    assert budget.tat == T0 + seconds(8.75)
    assert not budget.admit(new, T0 + seconds(8.75) - MICROSECOND)
    assert budget.admit(new, T0 + seconds(8.75))


def test_a_tighter_limit_with_a_larger_burst_admits_what_the_old_state_allows():
    # A window that spans the change can hold more than the new limit: the old budget's
    # 3 at once, then whatever the new tolerance allows on top of its tat.
    old = Rate.of(10, 10, 3)  # tat = T0 + 3.75 s after 3
    new = Rate.of(5, 10, 3)  # T = 3.333334 s, tau = 6.666668 s
    budget = Budget()
    assert admit_all(budget, old, T0, 3) == 3

    assert admit_all(budget, new, T0, 5) == 1
    assert budget.tat == T0 + seconds(3.75) + new.interval


# -- slots -----------------------------------------------------------------------------------


def test_refused_claims_get_slots_one_interval_apart_from_when_the_budget_admits():
    rate = Rate.of(10, 10, 2)  # T = 1.111112 s
    budget = Budget()
    assert admit_all(budget, rate, T0, 2) == 2
    available = budget.available_at(rate, T0)
    assert available == T0 + rate.interval

    slots = []
    for _ in range(5):
        assert not budget.admit(rate, T0)
        slots.append(retry_time(budget, rate, T0))

    assert slots == [available + step * rate.interval for step in range(5)]
    assert budget.last_slot_at == slots[-1]
    assert budget.tat == T0 + 2 * rate.interval  # slots never charge the budget


def test_the_first_slot_is_the_earliest_moment_the_budget_admits_again():
    rate = Rate.of(10, 10, 3)
    budget = Budget()
    admit_all(budget, rate, T0, 3)
    assert not budget.admit(rate, T0)

    slot = retry_time(budget, rate, T0)

    assert not copy.deepcopy(budget).admit(rate, slot - MICROSECOND)
    assert copy.deepcopy(budget).admit(rate, slot)


def test_a_later_claim_hands_out_slots_after_the_last_one_given():
    rate = Rate.of(1, 60, 1)
    budget = Budget()
    assert budget.admit(rate, T0)
    assert retry_time(budget, rate, T0) == T0 + seconds(60)
    assert retry_time(budget, rate, T0) == T0 + seconds(120)

    later = T0 + seconds(10)
    assert not budget.admit(rate, later)
    assert retry_time(budget, rate, later) == T0 + seconds(180)


def test_a_stale_slot_in_the_past_doesnt_push_the_next_one_back():
    rate = Rate.of(1, 60, 1)
    budget = Budget(last_slot_at=T0 - seconds(600))
    assert budget.admit(rate, T0)

    assert retry_time(budget, rate, T0) == T0 + seconds(60)


def test_a_slot_is_never_before_the_budget_admits_even_after_a_looser_limit():
    # Slots the old limit handed out stay; new ones follow them, one new interval apart.
    old, new = Rate.of(1, 60, 1), Rate.of(60, 60, 1)
    budget = Budget()
    assert budget.admit(old, T0)
    for _ in range(3):
        retry_time(budget, old, T0)
    assert budget.last_slot_at == T0 + seconds(180)

    assert not budget.admit(new, T0)
    assert retry_time(budget, new, T0) == T0 + seconds(181)


@settings(max_examples=300, deadline=None)
@given(
    limit=limits(),
    offsets=st.lists(st.integers(0, 600_000_000), min_size=1, max_size=80),
)
def test_slots_are_staggered_and_never_before_the_budget_admits(limit, offsets):
    rate = rate_of(*limit)
    budget = Budget()
    given_slots: list[dt.datetime] = []
    for offset in sorted(offsets):
        now = T0 + us(offset)
        if budget.admit(rate, now):
            continue
        available = budget.available_at(rate, now)
        previous = budget.last_slot_at
        until = retry_time(budget, rate, now)
        assert now < until <= now + MAX_AHEAD
        if budget.last_slot_at == previous and until == now + MAX_AHEAD:
            continue  # past the horizon: no slot taken
        assert until == budget.last_slot_at
        assert until >= available
        if given_slots:
            assert until >= given_slots[-1] + rate.interval
        given_slots.append(until)


# -- five minutes ahead ----------------------------------------------------------------------


def test_slots_stop_five_minutes_ahead_and_later_jobs_look_again_in_five_minutes():
    rate = Rate.of(1, 60, 1)
    budget = Budget()
    assert budget.admit(rate, T0)

    untils = [retry_time(budget, rate, T0) for _ in range(7)]

    minutes = [seconds(60 * n) for n in (1, 2, 3, 4, 5)]
    assert untils == [T0 + minute for minute in minutes] + [T0 + MAX_AHEAD] * 2
    assert MAX_AHEAD == dt.timedelta(minutes=5)
    assert budget.last_slot_at == T0 + MAX_AHEAD  # the horizon's jobs took no slot


def test_next_slot_says_none_past_the_horizon_and_takes_no_slot():
    rate = Rate.of(1, 60, 1)
    budget = Budget(tat=T0 + seconds(60), last_slot_at=T0 + seconds(300))

    assert budget.next_slot(rate, T0) is None
    assert budget.last_slot_at == T0 + seconds(300)
    # A minute later the horizon has moved: the next slot is free again.
    assert budget.next_slot(rate, T0 + seconds(60)) == T0 + seconds(360)


def test_a_budget_that_admits_only_beyond_the_horizon_hands_out_no_slot():
    rate = Rate.of(1, 600, 1)  # T = 10 minutes
    budget = Budget()
    assert budget.admit(rate, T0)

    assert retry_time(budget, rate, T0) == T0 + MAX_AHEAD
    assert budget.last_slot_at is None


# -- idle budgets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tat, last_slot_at, idle",
    [
        (None, None, True),
        (T0 - seconds(1), None, True),
        (T0, None, True),
        (T0, T0, True),
        (T0 - seconds(5), T0 - seconds(1), True),
        (T0 + MICROSECOND, None, False),
        (T0 - seconds(5), T0 + MICROSECOND, False),
        (None, T0 + seconds(1), False),
    ],
)
def test_a_budget_is_idle_when_it_is_full_and_has_no_slot_ahead(tat, last_slot_at, idle):
    assert Budget(tat=tat, last_slot_at=last_slot_at).is_idle(T0) is idle


def test_a_budget_that_owes_or_holds_a_slot_ahead_decides_unlike_a_missing_one():
    rate = Rate.of(10, 10, 3)
    owing = Budget(tat=T0 + MICROSECOND)
    assert admit_all(owing, rate, T0, 5) < admit_all(Budget(), rate, T0, 5)

    holding, missing = Budget(tat=T0, last_slot_at=T0 + seconds(1)), Budget()
    for budget in (holding, missing):
        assert admit_all(budget, rate, T0, 4) == 3
    assert retry_time(holding, rate, T0) != retry_time(missing, rate, T0)


Event = tuple[int, int]  # (microseconds after the idle check, claims attempted then)


def _decisions(budget: Budget, rate: Rate, start: dt.datetime, events: list[Event]) -> list:
    out: list = []
    for offset, attempts in events:
        now = start + us(offset)
        for _ in range(attempts):
            if budget.admit(rate, now):
                out.append(("admitted", offset))
            else:
                out.append(("waits until", retry_time(budget, rate, now)))
    return out


@settings(max_examples=300, deadline=None)
@given(
    limit=limits(),
    tat_offset=st.one_of(st.none(), st.integers(-600_000_000, 60_000_000)),
    slot_offset=st.one_of(st.none(), st.integers(-600_000_000, 60_000_000)),
    events=st.lists(
        st.tuples(st.integers(0, 400_000_000), st.integers(1, 5)), min_size=1, max_size=30
    ),
)
def test_an_idle_budget_decides_exactly_as_a_missing_one(limit, tat_offset, slot_offset, events):
    """A budget idle at ``now`` can be deleted: any sequence of claims from then on is
    admitted, refused and given slots exactly as with no row."""
    rate = rate_of(*limit)
    now = T0 + seconds(600)
    idle = Budget(
        tat=None if tat_offset is None else now + us(tat_offset),
        last_slot_at=None if slot_offset is None else now + us(slot_offset),
    )
    assume(idle.is_idle(now))
    # The row a claim inserts for a budget seen the first time is idle too.
    inserted = Budget(tat=now)
    assert inserted.is_idle(now)

    ordered = sorted(events)
    expected = _decisions(Budget(), rate, now, ordered)

    assert _decisions(idle, rate, now, ordered) == expected
    assert _decisions(inserted, rate, now, ordered) == expected


# Backing off: an API said 429, and the budget admits nothing until backed_off_until.


def test_a_backed_off_budget_admits_nothing_until_the_pause_ends_then_burst_then_one_by_one():
    rate = Rate.of(4, 1, 2)  # two at once, then one every 1/3 s
    until = T0 + seconds(30)
    budget = Budget(backed_off_until=until)

    assert budget.available_at(rate, T0) == until
    assert not budget.admit(rate, T0)
    assert not budget.admit(rate, until - MICROSECOND)
    assert budget.admit_ahead(rate, T0 + seconds(10)) is None
    # The pause left its times alone: at its end it admits as a quiet budget, the burst...
    assert admit_all(budget, rate, until, 5) == 2
    # ...then one per interval.
    assert budget.available_at(rate, until) == until + rate.interval
    assert admit_all(budget, rate, until + rate.interval, 5) == 1


def test_a_back_off_shorter_than_the_debt_changes_nothing():
    rate = Rate.of(1, 60, 1)
    budget = Budget(tat=T0 + seconds(60), backed_off_until=T0 + seconds(10))
    assert budget.available_at(rate, T0) == T0 + seconds(60)


def test_a_long_back_off_is_not_cut_by_the_looser_limit_cap():
    """A pause lives in its own field: the cap on ``tat``'s debt can't shorten it."""
    rate = Rate.of(10, 1, 1)
    until = T0 + seconds(3600)
    budget = Budget(tat=T0, backed_off_until=until)
    assert budget.available_at(rate, T0) == until
    assert not budget.admit(rate, T0 + seconds(3599))
    assert budget.admit(rate, until)


def test_slots_handed_out_during_a_back_off_start_at_its_end_one_interval_apart():
    rate = Rate.of(4, 1, 2)
    until = T0 + seconds(2)
    budget = Budget(backed_off_until=until)
    slots = [budget.next_slot(rate, T0) for _ in range(3)]
    assert slots == [until, until + rate.interval, until + rate.interval * 2]


def test_a_back_off_past_the_horizon_sends_refused_jobs_to_its_end():
    rate = Rate.of(1, 60, 1)
    until = T0 + MAX_AHEAD * 3
    budget = Budget(backed_off_until=until)
    assert budget.next_slot(rate, T0) is None
    assert retry_time(budget, rate, T0) == until
    # A pause within the horizon hands out slots as usual.
    assert retry_time(Budget(backed_off_until=T0 + seconds(5)), rate, T0) == T0 + seconds(5)


def test_a_backed_off_budget_is_not_idle_until_the_pause_ends():
    budget = Budget(tat=T0 - seconds(1), backed_off_until=T0 + seconds(1))
    assert not budget.is_idle(T0)
    assert budget.is_idle(T0 + seconds(1))

"""Stacked rate limits (``limits_rate(name=)``) and limits counted in units
(``limits_rate(cost=)``) in the database, on every backend: jobs enqueued, claimed with
:func:`flask_solidq.operations.claim.claim_batch` directly, and the budgets read back.

A claim's clock is the ``updated_at`` it writes on the budgets it locked, so every expected
``tat`` is exact. The window bounds across worker processes are checked in
:mod:`tests.controls.rate_limit.test_rate_limit_processes`.
"""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import pytest

from flask_solidq import limits_rate
from flask_solidq.controls.rate_limit.gcra import MAX_AHEAD
from flask_solidq.controls.rate_limit.limiter import RateLimiter
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations import job_loading
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from tests import support
from tests.controls.rate_limit.test_rate_limit_claims import BUDGETS
from tests.controls.rate_limit.test_rate_limit_claims import CLAIMERS  # noqa: F401 - registered claimers
from tests.controls.rate_limit.test_rate_limit_claims import PROCESS_ID
from tests.controls.rate_limit.test_rate_limit_claims import budget
from tests.controls.rate_limit.test_rate_limit_claims import budget_keys
from tests.controls.rate_limit.test_rate_limit_claims import claim_batch
from tests.controls.rate_limit.test_rate_limit_claims import claim_clock
from tests.controls.rate_limit.test_rate_limit_claims import claimed_ids
from tests.controls.rate_limit.test_rate_limit_claims import deferred_ids
from tests.controls.rate_limit.test_rate_limit_claims import job_row
from tests.controls.rate_limit.test_rate_limit_claims import later
from tests.controls.rate_limit.test_rate_limit_claims import scheduled_at
from tests.jobs import rate_limit_stacked as jobs
from tests.support import solidq
from tests.support.concurrency import JOBS

if t.TYPE_CHECKING:
    from flask import Flask

MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)

MAIN = "stacked_test.minutely_hourly/global"
HOURLY = "stacked_test.minutely_hourly/hourly/global"

#: What one unit of ``stacked_test.tokens`` moves its budget by: T = per / (to - burst + 1),
#: a whole minute with burst = to (the seed's rule: "to: 100, burst: 100 admits 100 at once,
#: then one a minute"), so a budget's room is easy to count in the tests.
UNIT = dt.timedelta(seconds=60)


def charges(engine: t.Any, job_id: int) -> list[list[t.Any]] | None:
    stored = job_row(engine, job_id).rate_limit_charges
    return None if stored is None else json.loads(stored)


# -- declarations ----------------------------------------------------------------------------


def test_stacked_limits_store_the_main_key_and_every_charge_with_its_name(app, engine):
    job_id = later(app, jobs.minutely_hourly)

    assert job_row(engine, job_id).rate_limit_key == MAIN
    assert charges(engine, job_id) == [["", MAIN, 1], ["hourly", HOURLY, 1]]


def test_a_job_under_one_limit_of_one_unit_stores_no_charges(app, engine):
    from tests.jobs import rate_limit as plain

    job_id = later(app, plain.global_job)

    assert charges(engine, job_id) is None


def test_declared_limits_read_back_in_the_order_written_the_main_one_first():
    limits = jobs.minutely_hourly._declared.rate_limits

    assert [limit.name for limit in limits] == [None, "hourly"]
    assert jobs.minutely_hourly.rate_limits == limits
    assert jobs.minutely_hourly.rate_limit_to == 1  # the main one's
    assert jobs.minutely_hourly.rate_limit_key_for() == MAIN


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ({}, {}, "declares limits_rate twice"),
        ({"name": "daily"}, {"name": "daily"}, "two limits named 'daily'"),
    ],
)
def test_two_limits_of_one_name_on_one_job_are_refused(first, second, message):
    with pytest.raises(ValueError, match=message):

        @limits_rate(to=1, per=1, key="a", **first)
        @limits_rate(to=1, per=1, key="a", **second)
        class Twice(solidq.Job):
            job_name = "stacked_test.twice"

            def perform(self) -> None: ...


@pytest.mark.parametrize("name", ["", "a/b", 3])
def test_a_name_must_be_a_non_empty_str_without_a_slash(name):
    with pytest.raises(ValueError, match="name="):
        limits_rate(to=1, per=1, key="a", name=name)


def test_a_cost_above_the_burst_or_below_one_is_refused_when_declared():
    with pytest.raises(ValueError, match="can't exceed burst=5"):
        limits_rate(to=10, per=1, burst=5, key="a", cost=6)
    with pytest.raises(ValueError, match="positive int"):
        limits_rate(to=10, per=1, key="a", cost=0)


# -- every budget admits, or none is charged ------------------------------------------------


def test_a_claim_is_admitted_when_every_budget_admits_and_charges_each(app, engine):
    first, second = later(app, jobs.minutely_hourly, 1), later(app, jobs.minutely_hourly, 2)

    batch = claim_batch(engine)

    assert claimed_ids(batch) == [first]
    assert deferred_ids(batch) == [second]
    now = claim_clock(engine, MAIN)
    assert budget(engine, MAIN).tat == now + MINUTE
    # The hourly budget (five at once, then one an hour) was charged once, by the admitted
    # job only: the deferred one charged nothing.
    assert budget(engine, HOURLY).tat == now + HOUR
    # The deferred job waits for the main budget's slot, taken there alone.
    assert scheduled_at(engine, second) == now + MINUTE
    assert budget(engine, MAIN).last_slot_at == now + MINUTE
    assert budget(engine, HOURLY).last_slot_at is None


def test_a_job_refused_by_a_named_budget_waits_for_its_slot_and_charges_no_other(app, engine):
    first, second = later(app, jobs.hourly_tight, 1), later(app, jobs.hourly_tight, 2)

    batch = claim_batch(engine)

    assert (claimed_ids(batch), deferred_ids(batch)) == ([first], [second])
    main, hourly = "stacked_test.hourly_tight/global", "stacked_test.hourly_tight/hourly/global"
    now = claim_clock(engine, main)
    assert budget(engine, main).tat == now + dt.timedelta(seconds=1)  # one charge only
    # Its slot is an hour away, beyond the five minutes slots are handed out for: it looks
    # again in five minutes, taking no slot.
    assert scheduled_at(engine, second) == now + MAX_AHEAD
    assert budget(engine, hourly).last_slot_at is None


def test_each_job_is_admitted_as_often_as_its_tightest_budget_allows(app, engine):
    ids = [later(app, jobs.hourly_tight, index) for index in range(3)]
    jobs_in_hour = [later(app, jobs.minutely_hourly, index) for index in range(3)]

    batch = claim_batch(engine)

    assert sorted(claimed_ids(batch)) == sorted([ids[0], jobs_in_hour[0]])


def test_a_group_shares_each_named_budget_by_its_name_and_key(app, engine):
    a = later(app, jobs.sync_shop, "acme")
    b = later(app, jobs.refund_shop, "acme")
    c = later(app, jobs.refund_shop, "acme")
    other = later(app, jobs.sync_shop, "globex")

    batch = claim_batch(engine)

    assert sorted(claimed_ids(batch)) == sorted([a, b, other])
    assert deferred_ids(batch) == [c]
    assert budget_keys(engine) == [
        "stacked_test.Shop/acme",
        "stacked_test.Shop/daily/acme",
        "stacked_test.Shop/daily/globex",
        "stacked_test.Shop/globex",
    ]


def test_the_rate_limiter_reads_a_named_budget_by_its_declaration(app, engine):
    later(app, jobs.hourly_tight, 1)
    claim_batch(engine)

    with app.app_context():
        limiter = RateLimiter()
        assert limiter.is_limited("stacked_test.hourly_tight/hourly/global")
        assert not limiter.is_limited("stacked_test.hourly_tight/global")
        waits = limiter.time_until_available("stacked_test.hourly_tight/hourly/global")
    assert 3590 < waits <= 3600


# -- units ------------------------------------------------------------------------------------


def test_a_call_charges_its_cost_in_units_and_the_next_waits_for_room(app, engine):
    first = later(app, jobs.tokens, 60)
    second = later(app, jobs.tokens, 36)
    third = later(app, jobs.tokens, 8)

    batch = claim_batch(engine)

    assert claimed_ids(batch) == [first, second]
    assert deferred_ids(batch) == [third]
    assert charges(engine, first) == [["", "stacked_test.tokens/openai", 60]]
    now = claim_clock(engine, "stacked_test.tokens/openai")
    # 96 units charged: tat = now + 96 units; 8 more fit once tat - (100 - 8) units <= now.
    assert budget(engine, "stacked_test.tokens/openai").tat == now + 96 * UNIT
    assert scheduled_at(engine, third) == now + 4 * UNIT


def test_a_call_whose_cost_exceeds_the_burst_fails_at_enqueue_with_nothing_stored(app, engine):
    with app.app_context(), pytest.raises(ValueError, match="costs 101 units"):
        jobs.tokens.perform_later(101)
    with app.app_context(), pytest.raises(TypeError, match="must give an int"):
        jobs.tokens.perform_later("many")

    assert support.count(engine, JOBS) == 0


def perform_one(app: Flask, engine: t.Any) -> Outcome:
    (claimed,) = claim_batch(engine).jobs
    with app.app_context():
        outcome = execute.perform(claimed)
    finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=True)
    return outcome


@pytest.mark.parametrize(("used", "room_for"), [(10, 90), (60, 40), (95, 5)])
def test_rate_limit_used_corrects_the_budget_by_what_the_call_took(
    app, engine, monkeypatch, used, room_for
):
    monkeypatch.setitem(jobs.USED, "estimate", used)
    later(app, jobs.tokens, 60, "estimate")
    assert perform_one(app, engine).kind is OutcomeKind.FINISHED

    # The budget's room is what the call really used, not its estimate of 60.
    fits = later(app, jobs.tokens, room_for)
    too_many = later(app, jobs.tokens, 1)
    batch = claim_batch(engine)
    assert claimed_ids(batch) == [fits]
    assert deferred_ids(batch) == [too_many]


def test_a_second_report_corrects_from_the_first_not_from_the_estimate(app, engine):
    later(app, jobs.points_and_calls, 40)
    key = "stacked_test.points_and_calls/points/shop"
    (claimed,) = claim_batch(engine).jobs
    with app.app_context():
        job = job_loading.load(claimed)
        assert job.rate_limit_used(45) == 1  # the weighted limit only
        assert job.rate_limit_used(45) == 1  # no change: already 45
        with pytest.raises(ValueError, match="no limit of that name"):
            job.rate_limit_used(1, name="missing")
        with pytest.raises(ValueError, match="0 or more"):
            job.rate_limit_used(-1)
    # 45 of 50 points taken: 5 more fit, 6 don't.
    five, six = later(app, jobs.points_and_calls, 5), later(app, jobs.points_and_calls, 6)
    batch = claim_batch(engine)
    assert (claimed_ids(batch), deferred_ids(batch)) == ([five], [six])
    assert budget(engine, key)  # the row the corrections wrote


def test_rate_limit_used_on_a_job_performed_in_process_corrects_nothing(app):
    with app.app_context():
        job = jobs.tokens.new(5)
        assert job.rate_limit_used(3) == 0


def test_budget_rows_of_units_count_their_units_in_the_admissions_ring(app, engine):
    later(app, jobs.tokens, 60)
    later(app, jobs.tokens, 30)
    claim_batch(engine)

    (row,) = support.rows(engine, BUDGETS, BUDGETS.c.key == "stacked_test.tokens/openai")
    assert row.admissions.endswith(":90")

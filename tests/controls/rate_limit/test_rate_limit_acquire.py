"""``with solidq.rate_limiter.acquire(name, timeout=...)``: admissions taken by code outside
jobs from a named budget (``rate_limiter.register``) or a job's budget, on every backend.

An admission is charged on the budget's row by the database's clock, with the claim's GCRA
arithmetic, so jobs (claimed here as a worker's claim does) and callers share one budget. The
budgets are in :mod:`tests.jobs.named_budgets`; waits are on conditions with deadlines, and
every time checked is the one the budget was charged at (``Admission.admitted_at``).
"""

from __future__ import annotations

import datetime as dt
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import RateLimited
from flask_solidq import signals
from flask_solidq.controls.rate_limit.admissions import Admission
from flask_solidq.models.tables import BUDGETS
from flask_solidq.storage import database_clock
from flask_solidq.testing import frozen_clock
from tests import support
from tests.jobs import named_budgets as jobs

if t.TYPE_CHECKING:
    from flask import Flask

PROCESS_ID = 4949
CLAIMERS = (PROCESS_ID,)

limiter = support.solidq.rate_limiter

HALF_SECOND = dt.timedelta(seconds=0.5)


def budget(engine: sa.Engine, key: str) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, BUDGETS, BUDGETS.c.key == key)
    return row


def take(app: Flask, target: t.Any, *args: t.Any, timeout: float | None = 5) -> Admission:
    """One admission, its block left at once."""
    with app.app_context(), limiter.acquire(target, *args, timeout=timeout) as admission:
        return admission


# -- admitting at the rate, by the database's clock --------------------------------------------


def test_acquire_admits_at_the_budgets_rate_by_the_databases_clock(app, engine):
    with app.app_context():
        before = database_clock.read_now(engine)
    admissions = [take(app, jobs.HALF_SECOND) for _ in range(4)]
    with app.app_context():
        after = database_clock.read_now(engine)

    times = [t.cast(dt.datetime, admission.admitted_at) for admission in admissions]
    assert all(admission.keys == ("nb_test.half_second",) for admission in admissions)
    # Charged by the database's clock, inside the calls (a charge ahead is within 0.25 s).
    assert before <= times[0] and times[-1] <= after + dt.timedelta(seconds=0.25)
    # Two a second, burst 1: each a whole interval after the one before, no sooner.
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert len(gaps) == 3 and all(gap >= HALF_SECOND for gap in gaps), gaps
    # The row holds the last charge: tat is one interval past it.
    assert budget(engine, "nb_test.half_second").tat == times[-1] + HALF_SECOND


def test_a_caller_refused_waits_for_the_next_admission_within_its_timeout(app, engine):
    first = take(app, jobs.SECONDLY)
    started = time.monotonic()

    second = take(app, jobs.SECONDLY, timeout=5)

    assert t.cast(dt.datetime, second.admitted_at) - t.cast(
        dt.datetime, first.admitted_at
    ) >= dt.timedelta(seconds=1)
    assert time.monotonic() - started < 5


def test_none_within_the_timeout_raises_rate_limited_at_once_with_the_wait(app, engine):
    take(app, jobs.MINUTELY)
    started = time.monotonic()

    with pytest.raises(RateLimited) as error:
        take(app, jobs.MINUTELY, timeout=2)

    # The next admission is a minute away, past the timeout: no point waiting it out.
    assert time.monotonic() - started < 2
    assert error.value.keys == ("nb_test.minutely",)
    assert dt.timedelta(seconds=58) < error.value.retry_after <= dt.timedelta(seconds=60)
    assert str(error.value).startswith("Rate limited by the budget 'nb_test.minutely'")
    # Refusing charged nothing and paused nothing.
    assert budget(engine, "nb_test.minutely").backed_off_until is None


def test_timeout_zero_tries_once(app, engine):
    take(app, jobs.MINUTELY, timeout=0)
    with pytest.raises(RateLimited):
        take(app, jobs.MINUTELY, timeout=0)


def test_a_frozen_clock_refuses_at_once_and_admits_once_advanced(app, engine):
    with frozen_clock() as clock:
        first = take(app, jobs.MINUTELY, timeout=None)
        assert first.admitted_at == clock.now()
        # Waiting for ever would never see the frozen time move: it raises instead.
        with pytest.raises(RateLimited):
            take(app, jobs.MINUTELY, timeout=None)
        clock.advance(60)
        assert take(app, jobs.MINUTELY, timeout=0).admitted_at == clock.now()


# -- one budget for jobs and callers -----------------------------------------------------------


def test_a_job_and_acquire_share_one_budget(app, engine):
    with app.app_context():
        job_id = jobs.charge.perform_later("acme").provider_job_id
    assert [job.id for job in support.claim_everything(engine, PROCESS_ID).jobs] == [job_id]

    # The claim spent the budget's one admission a minute: the caller is refused.
    with pytest.raises(RateLimited) as error:
        take(app, jobs.SHARED, timeout=0)
    assert error.value.keys == ("nb_test.shared",)
    with app.app_context():
        assert limiter.is_limited(jobs.SHARED) is True
        assert limiter.is_limited(jobs.refund, "globex") is True


def test_a_caller_admitted_first_defers_the_jobs_of_the_budget(app, engine):
    take(app, jobs.SHARED)
    with app.app_context():
        job_id = jobs.refund.perform_later("acme").provider_job_id

    batch = support.claim_everything(engine, PROCESS_ID)

    assert batch.jobs == []
    (deferral,) = batch.deferrals
    assert (deferral.job.id, deferral.key) == (job_id, "nb_test.shared")


def test_acquire_takes_a_jobs_budget_key_or_a_jobs_call(app, engine):
    admission = take(app, "nb_test.fullburst/global")
    assert admission.keys == ("nb_test.fullburst/global",)
    with app.app_context():
        jobs.fullburst.perform_later()
    assert support.claim_everything(engine, PROCESS_ID).jobs == []

    # By job: every budget of the call at one moment.
    stacked = take(app, jobs.stacked, "shop1")
    assert stacked.keys == ("nb_test.stacked/shop1", "nb_test.stacked/daily/shop1")
    charged = {
        row.key: row.tat for row in support.rows(engine, BUDGETS, BUDGETS.c.key.in_(stacked.keys))
    }
    at = t.cast(dt.datetime, stacked.admitted_at)
    assert charged == {
        "nb_test.stacked/shop1": at + dt.timedelta(seconds=1),  # T = 1 / (10 - 10 + 1)
        "nb_test.stacked/daily/shop1": at + dt.timedelta(days=1),
    }
    with pytest.raises(RateLimited) as error:
        take(app, jobs.stacked, "shop1", timeout=0)
    assert error.value.keys == stacked.keys


def test_acquire_of_a_call_that_isnt_limited_charges_nothing(app, engine):
    admission = take(app, jobs.blank_default)
    assert admission == Admission((), None)
    assert support.rows(engine, BUDGETS) == []


# -- back-offs ---------------------------------------------------------------------------------


def test_a_back_off_holds_acquire_until_it_ends(app, engine):
    with app.app_context():
        until = limiter.back_off(jobs.SECONDLY, seconds=1)

    with pytest.raises(RateLimited) as error:
        take(app, jobs.SECONDLY, timeout=0)
    assert dt.timedelta(0) < error.value.retry_after <= dt.timedelta(seconds=1)

    admission = take(app, jobs.SECONDLY, timeout=5)
    assert t.cast(dt.datetime, admission.admitted_at) >= until


def test_rate_limited_inside_the_block_pauses_the_budget_then_propagates(app, engine):
    with support.signals_sent(signals.rate_limit_back_off) as sent:
        with pytest.raises(RateLimited):  # noqa: SIM117 - the block under test is the inner one
            with app.app_context(), limiter.acquire(jobs.HALF_SECOND):
                raise RateLimited(retry_after=30)

    row = budget(engine, "nb_test.half_second")
    # Counted from the back-off's own reading of the database's clock (its updated_at).
    assert row.backed_off_until == row.updated_at + dt.timedelta(seconds=30)
    ((sender, payload),) = sent
    assert (sender, payload["keys"], payload["until"]) == (
        None,
        ["nb_test.half_second"],
        row.backed_off_until,
    )
    with pytest.raises(RateLimited) as error:
        take(app, jobs.HALF_SECOND, timeout=0)
    assert dt.timedelta(seconds=29) < error.value.retry_after <= dt.timedelta(seconds=30)


def test_a_nested_acquires_refusal_pauses_nothing(app, engine):
    take(app, jobs.MINUTELY)

    with pytest.raises(RateLimited) as error:  # noqa: SIM117
        with app.app_context(), limiter.acquire(jobs.HALF_SECOND):
            with limiter.acquire(jobs.MINUTELY, timeout=0):
                pass

    assert error.value.keys == ("nb_test.minutely",)
    assert budget(engine, "nb_test.half_second").backed_off_until is None
    assert budget(engine, "nb_test.minutely").backed_off_until is None


def test_another_error_inside_the_block_propagates_and_keeps_the_admission(app, engine):
    with pytest.raises(KeyError):  # noqa: SIM117
        with app.app_context(), limiter.acquire(jobs.MINUTELY):
            raise KeyError("boom")

    assert budget(engine, "nb_test.minutely").backed_off_until is None
    with pytest.raises(RateLimited):
        take(app, jobs.MINUTELY, timeout=0)


# -- misuse ------------------------------------------------------------------------------------


def test_acquire_inside_solidq_transaction_raises_runtime_error(app, engine):
    with app.app_context(), support.solidq.transaction():
        with pytest.raises(RuntimeError, match="can't run inside solidq.transaction"):
            with limiter.acquire(jobs.MINUTELY):
                pass
    assert support.rows(engine, BUDGETS) == []


@pytest.mark.parametrize(
    ("timeout", "error"), [(-1, ValueError), ("5", TypeError), (float("nan"), ValueError)]
)
def test_acquire_refuses_a_timeout_that_is_no_duration(app, engine, timeout, error):
    with app.app_context(), pytest.raises(error, match="acquire\\(timeout=\\)"):
        limiter.acquire(jobs.MINUTELY, timeout=timeout)


def test_acquire_refuses_a_key_no_limit_covers(app, engine):
    with app.app_context(), pytest.raises(ValueError, match="no budget of that name"):
        limiter.acquire("nb_test.unregistered")

"""``solidq.rate_limiter`` asked by job (issue 35, item 6), and ``limits_rate`` without
``key=`` (item 7), on every backend. Jobs (:mod:`tests.jobs.named_budgets`) are enqueued and
claimed as a worker's claim does (:func:`tests.support.claim_everything`), so the budgets the
limiter reads are the ones the claims charged.

Asked by job (its definition, or its name with arguments), the limiter answers over every
budget of that call; a job's name alone, where its budget is another key, is refused with the
keys to ask instead (the issue: ``is_limited("fullburst")`` read the idle bare budget and
said False while ``fullburst/global`` was spent).
"""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.models.tables import BUDGETS
from tests import support
from tests.jobs import named_budgets as jobs
from tests.support.concurrency import JOBS

if t.TYPE_CHECKING:
    from flask import Flask

PROCESS_ID = 4848
CLAIMERS = (PROCESS_ID,)

limiter = support.solidq.rate_limiter


def later(app: Flask, definition: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(*args).provider_job_id)


def claim(engine: sa.Engine) -> t.Any:
    return support.claim_everything(engine, PROCESS_ID)


def spend(app: Flask, engine: sa.Engine, definition: t.Any, *args: t.Any) -> None:
    """Enqueue a call and have a claim admit it (charging its budgets)."""
    later(app, definition, *args)
    assert len(claim(engine).jobs) == 1


def stored_key(engine: sa.Engine, job_id: int) -> str | None:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return t.cast("str | None", row.rate_limit_key)


# -- the job: a name is not its budget -------------------------------------------------


def test_the_name_of_a_job_whose_budget_is_another_key_raises_naming_that_key(app, engine):
    spend(app, engine, jobs.fullburst)

    with app.app_context():
        for asked in ("is_limited", "time_until_available", "state"):
            with pytest.raises(ValueError) as error:
                getattr(limiter, asked)("nb_test.fullburst")
            assert str(error.value) == (
                "'nb_test.fullburst' is a job; its budget is 'nb_test.fullburst/global': ask"
                f" rate_limiter.{asked}('nb_test.fullburst/global') or {asked}(fullburst)."
            )
        with pytest.raises(ValueError, match="its budget is 'nb_test.fullburst/global'"):
            limiter.back_off("nb_test.fullburst", seconds=1)
        # Asked as the message says, both answer for the spent budget.
        assert limiter.is_limited(jobs.fullburst) is True
        assert limiter.is_limited("nb_test.fullburst/global") is True
        assert 59 < limiter.time_until_available(jobs.fullburst) <= 60
        assert limiter.state(jobs.fullburst).key == "nb_test.fullburst/global"
    # The refusal wrote nothing: the bare budget never got a row.
    assert support.rows(engine, BUDGETS, BUDGETS.c.key == "nb_test.fullburst") == []


def test_a_job_name_whose_keys_depend_on_arguments_says_to_ask_with_them(app, engine):
    with app.app_context(), pytest.raises(ValueError) as error:
        limiter.is_limited("nb_test.per_account")
    assert "depend on the call's arguments" in str(error.value)
    assert "is_limited(per_account, *args)" in str(error.value)
    assert "per_account.rate_limit_key_for(*args)" in str(error.value)


def test_a_job_with_stacked_budgets_asked_by_name_lists_every_key(app, engine):
    with app.app_context(), pytest.raises(ValueError) as error:
        limiter.is_limited("nb_test.charge_daily")
    assert "its budgets are 'nb_test.shared', 'nb_test.daily'" in str(error.value)
    assert "is_limited(charge_daily) for all of them" in str(error.value)


# -- by job, with the call's arguments ---------------------------------------------------------


def test_by_job_answers_for_the_budget_of_the_calls_arguments(app, engine):
    spend(app, engine, jobs.per_account, "acme")

    with app.app_context():
        assert limiter.is_limited(jobs.per_account, "acme") is True
        assert limiter.is_limited(jobs.per_account, account="acme") is True
        assert limiter.is_limited(jobs.per_account, "globex") is False
        assert limiter.time_until_available(jobs.per_account, "globex") == 0.0
        # The job's name, given arguments, asks by job too.
        assert limiter.is_limited("nb_test.per_account", "acme") is True
        assert limiter.is_limited("nb_test.per_account", "globex") is False
        assert limiter.state("nb_test.per_account", "acme").key == "nb_test.per_account/acme"


def test_by_job_works_for_the_class_form(app, engine):
    spend(app, engine, jobs.AccountCharge, "acme")

    with app.app_context():
        assert limiter.is_limited(jobs.AccountCharge, "acme") is True
        assert limiter.is_limited(jobs.AccountCharge, "globex") is False


def test_a_job_with_stacked_limits_is_limited_if_any_budget_is_and_waits_for_all(app, engine):
    with app.app_context():
        assert limiter.is_limited(jobs.stacked, "shop1") is False
        assert limiter.time_until_available(jobs.stacked, "shop1") == 0.0

    spend(app, engine, jobs.stacked, "shop1")

    with app.app_context():
        # Ten a second: nine left now. One a day: spent for a day.
        assert limiter.is_limited("nb_test.stacked/shop1") is False
        assert limiter.is_limited("nb_test.stacked/daily/shop1") is True
        assert limiter.is_limited(jobs.stacked, "shop1") is True
        day = dt.timedelta(days=1).total_seconds()
        assert day - 5 < limiter.time_until_available(jobs.stacked, "shop1") <= day
        state = limiter.state(jobs.stacked, "shop1")
        assert (state.key, state.limit_name, state.limited) == (
            "nb_test.stacked/daily/shop1",
            "daily",
            True,
        )
        assert limiter.is_limited(jobs.stacked, "shop2") is False


def test_back_off_by_job_pauses_every_budget_of_the_call(app, engine):
    with app.app_context(), support.signals_sent(signals.rate_limit_back_off) as sent:
        until = limiter.back_off(jobs.stacked, "shop1", seconds=30)

    paused = {
        row.key: row.backed_off_until
        for row in support.rows(engine, BUDGETS, BUDGETS.c.key.like("nb_test.stacked/%"))
    }
    assert paused == {"nb_test.stacked/shop1": until, "nb_test.stacked/daily/shop1": until}
    ((sender, payload),) = sent
    assert sender is None
    assert sorted(payload["keys"]) == ["nb_test.stacked/daily/shop1", "nb_test.stacked/shop1"]
    with app.app_context():
        assert limiter.is_limited(jobs.stacked, "shop1") is True
        assert limiter.is_limited(jobs.stacked, "shop2") is False


def test_a_call_whose_keys_come_out_blank_is_not_limited_and_has_no_state(app, engine):
    with app.app_context():
        assert limiter.is_limited(jobs.blank_default) is False
        assert limiter.time_until_available(jobs.blank_default) == 0.0
        with pytest.raises(ValueError, match="isn't limited"):
            limiter.state(jobs.blank_default)
        with pytest.raises(ValueError, match="isn't limited"):
            limiter.back_off(jobs.blank_default, seconds=1)


def test_asking_wrongly_raises_with_the_fix(app, engine):
    with app.app_context():
        with pytest.raises(TypeError, match="units= goes with a budget key only"):
            limiter.is_limited(jobs.per_account, "acme", units=2)
        with pytest.raises(ValueError, match="no job named 'nb_test.nowhere' is registered"):
            limiter.is_limited("nb_test.nowhere", "acme")
        with pytest.raises(ValueError, match="declares no rate limit"):
            limiter.is_limited(jobs.unlimited)
        with pytest.raises(TypeError, match="a budget key \\(a str\\) or a job definition"):
            limiter.is_limited(42)
        with pytest.raises(ValueError, match="no budget of that name is registered"):
            limiter.is_limited("nb_test.nothing/here")


# -- limits_rate without key= ------------------------------------------------------------------


def test_limits_rate_without_key_charges_the_jobs_bare_budget(app, engine):
    first = later(app, jobs.bare_default, 1)
    second = later(app, jobs.bare_default, 2)

    batch = claim(engine)

    assert [job.id for job in batch.jobs] == [first]
    (deferral,) = batch.deferrals
    assert (deferral.job.id, deferral.key) == (second, "nb_test.bare_default")
    assert stored_key(engine, first) == stored_key(engine, second) == "nb_test.bare_default"
    with app.app_context():
        # The job's name is its budget key here, so both readings agree.
        assert limiter.is_limited("nb_test.bare_default") is True
        assert limiter.is_limited(jobs.bare_default) is True


def test_limits_rate_without_key_in_a_group_charges_the_groups_bare_budget(app, engine):
    first = later(app, jobs.grouped_default, 1)
    later(app, jobs.grouped_default, 2)

    batch = claim(engine)

    assert [job.id for job in batch.jobs] == [first]
    assert [deferral.key for deferral in batch.deferrals] == [jobs.GROUP]
    with app.app_context():
        assert limiter.is_limited(jobs.GROUP) is True


def test_limits_rate_without_key_and_a_group_that_comes_out_none_is_unlimited(app, engine):
    ids = [later(app, jobs.blank_default, n) for n in range(3)]

    batch = claim(engine)

    assert sorted(job.id for job in batch.jobs) == ids
    assert batch.deferrals == []
    assert {stored_key(engine, job_id) for job_id in ids} == {""}

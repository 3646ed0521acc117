"""Without the budgets table (``solidq_rate_limits``) the rate limit fails closed and the rest
carries on (:mod:`flask_solidq.controls.rate_limit.budget_table`), on every backend, without worker
processes: the table is renamed away (missing from the start, or gone under a process that
had found it), jobs are enqueued and claimed with
:func:`flask_solidq.operations.claim.claim_batch`, and what each reader of budgets makes of
it is checked. The same with real `flask solidq work` processes is in
``test_budget_table_processes``.
"""

from __future__ import annotations

import datetime as dt
import html
import logging
import re
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import PendingMigrations
from flask_solidq import housekeeping
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit.limiter import RateLimiter
from flask_solidq.operations import claim
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations import job_loading
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import rate_limit as jobs
from tests.jobs import rate_limit_stacked as stacked_jobs
from tests.support.concurrency import JOBS
from tests.support.concurrency import SCHEDULED

if t.TYPE_CHECKING:
    from flask import Flask

PROCESS_ID = 4747
CLAIMERS = (PROCESS_ID,)
EVERY_QUEUE = claim.QueueSelector(("*",))
WAIT = budget_table.TABLE_MISSING_WAIT
AWAY = "solidq_rate_limits_away"
GLOBAL_KEY = "rate_test.global/global"


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    """Overrides conftest's ``app``: the dashboard on, to read its pages too."""
    with support.app_emptied_after(database_url, SOLIDQ_DASHBOARD=True) as app:
        yield app


@pytest.fixture(autouse=True)
def _push_request_context() -> None:
    """No request context pushed around the test: each client request gets its own."""


@pytest.fixture
def table(engine: sa.Engine) -> t.Iterator[Table]:
    """Renames the budgets table away and back; this process's answers about it are
    forgotten before and after."""
    budget_table.TABLE.forget()
    handle = Table(engine)
    try:
        yield handle
    finally:
        if handle.away:
            handle.bring_back()
        budget_table.TABLE.forget()


class Table:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.away = False

    def take_away(self) -> None:
        rename(self.engine, budget_table.NAME, AWAY)
        self.away = True

    def bring_back(self) -> None:
        rename(self.engine, AWAY, budget_table.NAME)
        self.away = False


def rename(engine: sa.Engine, old: str, new: str) -> None:
    with engine.begin() as connection:
        connection.exec_driver_sql(f"ALTER TABLE {old} RENAME TO {new}")


def later(app: Flask, definition: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(*args).provider_job_id)


def claim_batch(engine: sa.Engine) -> claim.ClaimBatch:
    return claim.claim_batch(engine, EVERY_QUEUE, 20, PROCESS_ID)


def claimed_ids(batch: claim.ClaimBatch) -> list[int]:
    return [job.id for job in batch.jobs]


def deferred_ids(batch: claim.ClaimBatch) -> list[int]:
    return [deferral.job.id for deferral in batch.deferrals]


def scheduled_at(engine: sa.Engine, job_id: int) -> dt.datetime:
    (row,) = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id == job_id)
    return t.cast(dt.datetime, row.scheduled_at)


def errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.levelno >= logging.ERROR]


def assert_waits_a_minute(engine: sa.Engine, job_ids: list[int], before: dt.datetime) -> None:
    for job_id in job_ids:
        assert before + WAIT <= scheduled_at(engine, job_id) <= utcnow() + WAIT


# -- noticing it -------------------------------------------------------------------------------


def test_is_missing_table_names_the_budgets_table_and_no_other(engine, table):
    table.take_away()
    with pytest.raises(sa.exc.DBAPIError) as gone, engine.connect() as connection:
        connection.exec_driver_sql(f"SELECT 1 FROM {budget_table.NAME}")
    with pytest.raises(sa.exc.DBAPIError) as other, engine.connect() as connection:
        connection.exec_driver_sql("SELECT 1 FROM solidq_no_such_table")
    with pytest.raises(sa.exc.DBAPIError) as broken, engine.connect() as connection:
        connection.exec_driver_sql(f"SELECT no_such_column FROM {AWAY}")

    assert db.is_missing_table(gone.value, budget_table.NAME)
    assert not db.is_missing_table(other.value, budget_table.NAME)
    assert not db.is_missing_table(broken.value, budget_table.NAME)


def test_a_table_missing_from_the_start_lets_every_job_enqueue_and_defers_limited_ones(
    app, engine, table, caplog
):
    table.take_away()
    caplog.set_level(logging.INFO, logger="flask_solidq")
    before = utcnow()
    limited = [later(app, jobs.global_job, 1), later(app, jobs.per_account, "acme")]
    with app.app_context():
        bulk = [jobs.global_job.new(2), jobs.unlimited.new("bulk")]
        support.solidq.perform_all_later(bulk)
    limited.append(t.cast(int, bulk[0].provider_job_id))
    unlimited = [later(app, jobs.unlimited, "one"), t.cast(int, bulk[1].provider_job_id)]

    batch = claim_batch(engine)

    assert sorted(claimed_ids(batch)) == sorted(unlimited)
    assert sorted(deferred_ids(batch)) == sorted(limited)
    assert_waits_a_minute(engine, limited, before)
    (error,) = errors(caplog)
    assert budget_table.NAME in error.getMessage()
    assert "flask solidq install" in error.getMessage()
    assert error.event == "rate_limits_table_missing"  # type: ignore[attr-defined]


def test_a_table_gone_under_a_process_that_had_it_defers_limited_jobs_on_the_same_claim(
    app, engine, table, caplog
):
    first = later(app, jobs.per_account, "before")
    assert claimed_ids(claim_batch(engine)) == [first]  # the process has found the table
    table.take_away()
    caplog.set_level(logging.INFO, logger="flask_solidq")
    before = utcnow()
    limited = [later(app, jobs.per_account, "after"), later(app, jobs.global_job, "after")]
    unlimited = later(app, jobs.unlimited, "after")

    batch = claim_batch(engine)  # fails on the table, and runs again without it

    assert claimed_ids(batch) == [unlimited]
    assert deferred_ids(batch) == limited
    assert_waits_a_minute(engine, limited, before)
    (error,) = errors(caplog)
    assert budget_table.NAME in error.getMessage()


def test_while_it_is_missing_a_process_logs_one_error_then_a_reminder_at_most_every_interval(
    app, engine, table, caplog, monkeypatch
):
    table.take_away()
    caplog.set_level(logging.INFO, logger="flask_solidq")
    for round_ in range(3):
        later(app, jobs.global_job, round_)
        assert deferred_ids(claim_batch(engine))
    assert len(errors(caplog)) == 1

    monkeypatch.setattr(budget_table, "REMINDER_INTERVAL", 0.0)
    later(app, jobs.global_job, "reminded")
    claim_batch(engine)

    first, reminder = errors(caplog)
    assert "still missing" in reminder.getMessage()
    assert "flask solidq install" in reminder.getMessage()


def test_a_migrated_table_is_found_at_the_next_look_without_a_restart(
    app, engine, table, caplog, monkeypatch
):
    table.take_away()
    waiting = later(app, jobs.per_account, "acme")
    assert deferred_ids(claim_batch(engine)) == [waiting]
    table.bring_back()
    caplog.set_level(logging.INFO, logger="flask_solidq")
    caplog.clear()

    # Not yet time to look again: the process still takes the table for missing.
    monkeypatch.setattr(budget_table, "RECHECK_INTERVAL", 3600.0)
    kept_waiting = later(app, jobs.per_account, "globex")
    assert deferred_ids(claim_batch(engine)) == [kept_waiting]

    monkeypatch.setattr(budget_table, "RECHECK_INTERVAL", 0.0)
    admitted = later(app, jobs.per_account, "initech")
    assert claimed_ids(claim_batch(engine)) == [admitted]
    (found,) = [r for r in caplog.records if getattr(r, "event", None) == "rate_limits_table_found"]
    assert found.levelno == logging.INFO
    assert errors(caplog) == []


# -- the other readers and writers of budgets ----------------------------------------------------


def test_a_job_told_429_without_the_table_waits_out_its_pause(app, engine, table):
    jobs.THROTTLED_CALLS.pop("gone", None)  # its fake API answers 429 to the first call
    job_id = later(app, jobs.throttled, "gone", 1)
    (claimed,) = claim_batch(engine).jobs
    before = utcnow()

    with app.app_context():
        outcome = execute.perform(claimed)
        table.take_away()  # gone before the finisher stores the outcome
        stored = finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=True)

    assert [o.kind for o in stored] == [OutcomeKind.DEFERRED]
    paused = scheduled_at(engine, job_id)
    assert stored[0].retry is not None and paused == stored[0].retry.scheduled_at
    pause = dt.timedelta(seconds=jobs.PAUSE)
    assert before + pause < paused <= utcnow() + pause


def test_a_job_claimed_before_the_table_went_is_held_at_its_start_a_minute(app, engine, table):
    job_id = later(app, jobs.throttled, "held", 0)
    (claimed,) = claim_batch(engine).jobs
    table.take_away()
    before = utcnow()

    with app.app_context():
        outcome = execute.perform(claimed)
        finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=True)

    assert outcome.kind is OutcomeKind.DEFERRED and outcome.held_at_start
    assert "held" not in jobs.THROTTLED_CALLS  # it never ran
    assert scheduled_at(engine, job_id) >= before + dt.timedelta(minutes=1)


def test_rate_limit_used_corrects_nothing_without_the_table(app, engine, table, caplog):
    later(app, stacked_jobs.tokens, 60)
    (claimed,) = claim_batch(engine).jobs
    table.take_away()
    caplog.set_level(logging.INFO, logger="flask_solidq")

    with app.app_context():
        job = job_loading.load(claimed)
        assert job.rate_limit_used(10) == 0
        assert job.rate_limit_used(10) == 0  # known missing now: no statement on it

    assert len(errors(caplog)) == 1


def test_the_rate_limiter_says_the_budgets_table_awaits_its_migration(app, table):
    table.take_away()
    limiter = RateLimiter()
    with app.app_context():
        for ask in (
            lambda: limiter.is_limited(GLOBAL_KEY),
            lambda: limiter.state(GLOBAL_KEY),
            lambda: limiter.back_off(GLOBAL_KEY, seconds=5),
            limiter.clear_idle_in_batches,
            lambda: housekeeping.ClearIdleBudgets().perform(),
        ):
            with pytest.raises(PendingMigrations, match=budget_table.NAME):
                ask()


def test_status_and_the_dashboard_say_the_table_is_missing(app, engine, table):
    table.take_away()
    deferred = later(app, jobs.global_job, "waits")
    later(app, jobs.unlimited, "runs")
    claim_batch(engine)

    result = app.test_cli_runner().invoke(args=["solidq", "status"])
    assert result.exit_code == 0, result.output
    assert f"the table {budget_table.NAME} is missing" in result.output
    assert "(1 waiting now)" in result.output

    client = app.test_client()
    page = client.get("/solidq/budgets")
    assert page.status_code == 200
    assert f"The table <code>{budget_table.NAME}</code> is missing" in page.get_data(as_text=True)

    job_page = client.get(f"/solidq/jobs/{deferred}")
    assert job_page.status_code == 200
    why = html.unescape(re.sub(r"\s+", " ", job_page.get_data(as_text=True)))
    assert f"which can't be checked: the table {budget_table.NAME} is missing" in why
    assert support.rows(engine, JOBS, JOBS.c.id == deferred)

"""Clearing finished jobs in batches, on every backend."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.operations import maintenance
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import basic as jobs

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)
RECURRING = t.cast(sa.Table, models.RecurringExecution.__table__)

DAY = dt.timedelta(days=1)


def finished_job(engine: sa.Engine, age: dt.timedelta, definition: t.Any = None) -> int:
    """Enqueue a job and mark it finished ``age`` ago; return its row id."""
    job = (definition or jobs.store_result).perform_later(1)
    with engine.begin() as connection:
        connection.execute(READY.delete().where(READY.c.job_id == job.provider_job_id))
        connection.execute(
            JOBS.update().where(JOBS.c.id == job.provider_job_id).values(finished_at=utcnow() - age)
        )
    return t.cast(int, job.provider_job_id)


def remaining_ids(engine: sa.Engine) -> list[int]:
    return [row.id for row in support.rows(engine, JOBS)]


def test_clearing_deletes_only_jobs_that_finished_before_the_threshold(app, engine):
    with app.app_context():
        old = [finished_job(engine, 2 * DAY) for _ in range(2)]
        recent = finished_job(engine, dt.timedelta(hours=1))
        pending = jobs.store_result.perform_later(2).provider_job_id

    cleared = maintenance.clear_finished_in_batches(engine, finished_before=utcnow() - DAY)

    assert cleared == len(old)
    assert remaining_ids(engine) == [recent, pending]
    assert [row.job_id for row in support.rows(engine, READY)] == [pending]


def test_clearing_works_through_every_batch(app, engine):
    with app.app_context():
        for _ in range(5):
            finished_job(engine, 2 * DAY)
    deletes: list[str] = []

    def count_deletes(conn, cursor, statement, *_):
        if statement.lstrip().upper().startswith("DELETE FROM SOLIDQ_JOBS"):
            deletes.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count_deletes)
    try:
        cleared = maintenance.clear_finished_in_batches(
            engine, finished_before=utcnow(), batch_size=2
        )
    finally:
        sa.event.remove(engine, "before_cursor_execute", count_deletes)

    assert cleared == 5
    assert remaining_ids(engine) == []
    assert len(deletes) == 3


def test_clearing_sleeps_between_batches_only(app, engine, monkeypatch):
    with app.app_context():
        for _ in range(5):
            finished_job(engine, 2 * DAY)
    sleeps: list[float] = []
    monkeypatch.setattr(maintenance.time, "sleep", sleeps.append)

    cleared = maintenance.clear_finished_in_batches(
        engine, finished_before=utcnow(), batch_size=2, sleep_between_batches=0.3
    )

    assert cleared == 5
    assert sleeps == [0.3, 0.3]


def test_clearing_a_batch_size_that_divides_the_count_stops_at_an_empty_batch(app, engine):
    with app.app_context():
        for _ in range(4):
            finished_job(engine, 2 * DAY)

    assert (
        maintenance.clear_finished_in_batches(engine, finished_before=utcnow(), batch_size=2) == 4
    )
    assert remaining_ids(engine) == []


def test_clearing_with_a_class_name_leaves_other_jobs(app, engine):
    with app.app_context():
        finished_job(engine, 2 * DAY)
        kept = finished_job(engine, 2 * DAY, jobs.StoreResultJob)
        finished_job(engine, 2 * DAY)

    cleared = maintenance.clear_finished_in_batches(
        engine, finished_before=utcnow(), class_name="store_result", batch_size=1
    )

    assert cleared == 2
    assert remaining_ids(engine) == [kept]


def test_clearing_cascades_to_the_rows_that_point_at_a_job(app, engine):
    with app.app_context():
        job_id = finished_job(engine, 2 * DAY)
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(CALLS.insert().values(job_id=job_id, arguments="[]", created_at=now))
        connection.execute(
            RECURRING.insert().values(job_id=job_id, task_key="nightly", run_at=now, created_at=now)
        )

    assert maintenance.clear_finished_in_batches(engine, finished_before=utcnow()) == 1
    assert support.count(engine, CALLS) == 0
    assert support.count(engine, RECURRING) == 0


def test_clearing_with_nothing_finished_deletes_nothing(app, engine):
    with app.app_context():
        jobs.store_result.perform_later(1)

    assert maintenance.clear_finished_in_batches(engine, finished_before=utcnow()) == 0
    assert support.count(engine, JOBS) == 1


def test_clearing_refuses_a_batch_size_below_one(app, engine):
    with pytest.raises(ValueError, match="batch_size"):
        maintenance.clear_finished_in_batches(engine, finished_before=utcnow(), batch_size=0)


def test_the_housekeeping_job_clears_finished_jobs_past_the_configured_age(app, engine):
    from flask_solidq.housekeeping import ClearFinishedJobs

    old, recent, running = (jobs.store_result.perform_later(n) for n in range(3))
    with engine.begin() as connection:
        table = models.JobRecord.__table__
        connection.execute(
            table.update()
            .where(table.c.id == old.provider_job_id)
            .values(finished_at=utcnow() - dt.timedelta(days=2))
        )
        connection.execute(
            table.update().where(table.c.id == recent.provider_job_id).values(finished_at=utcnow())
        )

    assert ClearFinishedJobs.perform_now(sleep_between_batches=0) == 1
    assert {row.id for row in support.rows(engine, models.JobRecord)} == {
        recent.provider_job_id,
        running.provider_job_id,
    }


def test_the_housekeeping_job_clears_idle_budgets_and_keeps_busy_ones(app, engine):
    from flask_solidq.housekeeping import ClearIdleBudgets

    budgets = models.RateLimitBudget.__table__
    now = utcnow()
    past, future = now - dt.timedelta(minutes=1), now + dt.timedelta(minutes=1)
    rows = [
        {"key": "idle", "tat": past, "last_slot_at": None},
        {"key": "idle-slot-past", "tat": past, "last_slot_at": past},
        {"key": "owes", "tat": future, "last_slot_at": None},
        {"key": "slot-ahead", "tat": past, "last_slot_at": future},
    ]
    with engine.begin() as connection:
        connection.execute(
            budgets.insert(), [{**row, "created_at": now, "updated_at": now} for row in rows]
        )

    with app.app_context():
        assert ClearIdleBudgets.perform_now(batch_size=1, sleep_between_batches=0) == 2
    assert sorted(row.key for row in support.rows(engine, budgets)) == ["owes", "slot-ahead"]

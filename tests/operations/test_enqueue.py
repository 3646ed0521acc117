"""Enqueuing, single and in bulk, on every backend."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid

import pytest
import sqlalchemy as sa

from flask_solidq import EnqueueError
from flask_solidq import PendingMigrations
from flask_solidq import SerializationError
from flask_solidq import models
from flask_solidq import signals
from flask_solidq.timing import UTC
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import basic as jobs
from tests.support import solidq

JOBS = models.JobRecord
READY = models.ReadyExecution
SCHEDULED = models.ScheduledExecution


def stored_payload(engine: sa.Engine, job_id: int) -> dict:
    (record,) = support.rows(engine, JOBS, JOBS.id == job_id)
    return json.loads(record.arguments)


def test_perform_later_stores_a_job_and_its_ready_execution(app, engine):
    job = jobs.store_result.perform_later(42)

    assert job.successfully_enqueued is True
    assert isinstance(job.provider_job_id, int)
    uuid.UUID(job.job_id)
    (record,) = support.rows(engine, JOBS)
    assert record.id == job.provider_job_id
    assert record.class_name == "store_result"
    assert record.queue_name == "default"
    assert record.priority == 0
    assert record.active_job_id == job.job_id
    assert record.finished_at is None
    assert record.scheduled_at.tzinfo is UTC
    (ready,) = support.rows(engine, READY)
    assert (ready.job_id, ready.queue_name, ready.priority) == (record.id, "default", 0)
    assert support.count(engine, SCHEDULED) == 0


def test_the_payload_names_the_import_path_and_round_trips_the_arguments(app, engine):
    when = dt.datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)
    args = (1, "two", [3, (4, 5)], {"six": decimal.Decimal("7.10")}, when, jobs.Color.RED)
    job = jobs.store_pair.perform_later(args, second=uuid.UUID(int=8))

    payload = stored_payload(engine, job.provider_job_id)
    assert payload["job"] == "tests.jobs.basic:store_pair"
    restored = jobs.store_pair.new()
    restored.load_payload(payload)
    assert restored.arguments == (args,)
    assert type(restored.arguments[0][2][1]) is tuple
    assert restored.kwargs == {"second": uuid.UUID(int=8)}


def test_the_class_form_uses_its_queue_and_priority(app, engine):
    job = jobs.StoreResultJob.perform_later("x")

    (record,) = support.rows(engine, JOBS)
    assert (record.class_name, record.queue_name, record.priority) == (
        "StoreResultJob",
        "results",
        2,
    )
    (ready,) = support.rows(engine, READY)
    assert (ready.queue_name, ready.priority) == ("results", 2)
    assert job.provider_job_id == record.id


def test_set_overrides_queue_and_priority(app, engine):
    jobs.store_result.set(queue="urgent", priority=-3).perform_later(1)

    (ready,) = support.rows(engine, READY)
    assert (ready.queue_name, ready.priority) == ("urgent", -3)


def test_a_wait_gives_a_scheduled_execution_at_that_time(app, engine):
    before = utcnow()
    job = jobs.store_result.set(wait=dt.timedelta(minutes=5)).perform_later(1)
    after = utcnow()

    assert support.count(engine, READY) == 0
    (scheduled,) = support.rows(engine, SCHEDULED)
    assert scheduled.job_id == job.provider_job_id
    assert (
        before + dt.timedelta(minutes=5)
        <= scheduled.scheduled_at
        <= after + dt.timedelta(minutes=5)
    )
    (record,) = support.rows(engine, JOBS)
    assert record.scheduled_at == scheduled.scheduled_at == job.scheduled_at


def test_wait_until_keeps_microseconds_in_utc(app, engine):
    paris = dt.timezone(dt.timedelta(hours=1))
    when = dt.datetime(2099, 1, 2, 3, 4, 5, 678901, tzinfo=paris)
    jobs.store_result.set(wait_until=when).perform_later(1)

    (scheduled,) = support.rows(engine, SCHEDULED)
    assert scheduled.scheduled_at == when
    assert scheduled.scheduled_at.microsecond == 678901


def test_a_wait_until_in_the_past_is_ready_now(app, engine):
    jobs.store_result.set(wait_until=dt.datetime(2000, 1, 1, tzinfo=UTC)).perform_later(1)

    assert support.count(engine, READY) == 1
    assert support.count(engine, SCHEDULED) == 0


def test_an_instance_built_with_new_and_set_enqueues(app, engine):
    job = jobs.store_result.new(7).set(priority=9)
    assert job.perform_later() is job

    (ready,) = support.rows(engine, READY)
    assert ready.priority == 9
    assert job.successfully_enqueued


def test_perform_all_later_stores_every_job_and_sets_each_outcome(app, engine):
    batch = [jobs.store_result.new(i) for i in range(5)]
    batch.append(jobs.StoreResultJob.new("later").set(wait=600))
    batch.append(jobs.store_pair.new(1, second=2).set(priority=1))

    assert solidq.perform_all_later(batch) is None

    assert all(job.successfully_enqueued for job in batch)
    ids = [job.provider_job_id for job in batch]
    assert len(set(ids)) == len(batch)
    records = {record.id: record for record in support.rows(engine, JOBS)}
    assert [records[job_id].active_job_id for job_id in ids] == [job.job_id for job in batch]
    assert {row.job_id for row in support.rows(engine, READY)} == set(ids) - {ids[5]}
    assert [row.job_id for row in support.rows(engine, SCHEDULED)] == [ids[5]]


def test_perform_all_later_stores_a_thousand_jobs_with_a_few_statements(app, engine):
    statements = []

    def count_statement(*_args):
        statements.append(1)

    sa.event.listen(engine, "before_cursor_execute", count_statement)
    try:
        solidq.perform_all_later([jobs.store_result.new(i) for i in range(1000)])
    finally:
        sa.event.remove(engine, "before_cursor_execute", count_statement)

    assert support.count(engine, READY) == 1000
    assert len(statements) <= 6


def test_an_unserializable_argument_fails_the_enqueue_and_writes_nothing(app, engine):
    with pytest.raises(SerializationError, match="argument 1"):
        jobs.store_pair.perform_later(1, object())
    with pytest.raises(SerializationError):
        solidq.perform_all_later([jobs.store_result.new(1), jobs.store_result.new(object())])

    assert support.count(engine, JOBS) == 0


def test_a_key_callable_that_raises_fails_the_enqueue_and_writes_nothing(app, engine):
    with pytest.raises(ZeroDivisionError):
        jobs.raising_key.perform_later(1)
    with pytest.raises(ZeroDivisionError):
        solidq.perform_all_later([jobs.store_result.new(1), jobs.raising_key.new(2)])

    assert support.count(engine, JOBS) == 0


def test_control_keys_are_computed_once_and_stored_with_the_job(app, engine):
    jobs.sync_account.perform_later(42, note="x")

    (record,) = support.rows(engine, JOBS)
    assert record.concurrency_key == "sync_account/42"
    assert record.rate_limit_key == "Api/global"


def test_bad_enqueue_options_fail_before_anything_is_written(app, engine):
    with pytest.raises(ValueError, match="not both"):
        jobs.store_result.set(wait=1, wait_until=utcnow()).perform_later(1)
    with pytest.raises(ValueError, match="wait"):
        jobs.store_result.set(wait=-1).perform_later(1)
    with pytest.raises(TypeError, match="priority"):
        jobs.store_result.set(priority="high").perform_later(1)
    with pytest.raises(TypeError, match="queue"):
        jobs.store_result.set(queue="").perform_later(1)

    assert support.count(engine, JOBS) == 0


def test_a_database_failure_raises_enqueue_error_with_the_cause(app, engine):
    app.extensions["solidq"].check_tables()  # cached from here on, as in a running app
    with engine.begin() as connection:
        connection.execute(sa.text("DROP TABLE solidq_ready_executions"))
    try:
        with pytest.raises(EnqueueError, match="store_result") as caught:
            jobs.store_result.perform_later(1)
        assert isinstance(caught.value.__cause__, sa.exc.DBAPIError)
        with pytest.raises(sa.exc.DBAPIError):
            solidq.perform_all_later([jobs.store_result.new(1)])
    finally:
        models.ReadyExecution.__table__.create(engine)
    assert support.count(engine, JOBS) == 0


def test_a_transaction_stores_all_enqueues_or_none(app, engine):
    with pytest.raises(RuntimeError, match="rolled back"):
        with solidq.transaction():
            jobs.store_result.perform_later(1)
            solidq.perform_all_later([jobs.store_result.new(2)])
            raise RuntimeError("rolled back")
    assert support.count(engine, JOBS) == 0

    with solidq.transaction():
        first = jobs.store_result.perform_later(1)
        solidq.perform_all_later([jobs.store_result.new(2), jobs.store_result.new(3)])
    assert support.count(engine, READY) == 3
    assert first.provider_job_id in {row.job_id for row in support.rows(engine, READY)}


def test_the_enqueue_signal_carries_the_job(app, engine):
    received = []

    def receiver(sender, job):
        received.append((sender, job))

    with signals.enqueue.connected_to(receiver):
        single = jobs.store_result.perform_later(1)
        bulk = [jobs.StoreResultJob.new(2)]
        solidq.perform_all_later(bulk)

    assert received == [(jobs.store_result, single), (jobs.StoreResultJob, bulk[0])]


def test_enqueueing_before_the_tables_exist_raises_pending_migrations(database_url, tmp_path):
    empty_url = f"sqlite:///{tmp_path}/empty.db"
    app = support.create_app(empty_url)
    with app.app_context():
        with pytest.raises(PendingMigrations, match="flask solidq install.*flask db upgrade"):
            jobs.store_result.perform_later(1)
        assert jobs.store_result.perform_now(5) == 5
        models.metadata.create_all(app.extensions["solidq"].engine)
        assert jobs.store_result.perform_later(1).successfully_enqueued
        app.extensions["solidq"].engine.dispose()


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("solidq_jobs", "started_at"),
        ("solidq_jobs", "rate_limit_charges"),
        ("solidq_rate_limits", "admissions"),
        ("solidq_rate_limits", "backed_off_until"),
        ("solidq_processes", "command"),
    ],
)
def test_a_column_of_a_later_schema_version_missing_raises_pending_migrations(
    database_url, tmp_path, table, column
):
    """An app that upgraded the package but not its tables is told to migrate (each
    version's columns), instead of meeting SQL errors at enqueue or claim."""
    url = f"sqlite:///{tmp_path}/older.db"
    app = support.create_app(url)
    with app.app_context():
        engine = app.extensions["solidq"].engine
        models.metadata.create_all(engine)
        with engine.begin() as connection:
            connection.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        with pytest.raises(PendingMigrations, match=f"{table}.{column}"):
            jobs.store_result.perform_later(1)
        engine.dispose()


def test_enqueueing_outside_an_app_context_says_how_to_fix_it():
    with pytest.raises(RuntimeError, match="app_context"):
        jobs.store_result.perform_later(1)

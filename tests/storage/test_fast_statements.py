"""The hot statements that skip SQLAlchemy's Connection on PostgreSQL (a single enqueue, a
claim, a batch's finish: :func:`flask_solidq.storage.fast_path.fetch_autocommitted`; a pipelined
bulk enqueue: :func:`~flask_solidq.storage.fast_path.fetch_pipelined`) behave as the rest: a lost
connection is SQLAlchemy's error and is replaced, listeners (which send them through the
Connection after all) hear the statement with its execution context, and what they store
reads back as through the ORM."""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import EnqueueError
from flask_solidq import models
from flask_solidq.operations import claim
from flask_solidq.operations import enqueue
from flask_solidq.storage import engines
from flask_solidq.storage import fast_path
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import solidq

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
#: The process the tests claim as (registered by conftest's ``claimers``).
CLAIMER = 9001
CLAIMERS = (CLAIMER,)


def _terminate_other_sessions(url: sa.URL) -> int:
    """Kill every other session on the queue's database, as a server restart would; return
    how many."""
    other = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with other.connect() as admin:
            if other.dialect.name == "postgresql":
                return len(
                    admin.execute(
                        sa.text(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        )
                    ).all()
                )
            ids = admin.scalars(
                sa.text(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
                )
            ).all()
            for session_id in ids:
                admin.execute(sa.text(f"KILL {int(session_id)}"))
            return len(ids)
    finally:
        other.dispose()


def test_a_lost_connection_fails_one_enqueue_then_the_pool_reconnects(app, engine):
    if engine.dialect.name == "sqlite":
        return  # no server, no connection to lose
    with app.app_context():
        first = worker_jobs.record.perform_later("before")
        assert _terminate_other_sessions(engine.url) >= 1
        with pytest.raises(EnqueueError, match="AdminShutdown|OperationalError"):
            worker_jobs.record.perform_later("lost")
        after = worker_jobs.record.perform_later("after")
    assert first.successfully_enqueued and after.successfully_enqueued
    assert support.count(engine, READY) == 2


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_lost_connection_fails_one_pipelined_bulk_enqueue_then_the_pool_reconnects(
    app, engine
):
    many = enqueue.PIPELINED_CHUNK * 2
    with app.app_context():
        worker_jobs.record.perform_later("before")
        assert _terminate_other_sessions(engine.url) >= 1
        lost = [worker_jobs.record.new(index) for index in range(many)]
        with pytest.raises(sa.exc.OperationalError) as raised:
            solidq.perform_all_later(lost)
        after = [worker_jobs.record.new(index) for index in range(many)]
        solidq.perform_all_later(after)
    assert raised.value.connection_invalidated
    assert not any(job.successfully_enqueued for job in lost)
    assert all(job.successfully_enqueued for job in after)
    assert support.count(engine, READY) == 1 + many


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("autocommit", [False, True], ids=["default", "autocommitting"])
def test_pipelined_statements_commit_together_or_not_at_all(engine, autocommit):
    # An engine whose connections autocommit (connect_args) still runs them in one transaction.
    queue_engine = engines.create_queue_engine(engine.url, {"autocommit": autocommit})
    table = "pipelined_probe"
    insert = sa.text(f"INSERT INTO {table} (value) VALUES (:value) RETURNING value")
    try:
        with queue_engine.begin() as connection:
            connection.execute(sa.text(f"CREATE TABLE {table} (value integer CHECK (value > 0))"))
        assert fast_path.pipelines(queue_engine)
        ran = fast_path.fetch_pipelined(
            queue_engine, [(insert, {"value": 1}, ()), (insert, {"value": 2}, ())]
        )
        assert ran == [[(1,)], [(2,)]]
        with pytest.raises(sa.exc.IntegrityError):
            fast_path.fetch_pipelined(
                queue_engine, [(insert, {"value": 3}, ()), (insert, {"value": -1}, ())]
            )
        with queue_engine.connect() as connection:
            values = connection.scalars(sa.text(f"SELECT value FROM {table} ORDER BY value"))
            assert list(values) == [1, 2]
            assert connection.connection.driver_connection.autocommit is autocommit
    finally:
        with queue_engine.begin() as connection:
            connection.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
        queue_engine.dispose()


def test_listeners_hear_the_statement_and_the_row_reads_back_in_utc(app, engine):
    heard: list[str] = []
    with app.app_context():
        queue_engine = engine

        def listen(_conn, _cursor, statement, *_rest):
            heard.append(statement)

        sa.event.listen(queue_engine, "before_cursor_execute", listen)
        try:
            job = worker_jobs.record.set(wait=60).perform_later("later")
        finally:
            sa.event.remove(queue_engine, "before_cursor_execute", listen)
    if engine.dialect.name == "postgresql":  # one statement; the others take a transaction
        # The writes only: a process's first enqueue also reads the tables' names (check_tables).
        (statement,) = [text for text in heard if "INSERT INTO solidq_jobs" in text]
        assert statement.lstrip().startswith("WITH new_job AS")
    else:
        assert any(statement.lstrip().startswith("INSERT INTO solidq_jobs") for statement in heard)
    with engine.connect() as connection:
        stored = connection.execute(
            sa.select(JOBS.c.scheduled_at).where(JOBS.c.id == job.provider_job_id)
        ).scalar_one()
    assert stored.tzinfo is dt.timezone.utc
    assert abs((stored - t.cast(dt.datetime, job.scheduled_at)).total_seconds()) < 1e-3


def test_fetch_autocommitted_returns_plain_rows(engine):
    rows = fast_path.fetch_autocommitted(engine, sa.text("SELECT 1 AS one"), {})
    assert rows == [(1,)]


def test_a_claim_is_heard_reads_its_jobs_whole_and_survives_a_lost_connection(app, engine):
    everywhere = claim.QueueSelector(("*",))
    with app.app_context():
        first = worker_jobs.record.set(priority=3).perform_later("é first")
        second = worker_jobs.record.perform_later("second")
    heard: list[str] = []

    # As tracing does (OpenTelemetry's instrumentation): state kept on the execution
    # context from before the statement to after it.
    def before(_conn, _cursor, statement, _parameters, context, _executemany):
        context.solidq_test_started = statement

    def after(_conn, _cursor, statement, _parameters, context, _executemany):
        assert context.solidq_test_started == statement
        heard.append(statement)

    sa.event.listen(engine, "before_cursor_execute", before)
    sa.event.listen(engine, "after_cursor_execute", after)
    try:
        jobs = claim.claim(engine, everywhere, 5, process_id=CLAIMER)
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
        sa.event.remove(engine, "after_cursor_execute", after)
    assert [job.id for job in jobs] == [second.provider_job_id, first.provider_job_id]
    assert [job.priority for job in jobs] == [0, 3]
    assert jobs[1].class_name == first.job_name
    assert "é first" in json.dumps(json.loads(t.cast(str, jobs[1].arguments)), ensure_ascii=False)
    if engine.dialect.name == "postgresql":  # one statement; the others take a transaction
        (statement,) = [text for text in heard if "solidq_ready_executions" in text]
        assert statement.lstrip().startswith("WITH registered AS")
    if engine.dialect.name == "sqlite":
        return  # no server, no connection to lose
    with app.app_context():
        third = worker_jobs.record.perform_later("third")
    assert _terminate_other_sessions(engine.url) >= 1
    with pytest.raises(sa.exc.DBAPIError):
        claim.claim(engine, everywhere, 5, process_id=CLAIMER)
    assert [job.id for job in claim.claim(engine, everywhere, 5, process_id=CLAIMER)] == [
        third.provider_job_id
    ]

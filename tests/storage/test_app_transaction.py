"""Enqueues join the app's transaction when the app has written in it (on every backend)."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import orm

from flask_solidq import SolidQ
from flask_solidq import models
from flask_solidq import signals
from flask_solidq.operations import claim
from flask_solidq.operations import execute
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.storage import db
from tests import support
from tests.jobs import worker as worker_jobs

JOBS = models.JobRecord.__table__
READY = models.ReadyExecution.__table__


class Base(orm.DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "solidq_test_orders"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    number: orm.Mapped[str] = orm.mapped_column(sa.String(50))


@pytest.fixture
def orders(app, engine):
    """The app's own table, in the queue's database."""
    Base.metadata.create_all(engine)
    yield Order
    with engine.begin() as connection:
        connection.execute(Order.__table__.delete())


def job_count(engine: sa.Engine) -> int:
    """How many jobs are stored, read without SQLite's write lock (the app may hold it)."""
    with db.read(engine) as connection:
        return int(connection.scalar(sa.select(sa.func.count()).select_from(JOBS)) or 0)


def test_an_enqueue_after_a_flush_commits_with_the_app(app, engine, orders):
    with app.app_context():
        support.db.session.add(Order(number="A-1"))
        support.db.session.flush()
        started = time.monotonic()
        job = worker_jobs.record.perform_later("A-1")
        # On SQLite the flush holds the write lock: a second connection would wait it out.
        assert time.monotonic() - started < 5
        assert job.provider_job_id is not None
        assert job_count(engine) == 0  # not visible before the app commits
        support.db.session.commit()
    assert job_count(engine) == 1
    assert support.count(engine, READY) == 1


def test_an_enqueue_with_pending_writes_vanishes_when_the_app_rolls_back(app, engine, orders):
    with app.app_context():
        support.db.session.add(Order(number="A-2"))
        worker_jobs.record.perform_later("A-2")
        support.db.session.rollback()
    assert job_count(engine) == 0
    assert support.count(engine, Order) == 0


def test_a_bulk_enqueue_joins_too(app, engine, orders):
    with app.app_context():
        support.db.session.add(Order(number="B-1"))
        support.db.session.flush()
        jobs = [worker_jobs.record.new(n) for n in range(3)]
        support.solidq.perform_all_later(jobs)
        assert all(job.provider_job_id for job in jobs)
        support.db.session.rollback()
    assert job_count(engine) == 0
    with app.app_context():
        support.db.session.add(Order(number="B-2"))
        support.db.session.flush()
        support.solidq.perform_all_later([worker_jobs.record.new(n) for n in range(3)])
        support.db.session.commit()
    assert job_count(engine) == 3


def test_an_orm_insert_statement_counts_as_a_write(app, engine, orders):
    with app.app_context():
        support.db.session.execute(sa.insert(Order).values(number="C-1"))
        worker_jobs.record.perform_later("C-1")
        support.db.session.rollback()
    assert job_count(engine) == 0


def test_a_session_that_only_read_doesnt_hold_the_job_back(app, engine, orders):
    with app.app_context():
        support.db.session.scalars(sa.select(Order)).all()
        job = worker_jobs.record.perform_later("read-only")
        assert job_count(engine) == 1  # committed at once
        support.db.session.rollback()  # as Flask-SQLAlchemy's teardown does
    assert job_count(engine) == 1
    assert job.provider_job_id is not None


def test_no_session_at_all_commits_at_once(app, engine):
    with app.app_context():
        worker_jobs.record.perform_later("no session")
    assert job_count(engine) == 1


def test_joining_can_be_turned_off(database_url, orders, engine):
    app = support.create_app(database_url, SOLIDQ_ENQUEUE_IN_APP_TRANSACTION=False)
    try:
        with app.app_context():
            support.db.session.add(Order(number="D-1"))
            if engine.dialect.name != "sqlite":  # a flush would hold SQLite's write lock
                support.db.session.flush()
            worker_jobs.record.perform_later("D-1")
            support.db.session.rollback()
        assert job_count(engine) == 1
    finally:
        with app.app_context():
            app.extensions["solidq"].dispose()
            support.db.engines[None].dispose()


def test_an_explicit_queue_transaction_stays_its_own(app, engine, orders):
    with app.app_context():
        support.db.session.add(Order(number="E-1"))
        if engine.dialect.name != "sqlite":
            support.db.session.flush()
        with support.solidq.transaction():
            worker_jobs.record.perform_later("E-1")
        support.db.session.rollback()
    assert job_count(engine) == 1


def test_the_enqueue_signal_and_wake_ups_follow_the_commit(app, engine, orders):
    woken = threading.Event()
    from flask_solidq.processes import job_notices

    job_notices.listen_ready(woken.set)
    try:
        with app.app_context():
            support.db.session.add(Order(number="F-1"))
            support.db.session.flush()
            worker_jobs.record.perform_later("F-1")
            assert not woken.is_set()
            support.db.session.commit()
        assert woken.is_set()
    finally:
        job_notices.forget(woken.set)


def test_a_request_that_fails_after_enqueueing_leaves_no_job(database_url):
    # An app of its own: pytest-flask keeps a context pushed around tests that use ``app``,
    # which would keep one session across the requests instead of one per request.
    app = support.create_app(database_url, PROPAGATE_EXCEPTIONS=False)
    with app.app_context():
        engine = app.extensions["solidq"].engine
    Base.metadata.create_all(engine)
    worker_jobs.RUNS.create(engine, checkfirst=True)  # where worker_jobs.record records a run

    @app.get("/orders")
    def list_orders():
        count = len(support.db.session.scalars(sa.select(Order)).all())
        worker_jobs.record.perform_later("listed")  # a read-only view: committed at once
        return str(count)

    @app.post("/orders/<number>")
    def add_order(number):
        support.db.session.add(Order(number=number))
        support.db.session.flush()
        worker_jobs.record.perform_later(number)
        if number == "bad":
            raise RuntimeError("the view failed after enqueueing")
        support.db.session.commit()
        return "ok"

    client = app.test_client()
    try:
        assert client.post("/orders/good").status_code == 200
        assert client.post("/orders/bad").status_code == 500
        assert client.get("/orders").status_code == 200
        with db.read(engine) as connection:
            stored = connection.scalars(sa.select(JOBS.c.arguments).order_by(JOBS.c.id)).all()
            numbers = connection.scalars(sa.select(Order.number)).all()
        assert numbers == ["good"]
        assert len(stored) == 2 and '"good"' in stored[0] and '"listed"' in stored[1]
        # The committed job runs.
        with app.app_context():
            support.register_claimers(engine, [9001])
            claimed = claim.claim(engine, claim.QueueSelector(("*",)), 5, process_id=9001)
            outcomes = [execute.perform(job) for job in claimed]
        assert [outcome.kind for outcome in outcomes] == [OutcomeKind.FINISHED] * 2
    finally:
        with engine.begin() as connection:
            connection.execute(Order.__table__.delete())
            connection.execute(worker_jobs.RUNS.delete())
        support.delete_all_rows(engine)
        with app.app_context():
            app.extensions["solidq"].dispose()
            support.db.engines[None].dispose()


def test_perform_after_commit_waits_for_the_commit_and_drops_on_rollback(app, engine, orders):
    with app.app_context():
        support.db.session.add(Order(number="G-1"))
        support.db.session.flush()
        kept = worker_jobs.record.new("kept")
        support.solidq.perform_after_commit(kept)
        assert kept.provider_job_id is None and job_count(engine) == 0
        support.db.session.commit()
        assert kept.provider_job_id is not None

        support.db.session.add(Order(number="G-2"))
        support.db.session.flush()
        support.solidq.perform_after_commit(worker_jobs.record.new("dropped"))
        support.db.session.rollback()
    assert job_count(engine) == 1


def test_perform_after_commit_enqueues_at_once_when_nothing_was_written(app, engine):
    with app.app_context():
        job = worker_jobs.record.new("now")
        support.solidq.perform_after_commit(job)
        assert job.provider_job_id is not None
    assert job_count(engine) == 1


@pytest.fixture
def separate_queue(tmp_path):
    """An app whose queue is on a SQLite bind of its own, apart from its data."""
    app = Flask("solidq_separate_queue")
    app.config.update(
        TESTING=True,
        SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path}/app.db",
        SQLALCHEMY_BINDS={"queue": f"sqlite:///{tmp_path}/queue.db"},
        SOLIDQ_BIND="queue",
        SOLIDQ_DASHBOARD=False,
    )
    sqlalchemy = SQLAlchemy(model_class=Base)
    sqlalchemy.init_app(app)
    SolidQ(app)
    with app.app_context():
        sqlalchemy.create_all()
    yield app, sqlalchemy
    with app.app_context():
        app.extensions["solidq"].dispose()
        for bound in sqlalchemy.engines.values():
            bound.dispose()


def test_a_queue_on_another_database_commits_on_its_own(separate_queue):
    app, sqlalchemy = separate_queue
    with app.app_context():
        sqlalchemy.session.add(Order(number="H-1"))
        sqlalchemy.session.flush()
        worker_jobs.record.perform_later("H-1")
        sqlalchemy.session.rollback()
        engine = app.extensions["solidq"].engine
        assert support.count(engine, JOBS) == 1  # not atomic with the app: documented


def test_signals_of_a_joined_enqueue_are_sent_at_once(app, engine, orders):
    sent = []
    with signals.enqueue.connected_to(lambda sender, job: sent.append(job)):
        with app.app_context():
            support.db.session.add(Order(number="I-1"))
            support.db.session.flush()
            worker_jobs.record.perform_later("I-1")
            support.db.session.rollback()
    assert len(sent) == 1  # provisional, as inside solidq.transaction()


def test_the_first_enqueue_on_a_sqlite_file_not_yet_in_wal_mode_joins_the_app(tmp_path):
    """A file made by ``db.create_all()`` (or ``flask db upgrade``) is in rollback-journal
    mode until a queue connection switches it to WAL, which SQLite refuses while the app's
    session holds the write lock: the first enqueue after a flush failed with "database is
    locked" (issue 19, item 1). It joins the app's transaction instead, and a later queue
    connection switches the file."""
    url = f"sqlite:///{tmp_path}/fresh.db"
    app = support.create_app(url)
    with app.app_context():
        support.db.create_all()
        Base.metadata.create_all(support.db.engine)
        assert support.db.session.execute(sa.text("PRAGMA journal_mode")).scalar() == "delete"
        support.db.session.commit()
        engine = app.extensions["solidq"].engine
    kept = []
    try:
        for number, keep in (("W-1", False), ("W-2", True)):
            with app.app_context():
                support.db.session.add(Order(number=number))
                support.db.session.flush()
                job = worker_jobs.record.perform_later(number)
                assert job.successfully_enqueued
                if keep:
                    support.db.session.commit()
                    kept.append(job.provider_job_id)
                else:
                    support.db.session.rollback()
        assert [row.id for row in support.rows(engine, JOBS)] == kept
        with db.write(engine) as connection:
            connection.execute(sa.text("SELECT 1"))
        with sa.create_engine(url).connect() as connection:
            assert connection.execute(sa.text("PRAGMA journal_mode")).scalar() == "wal"
    finally:
        with app.app_context():
            app.extensions["solidq"].dispose()
            support.db.engines[None].dispose()

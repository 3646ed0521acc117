"""Behind PgBouncer (issue 18): a stock PgBouncer (Debian's, ``ignore_startup_parameters``
left alone) in transaction pooling, and in session pooling, in front of the PostgreSQL server.

Transaction pooling hands each transaction any server connection: the queue sends no startup
options, prepares no statement on the server, sets its statement timeout (and the claims'
``synchronous_commit``) with ``SET LOCAL`` in each transaction, and listens through a direct
URL or, without one, polls. ``.ci/run`` starts both PgBouncers; the process test modules of
``conftest.THROUGH_PGBOUNCER`` run through the transaction-pooling one too.
"""

from __future__ import annotations

import datetime as dt
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.processes.outage import is_unreachable
from flask_solidq.storage import db
from flask_solidq.storage import engines
from flask_solidq.storage import fast_path
from tests import support
from tests.conftest import _backends
from tests.jobs import coalesce as coalesce_jobs
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support

if t.TYPE_CHECKING:
    from flask import Flask

THROUGH = [param for param in _backends() if param.id == "pgbouncer"]
through_pgbouncer = pytest.mark.parametrize("database_url", THROUGH, indirect=True)

JOBS = t.cast(sa.Table, models.JobRecord.__table__)

launcher = runtime_support.launcher
runs_table = runtime_support.runs_table


def bouncer_port() -> int | None:
    return sa.make_url(t.cast(str, support.backend_url("pgbouncer"))).port


def queue_engine(app: Flask) -> sa.Engine:
    with app.app_context():
        return t.cast(sa.Engine, app.extensions["solidq"].engine)


def claim_engine(app: Flask) -> sa.Engine:
    with app.app_context():
        return t.cast(sa.Engine, app.extensions["solidq"].claim_engine)


# -- enqueueing, in the web process -----------------------------------------------------


@through_pgbouncer
def test_enqueues_of_every_kind_go_through_transaction_pooling(app: Flask, engine: sa.Engine):
    assert engine.url.port == bouncer_port()
    with app.app_context():
        # Many times the same statements on few connections: psycopg would prepare them after
        # five, and the next transaction's server connection wouldn't know them.
        for index in range(40):
            worker_jobs.record.perform_later(f"single-{index}")
        batch = [worker_jobs.record.new(f"bulk-{index}") for index in range(200)]
        support.solidq.perform_all_later(batch)
        for index in range(200):
            coalesce_jobs.dedupe.perform_later(index % 20, f"call-{index}")
        with db.transaction(engine):
            for index in range(10):
                worker_jobs.record.perform_later(f"in-transaction-{index}")
    assert support.count(engine, JOBS) == 40 + 200 + 20 + 10


@through_pgbouncer
def test_the_statement_timeout_holds_on_every_path_through_transaction_pooling(
    database_url: str,
):
    with support.app_emptied_after(database_url, SOLIDQ_DATABASE_STATEMENT_TIMEOUT=0.2) as app:
        engine, claims = queue_engine(app), claim_engine(app)
        settings = sa.text(
            "SELECT current_setting('statement_timeout'), current_setting('synchronous_commit')"
        )
        assert fast_path.fetch_autocommitted(engine, settings, {}) == [("200ms", "on")]
        assert fast_path.fetch_autocommitted(claims, settings, {}) == [("200ms", "off")]
        with db.write(engine) as connection:
            assert tuple(connection.execute(settings).one()) == ("200ms", "on")
        with db.read(claims) as connection:
            assert tuple(connection.execute(settings).one()) == ("200ms", "off")

        slow = sa.text("SELECT pg_sleep(2)")
        for run in (
            lambda: fast_path.fetch_autocommitted(engine, slow, {}),
            lambda: fast_path.fetch_autocommitted(claims, slow, {}),
            lambda: _in_transaction(engine, slow),
        ):
            started = time.monotonic()
            with pytest.raises(sa.exc.OperationalError, match="statement timeout") as raised:
                run()
            assert time.monotonic() - started < 1.5
            assert not is_unreachable(raised.value)
        # Nothing stayed on a session: a plain connection through the pooler has no timeout.
        plain = sa.create_engine(engine.url, connect_args={"prepare_threshold": None})
        try:
            with plain.connect() as connection:
                assert connection.exec_driver_sql("SHOW statement_timeout").scalar() == "0"
        finally:
            plain.dispose()


def _in_transaction(engine: sa.Engine, statement: sa.TextClause) -> None:
    with db.write(engine) as connection:
        connection.execute(statement)


@through_pgbouncer
def test_without_the_pooler_setting_the_refusal_names_it_and_is_no_outage(database_url: str):
    app = support.create_app(
        database_url, SOLIDQ_DATABASE_POOLER=None, SOLIDQ_DATABASE_LISTEN_URL=None
    )
    engine = queue_engine(app)
    for attempt in (
        lambda: fast_path.fetch_autocommitted(engine, sa.text("SELECT 1"), {}),
        lambda: _in_transaction(engine, sa.text("SELECT 1")),
    ):
        with pytest.raises(sa.exc.OperationalError) as raised:
            attempt()
        message = str(raised.value)
        assert "unsupported startup parameter: options" in message
        assert "SOLIDQ_DATABASE_POOLER = 'pgbouncer'" in message
        assert not is_unreachable(raised.value)
    runtime_support.dispose_engines(app)


# -- worker processes -------------------------------------------------------------------


@through_pgbouncer
def test_without_a_listen_url_work_warns_once_and_jobs_still_run(
    app: Flask, engine: sa.Engine, launcher: runtime_support.Launcher
):
    work = launcher.start(config={"SOLIDQ_DATABASE_LISTEN_URL": None})
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
    with app.app_context():
        due = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=0.5)
        worker_jobs.record.set(wait_until=due).perform_later("scheduled")
        for index in range(20):
            worker_jobs.record.perform_later(index)
    support.wait_until(lambda: len(runtime_support.runs(engine)) == 21, timeout=20)
    output = work.output()
    assert output.count("SOLIDQ_DATABASE_LISTEN_URL is not") == 1, output
    assert "Traceback" not in output and "can't listen" not in output, output


@through_pgbouncer
def test_wake_ups_travel_through_the_listen_url(
    database_url: str, app: Flask, engine: sa.Engine, launcher: runtime_support.Launcher
):
    """The worker polls every 30 s: only the dispatcher's ``NOTIFY`` (sent through the
    pooler), heard on the direct listen URL, wakes it for a job that comes due. The test's
    enqueue goes through a URL of its own, so its machine's sockets (one directory per URL)
    can't wake the processes either."""
    config = {
        "SOLIDQ_WORKERS": [{"queues": "*", "threads": 2, "polling_interval": 30}],
        "SOLIDQ_DISPATCHERS": [{"polling_interval": 0.1}],
    }
    work = launcher.start(config=config)
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
    other = sa.make_url(database_url).update_query_dict({"sslmode": "disable"})
    elsewhere = support.create_app(other.render_as_string(hide_password=False))
    try:
        latencies = []
        for index in range(3):
            with elsewhere.app_context():
                due = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=0.3)
                worker_jobs.record.set(wait_until=due).perform_later(f"due-{index}")
            expected = index + 1
            support.wait_until(
                lambda expected=expected: len(runtime_support.runs(engine)) == expected,
                timeout=10,
            )
            started = runtime_support.runs(engine)[-1].started_at
            latencies.append((started.replace(tzinfo=dt.timezone.utc) - due).total_seconds())
        assert max(latencies) < 2.0, (latencies, work.output())
    finally:
        runtime_support.dispose_engines(elsewhere)
    assert "Traceback" not in work.output()


# -- session pooling --------------------------------------------------------------------


@pytest.fixture
def session_pooled_url(database_url: str) -> str:
    session = support.backend_url("pgbouncer_session")
    if not session:
        pytest.skip("SOLIDQ_TEST_PGBOUNCER_SESSION_URL is not set")
    bouncer = sa.make_url(session)
    url = sa.make_url(database_url).set(host=bouncer.host, port=bouncer.port)
    return url.difference_update_query(["application_name"]).render_as_string(hide_password=False)


@through_pgbouncer
def test_session_pooling_works_and_listens_through_its_own_url(
    session_pooled_url: str, engine: sa.Engine, runs_table: sa.Table, tmp_path: t.Any
):
    """Session pooling keeps each client's server session, so ``LISTEN`` through it holds;
    it still refuses startup options, so the pooler setting is needed all the same."""
    config = {
        "SQLALCHEMY_ENGINE_OPTIONS": {"connect_args": {"prepare_threshold": None}},
        "SOLIDQ_DATABASE_POOLER": "pgbouncer",
        "SOLIDQ_DATABASE_LISTEN_URL": session_pooled_url,
        "SOLIDQ_WORKERS": [{"queues": "*", "threads": 2, "polling_interval": 30}],
        "SOLIDQ_DISPATCHERS": [{"polling_interval": 0.1}],
    }
    launcher = runtime_support.Launcher(session_pooled_url, tmp_path)
    app = support.create_app(session_pooled_url, **config)
    try:
        work = launcher.start(config=config)
        runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
        with app.app_context():
            for index in range(30):
                worker_jobs.record.perform_later(index)
            due = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=0.3)
            worker_jobs.record.set(wait_until=due).perform_later("due")
        try:
            support.wait_until(lambda: len(runtime_support.runs(engine)) == 31, timeout=10)
        except AssertionError:
            raise AssertionError(work.output()) from None
        assert "Traceback" not in work.output()
    finally:
        launcher.kill_all()
        runtime_support.dispose_engines(app)
        support.delete_all_rows(engine)


def test_a_listen_url_without_a_pooler_is_refused_with_the_fix(tmp_path: t.Any):
    with pytest.raises(ValueError, match="SOLIDQ_DATABASE_POOLER = 'pgbouncer'"):
        support.create_app(
            f"sqlite:///{tmp_path}/q.db", SOLIDQ_DATABASE_LISTEN_URL="postgresql://db/app"
        )
    with pytest.raises(ValueError, match="must be None .* or 'pgbouncer'"):
        support.create_app(f"sqlite:///{tmp_path}/q.db", SOLIDQ_DATABASE_POOLER="pgpool")


def test_the_pooler_setting_on_another_database_is_refused(tmp_path: t.Any):
    app = support.create_app(f"sqlite:///{tmp_path}/q.db", SOLIDQ_DATABASE_POOLER="pgbouncer")
    with app.app_context():
        with pytest.raises(ValueError, match="is for PostgreSQL behind PgBouncer"):
            app.extensions["solidq"].engine  # noqa: B018 - building the engine refuses
        support.db.engines[None].dispose()


def test_the_pooler_sends_no_startup_options_and_prepares_nothing() -> None:
    url = sa.make_url("postgresql+psycopg://u@bouncer:6432/app")
    pooled = engines.ConnectionSettings(pooler="pgbouncer")
    args = engines.connection_args(url, {}, pooled)
    assert "options" not in args
    assert args["prepare_threshold"] is None
    direct = engines.connection_args(url, {}, engines.ConnectionSettings())
    assert direct["options"] == "-c statement_timeout=30000"
    assert "prepare_threshold" not in direct

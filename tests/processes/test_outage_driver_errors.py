"""Outages logged as promised on every path (issue 18, item 4): the drivers' own errors
(psycopg's, PyMySQL's), raised around SQLAlchemy by the fast path of :mod:`flask_solidq.storage.db`,
are told apart as SQLAlchemy's are, and a database restart under a worker logs one warning
per process and outage, with no ERROR line or traceback from the finisher or the poll.
"""

from __future__ import annotations

import collections
import pathlib
import re
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.processes.outage import Outage
from flask_solidq.processes.outage import is_unreachable
from flask_solidq.storage import engines
from flask_solidq.storage import fast_path
from flask_solidq.storage import pooler
from tests import support
from tests.jobs import worker as worker_jobs
from tests.processes import test_faults
from tests.support import fault_proxy
from tests.support import runtime as runtime_support

launcher = runtime_support.launcher
runs_table = runtime_support.runs_table

server_backends = pytest.mark.parametrize(
    "database_url", test_faults.server_backends(), indirect=True
)
UNREACHABLE = re.compile(r"SolidQ (\S+) \S+ can't reach the database")


def settled(engine: sa.Engine) -> int:
    """How many jobs finished or failed."""
    return len(runtime_support.finished_ids(engine)) + len(runtime_support.failures(engine))


def driver_connect(url: sa.URL, **options: t.Any) -> t.Any:
    """A connection of the driver itself, no SQLAlchemy around it."""
    if url.get_backend_name() == "postgresql":
        import psycopg

        return psycopg.connect(
            host=url.host, port=url.port, user=url.username, dbname=url.database, **options
        )
    import pymysql

    return pymysql.connect(
        host=url.host, port=url.port, user=url.username, database=url.database, **options
    )


def driver_error(action: t.Callable[[], object]) -> BaseException:
    try:
        action()
    except Exception as error:  # noqa: BLE001 - the driver's error is what the test reads
        assert not isinstance(error, sa.exc.SQLAlchemyError), error
        return error
    raise AssertionError("no error")


@server_backends
def test_the_drivers_own_errors_of_a_lost_database_are_outages(database_url: str):
    url = sa.make_url(database_url)
    closed = url.set(port=1)
    refused = driver_error(lambda: driver_connect(closed, connect_timeout=2))
    assert is_unreachable(refused), repr(refused)

    with fault_proxy.FaultProxy.for_url(database_url, lifetime=60) as proxy:
        connection = driver_connect(sa.make_url(proxy.url(database_url)), autocommit=True)
        try:
            proxy.set_mode(fault_proxy.RESET)
            lost = driver_error(lambda: connection.cursor().execute("SELECT 1"))
            assert is_unreachable(lost), repr(lost)
            again = driver_error(lambda: connection.cursor().execute("SELECT 1"))
            assert is_unreachable(again), repr(again)
        finally:
            connection.close()


@server_backends
def test_the_drivers_own_errors_of_a_server_that_answered_are_not(database_url: str):
    url = sa.make_url(database_url)
    connection = driver_connect(url, autocommit=True)
    try:
        cursor = connection.cursor()
        if url.get_backend_name() == "postgresql":
            cursor.execute("SET statement_timeout = 50")
            slow = driver_error(lambda: cursor.execute("SELECT pg_sleep(1)"))
        else:
            cursor.execute("SET SESSION max_statement_time = 0.05")
            slow = driver_error(lambda: cursor.execute("SELECT SLEEP(1) FROM (SELECT 1) x"))
        assert not is_unreachable(slow), repr(slow)
        wrong = driver_error(lambda: cursor.execute("SELECT * FROM no_such_table"))
        assert not is_unreachable(wrong), repr(wrong)
    finally:
        connection.close()


def test_a_prepared_statement_gone_names_the_setting_and_is_no_outage(
    caplog: pytest.LogCaptureFixture,
):
    """What PgBouncer's transaction pooling does to psycopg's prepared statements, made by
    the server itself: ``EXECUTE`` of a statement this session never prepared."""
    postgres = support.backend_url("postgres")
    if not postgres:
        pytest.skip("SOLIDQ_TEST_POSTGRES_URL is not set")
    engine = engines.create_queue_engine(sa.make_url(postgres))
    try:
        with pytest.raises(sa.exc.ProgrammingError) as raised:
            fast_path.fetch_autocommitted(engine, sa.text('EXECUTE "_pg3_26"'), {})
    finally:
        engine.dispose()
    message = str(raised.value)
    assert 'prepared statement "_pg3_26" does not exist' in message
    assert "set SOLIDQ_DATABASE_POOLER = 'pgbouncer'" in message
    assert not is_unreachable(raised.value)
    outage = Outage("Worker w")
    assert not outage.failed(raised.value, started=time.monotonic(), retry_every=1)
    # Through SQLAlchemy's own path the driver's text lacks the fix: the outage says it, once.
    plain = sa.exc.ProgrammingError(
        "EXECUTE", {}, Exception('prepared statement "_pg3_3" does not exist')
    )
    caplog.set_level("INFO", logger="flask_solidq")
    for _ in range(3):
        assert not outage.failed(plain, started=time.monotonic(), retry_every=1)
    named = [r for r in caplog.records if pooler.POOLER_FIX in r.getMessage()]
    assert len(named) == 1 and named[0].levelname == "WARNING"
    assert "can't reach" not in caplog.text
    # The server's words when the pooler hands a prepared statement's Bind to a connection
    # that prepared another under its name (SQLSTATE 08P01, an OperationalError of psycopg's).
    import psycopg

    mixed = psycopg.errors.ProtocolViolation(
        'bind message supplies 11 parameters, but prepared statement "_pg3_1" requires 3'
    )
    assert isinstance(mixed, psycopg.OperationalError)
    assert pooler.is_pooler_error(mixed) and not is_unreachable(mixed)


@pytest.mark.parametrize("database_url", test_faults.server_backends()[:1], indirect=True)
def test_a_restart_under_a_worker_logs_one_warning_per_process_and_no_error(
    database_url: str,
    app: t.Any,
    engine: sa.Engine,
    runs_table: sa.Table,
    tmp_path: pathlib.Path,
):
    """PostgreSQL, whose claims, enqueues and finishes take the driver-level fast path: the
    connections are reset (the server restarting), new ones refused for a while, then all
    is well again. Every process warns once that it can't reach the database, and says once
    that it can again (a lost wake-up listener says so at INFO only: the warning covers it);
    the finisher and the poll log no ERROR and no traceback."""
    assert sa.make_url(database_url).get_backend_name() == "postgresql"
    with fault_proxy.FaultProxy.for_url(database_url, lifetime=120) as proxy:
        through_proxy = runtime_support.Launcher(proxy.url(database_url), tmp_path)
        try:
            work = through_proxy.start()
            runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
            with app.app_context():
                for index in range(400):
                    worker_jobs.sleep.perform_later(index, 0.01)
            support.wait_until(lambda: len(runtime_support.runs(engine)) >= 20, timeout=20)
            proxy.set_mode(fault_proxy.RESET)
            time.sleep(1.5)  # the restart's own length
            proxy.set_mode(fault_proxy.PASS)
            # A job whose own statements met the restart fails (its error is its own).
            support.wait_until(lambda: settled(engine) == 400, timeout=60)
            output = work.output()
        finally:
            through_proxy.kill_all()
    assert " ERROR " not in output and "Traceback" not in output, output
    warnings = collections.Counter(UNREACHABLE.findall(output))
    assert warnings["Worker"] == 1, output
    assert max(warnings.values()) == 1, output
    assert output.count("database reachable again") == sum(warnings.values()), output
    assert "WARNING SolidQ can't listen" not in output, output


def test_a_success_begun_before_the_outage_ends_none(caplog: pytest.LogCaptureFixture):
    """A claim whose reply beat the restart succeeds after another thread's failure started
    the outage: it proves nothing about the database now."""
    caplog.set_level("INFO", logger="flask_solidq")
    outage = Outage("Worker w")
    before = time.monotonic()
    lost = sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))
    assert outage.failed(lost, started=time.monotonic(), retry_every=1)
    outage.succeeded(started=before)
    assert outage.ongoing
    outage.succeeded(started=time.monotonic())
    assert not outage.ongoing
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]

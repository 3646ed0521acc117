"""The queue's connections guard against a slow, gone or silently cut-off database (issue 8,
point 3): timeouts on every engine the queue builds, hidden parameters, one log line per
outage, and one error line from the CLI instead of a traceback."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import subprocess
import sys
import time
import typing as t

import click
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from flask import Flask
from flask.cli import FlaskGroup

from flask_solidq import cli
from flask_solidq.processes.outage import Outage
from flask_solidq.processes.poller import Poller
from flask_solidq.storage import db
from flask_solidq.storage import engines
from tests import support
from tests.support import processes
from tests.support.runtime import ROOT

#: A local port nothing listens on: connecting is refused at once.
CLOSED_PORT_URL = "postgresql+psycopg://solidq:s3cret-pw@127.0.0.1:1/nowhere"


def _backend(url: str) -> str:
    return sa.make_url(url).get_backend_name()


# -- the engines' settings ---------------------------------------------------------------


def test_the_queue_engines_carry_the_timeouts(app: Flask, database_url: str) -> None:
    with app.app_context():
        state = app.extensions["solidq"]
        engines = {state.engine, state.claim_engine}
    for engine in engines:
        assert engine.hide_parameters
        if _backend(database_url) == "sqlite":
            continue
        assert not engine.pool._pre_ping  # off by default: a round trip per checkout
        with engine.connect() as connection:
            if _backend(database_url) == "postgresql":
                assert connection.exec_driver_sql("SHOW statement_timeout").scalar() == "30s"
                info = connection.connection.driver_connection.info  # type: ignore[union-attr]
                params = info.get_parameters()
                assert params["connect_timeout"] == "10"
                assert params["keepalives"] == "1"
                assert params["keepalives_idle"] == "10"
                assert params["keepalives_interval"] == "5"
                assert params["keepalives_count"] == "4"
                assert params["tcp_user_timeout"] == "30000"
            else:
                row = connection.exec_driver_sql("SELECT @@version").scalar()
                if "mariadb" in str(row).lower():
                    seconds = connection.exec_driver_sql("SELECT @@max_statement_time").scalar()
                    assert float(seconds) == 30.0
                else:
                    ms = connection.exec_driver_sql("SELECT @@max_execution_time").scalar()
                    assert int(ms) == 30000
                dbapi = connection.connection.driver_connection
                assert dbapi._read_timeout == 60.0  # type: ignore[union-attr]
                assert dbapi._write_timeout == 60.0  # type: ignore[union-attr]


def test_a_statement_over_the_timeout_fails_on_the_queue_engine_not_in_a_job(
    database_url: str,
) -> None:
    app = support.create_app(database_url, SOLIDQ_DATABASE_STATEMENT_TIMEOUT=0.5)
    if _backend(database_url) == "sqlite":
        # SQLite has no statement timeout: a statement only waits on the write lock, for the
        # busy timeout, which the queue's engine sets on every connection.
        with app.app_context():
            state = app.extensions["solidq"]
            with db.read(state.engine) as connection:
                busy = connection.exec_driver_sql("PRAGMA busy_timeout").scalar()
            state.dispose()
            support.db.engines[None].dispose()
        assert busy == int(engines.SQLITE_BUSY_TIMEOUT * 1000)
        return
    sleep = (
        "SELECT pg_sleep(1.2)" if _backend(database_url) == "postgresql" else "SELECT SLEEP(1.2)"
    )
    with app.app_context():
        state = app.extensions["solidq"]
        try:
            with pytest.raises(sa.exc.OperationalError) as raised:
                with db.read(state.engine) as connection:
                    connection.exec_driver_sql(sleep)
            assert "statement timeout" in str(raised.value) or "max_statement_time" in str(
                raised.value
            )
            # A job's own work goes through the app's session, which has no such limit.
            support.db.session.execute(sa.text(sleep))
            support.db.session.rollback()
        finally:
            state.dispose()
            support.db.engines[None].dispose()


def test_the_apps_connect_args_win_over_the_queues() -> None:
    url = sa.make_url("postgresql+psycopg://u@db/x")
    args = engines.connection_args(
        url,
        {"connect_timeout": 3, "options": "-c statement_timeout=5000", "keepalives_idle": 1},
        engines.ConnectionSettings(),
    )
    assert args["connect_timeout"] == 3
    assert args["keepalives_idle"] == 1
    assert args["keepalives_count"] == 4
    # Later -c settings win in PostgreSQL's options: the app's come after ours.
    assert args["options"] == "-c statement_timeout=30000 -c statement_timeout=5000"
    mysql = engines.connection_args(
        sa.make_url("mysql+pymysql://u@db/x"), {"read_timeout": 5}, engines.ConnectionSettings()
    )
    assert mysql == {"read_timeout": 5, "write_timeout": 60.0, "connect_timeout": 10.0}
    off = engines.connection_args(
        url,
        None,
        engines.ConnectionSettings(
            connect_timeout=None, dead_connection_timeout=None, statement_timeout=None
        ),
    )
    assert off == {}


def test_errors_of_the_queue_engine_hide_parameters(tmp_path: t.Any) -> None:
    engine = engines.create_queue_engine(sa.make_url(f"sqlite:///{tmp_path}/q.db"))
    try:
        with pytest.raises(sa.exc.DBAPIError) as raised:
            with engine.connect() as connection:
                connection.execute(
                    sa.text("SELECT :secret FROM no_such_table"), {"secret": "pw-42"}
                )
        assert "pw-42" not in str(raised.value)
        assert "hidden" in str(raised.value)
    finally:
        engine.dispose()


# -- one line per outage -----------------------------------------------------------------


class _ProbePoller(Poller):
    """Polls ``engine``; the test swaps it for a good one, then stops the loop."""

    kind = "Probe"

    def __init__(self, app: Flask, engine: sa.Engine, polls_before_heal: int) -> None:
        super().__init__(app)
        self.target = engine
        self.polls = 0
        self.polls_before_heal = polls_before_heal
        self.healed: sa.Engine | None = None
        self.successes = 0

    def poll(self) -> float:
        self.polls += 1
        if self.polls > self.polls_before_heal and self.healed is not None:
            self.target = self.healed
        with self.target.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
        self.successes += 1
        if self.successes >= 2:
            self.stop()
        return 0.01


def test_an_unreachable_database_is_logged_once_and_its_return_once(
    tmp_path: t.Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = support.create_app(f"sqlite:///{tmp_path}/q.db")
    bad = engines.create_queue_engine(sa.make_url(CLOSED_PORT_URL))
    good = engines.create_queue_engine(sa.make_url(f"sqlite:///{tmp_path}/q.db"))
    poller = _ProbePoller(app, bad, polls_before_heal=4)
    poller.healed = good
    caplog.set_level(logging.INFO, logger="flask_solidq")
    try:
        with app.app_context():
            poller.loop()
    finally:
        bad.dispose()
        good.dispose()
    assert poller.polls >= 5
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    message = warnings[0].getMessage()
    assert "can't reach the database" in message
    assert "Connection refused" in message
    assert "retrying every 10s" in message
    assert "s3cret" not in caplog.text
    assert warnings[0].exc_info is None
    again = [r for r in caplog.records if "reachable again" in r.getMessage()]
    assert len(again) == 1
    assert again[0].levelno == logging.INFO


def test_other_poll_errors_keep_their_traceback(
    tmp_path: t.Any, caplog: pytest.LogCaptureFixture
) -> None:
    app = support.create_app(f"sqlite:///{tmp_path}/q.db")

    class Broken(Poller):
        kind = "Broken"
        calls = 0

        def poll(self) -> float:
            self.calls += 1
            if self.calls >= 3:
                self.stop()
            raise ValueError("a bug")

    caplog.set_level(logging.INFO, logger="flask_solidq")
    with app.app_context():
        Broken(app).loop()
    failures = [r for r in caplog.records if "poll failed" in r.getMessage()]
    assert len(failures) == 3
    assert all(r.exc_info for r in failures)


def test_a_failure_begun_before_the_recovery_starts_no_new_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="flask_solidq")
    outage = Outage("Worker w")
    lost = sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection"))
    stuck_since = time.monotonic()
    assert outage.failed(lost, started=stuck_since, retry_every=1)
    outage.succeeded()
    assert outage.failed(lost, started=stuck_since, retry_every=1)  # the old outage's
    assert not outage.ongoing
    assert outage.failed(lost, started=time.monotonic(), retry_every=1)  # a new one
    assert outage.ongoing
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO", "WARNING"]
    timeout = sa.exc.OperationalError(
        "SELECT 1", {}, type("QueryCanceled", (Exception,), {"sqlstate": "57014"})()
    )
    assert not outage.failed(timeout, started=time.monotonic(), retry_every=1)


# -- the CLI -----------------------------------------------------------------------------


def _status(database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SOLIDQ_TEST_DATABASE_URL": database_url, "SOLIDQ_TEST_CONFIG": "{}"}
    return processes.run(
        [sys.executable, "-m", "flask", "--app", "tests.apps.worker_app", "solidq", "status"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "url",
    [CLOSED_PORT_URL, "mysql+pymysql://solidq:s3cret-pw@127.0.0.1:1/nowhere"],
    ids=["postgres", "mysql"],
)
def test_status_says_in_one_line_that_the_database_cant_be_reached(url: str) -> None:
    result = _status(url)
    assert result.returncode == 1
    output = (result.stdout + result.stderr).strip()
    assert "Traceback" not in output
    assert len(output.splitlines()) == 1, output
    assert output.startswith("Error: Can't connect to the database ")
    assert "solidq:***@127.0.0.1:1/nowhere" in output
    assert "s3cret" not in output
    assert "Connection refused" in output


def _flask_commands_plugin() -> bool:
    return any(
        entry.value.startswith("flask_solidq")
        for entry in importlib.metadata.entry_points(group="flask.commands")
    )


def test_status_names_the_missing_driver_in_one_line() -> None:
    # The app's own Flask-SQLAlchemy fails to load before flask-solidq's code runs, unless the
    # group is found first, as the package's flask.commands entry point makes it.
    assert _flask_commands_plugin()
    result = _status("postgresql+pg8000://solidq:s3cret-pw@127.0.0.1:5432/x")
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 1
    assert "Traceback" not in output
    assert 'pip install "flask-solidq[postgres]"' in output


@pytest.mark.parametrize(
    ("url", "fix"),
    [
        ("postgresql+pg8000://solidq:s3cret-pw@db/x", 'pip install "flask-solidq[postgres]"'),
        ("mysql+mysqldb://solidq:s3cret-pw@db/x", 'pip install "flask-solidq[mysql]"'),
    ],
)
@pytest.mark.parametrize("command", ["status", "work"])
def test_a_missing_driver_is_one_error_line_naming_the_fix(
    url: str, fix: str, command: str
) -> None:
    """What ``flask solidq`` prints when the app fails to load for want of a driver (the
    group registered the way a ``flask.commands`` entry point registers it)."""

    def create_app() -> Flask:
        return support.create_app(url)

    group = FlaskGroup(create_app=create_app, add_default_commands=False)
    group.add_command(cli.solidq_group)
    result = CliRunner().invoke(group, ["solidq", command])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: The database driver for ")
    assert "solidq:***@db/x" in line
    assert "s3cret" not in line
    assert fix in line


def test_a_missing_driver_of_the_queue_engine_is_one_error_line(
    tmp_path: t.Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = support.create_app(f"sqlite:///{tmp_path}/q.db")

    def create_queue_engine(*_args: t.Any) -> sa.Engine:
        return sa.create_engine("postgresql+pg8000://solidq:s3cret-pw@db/x")

    monkeypatch.setattr(engines, "create_queue_engine", create_queue_engine)
    with app.app_context(), pytest.raises(click.ClickException) as raised:
        cli._queue_engine()
    message = raised.value.format_message()
    assert "postgresql+pg8000://solidq:***@db/x" in message
    assert 'pip install "flask-solidq[postgres]"' in message

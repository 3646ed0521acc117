"""What `flask solidq work` logs about the jobs it performs: a line when each starts and one
when it ends (finished, retried with when, discarded, or failed at WARNING with its error),
with the same fields as ``extra=``, never the job's arguments; ``--log-level`` and
``--log-format json`` (every process of a fork-mode run writes JSON lines); usage errors for
bad options; and the hint about a queue no job uses.

The formatter, ``configure`` and the lines' fields are tested here without a database; the
rest with real `flask solidq work` processes, on every backend."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import re
import signal
import sys
import typing as t

import pytest

from flask_solidq.logging import fields as log_fields
from flask_solidq.logging import formats
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.operations.outcomes import Retry
from flask_solidq.operations.outcomes import error_json
from flask_solidq.timing import UTC
from flask_solidq.values import ClaimedJob
from tests import support
from tests.jobs import basic as jobs
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import FAILED

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

LOGGER = "flask_solidq"
SECRET = "secret-argument-4711"
#: A text line: time, level, message.
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) SolidQ ")


# -- the lines' fields, the formatter and configure (no database) -------------------------------


@pytest.fixture
def subscriber() -> t.Iterator[None]:
    log_subscriber.connect()
    yield
    log_subscriber.disconnect()


def claimed_job(job_id: int = 7) -> ClaimedJob:
    return ClaimedJob(
        id=job_id,
        active_job_id="a1b2",
        class_name="store_result",
        queue_name="default",
        priority=0,
        arguments=json.dumps({"args": [SECRET]}),
        concurrency_key=None,
        rate_limit_key=None,
    )


def performed_job() -> t.Any:
    job = jobs.store_result.new(SECRET)
    job.executions = 2
    return job


class Boom(Exception):
    pass


@pytest.mark.usefixtures("subscriber")
def test_a_finished_run_logs_one_info_line_with_its_duration_and_fields(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    outcome = Outcome(claimed_job(), OutcomeKind.FINISHED, job=performed_job())

    log_subscriber.log_performed(outcome, 0.123456)

    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        'SolidQ Job finished job_name: "store_result", job_id: 7, active_job_id: "a1b2",'
        ' queue: "default", attempt: 2, duration: 0.1235'
    )
    assert formats.extra_fields(record) == {
        "event": "job_finished",
        "job_name": "store_result",
        "job_id": 7,
        "active_job_id": "a1b2",
        "queue": "default",
        "attempt": 2,
        "duration": 0.1235,
    }
    assert SECRET not in caplog.text


@pytest.mark.usefixtures("subscriber")
def test_a_retried_run_says_when_it_runs_again(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    at = dt.datetime(2026, 5, 1, 12, 0, 3, 250000, tzinfo=UTC)
    retry = Retry(arguments="{}", scheduled_at=at, queue_name="default", priority=0, wait=3.0)
    outcome = Outcome(
        claimed_job(), OutcomeKind.RETRIED, retry=retry, job=performed_job(), exception=Boom("x")
    )

    log_subscriber.log_performed(outcome, 0.5)

    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage().startswith('SolidQ Job retried job_name: "store_result"')
    assert record.getMessage().endswith(
        f'error_class: "{__name__}.Boom", retry_at: "2026-05-01T12:00:03.250Z", wait: 3.0'
    )
    assert (record.event, record.retry_at, record.wait) == (
        "job_retried",
        "2026-05-01T12:00:03.250Z",
        3.0,
    )


@pytest.mark.usefixtures("subscriber")
def test_a_discarded_run_logs_at_info_with_the_error_class(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    outcome = Outcome(
        claimed_job(), OutcomeKind.DISCARDED, job=performed_job(), exception=Boom("private")
    )

    log_subscriber.log_performed(outcome, 0.01)

    (record,) = caplog.records
    assert (record.levelno, record.event, record.error_class) == (
        logging.INFO,
        "job_discarded",
        f"{__name__}.Boom",
    )
    assert "private" not in caplog.text


@pytest.mark.usefixtures("subscriber")
def test_a_failed_run_logs_a_warning_with_its_error_class_and_message(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    error = ValueError("the card was declined\nby the bank")
    outcome = Outcome(
        claimed_job(),
        OutcomeKind.FAILED,
        error=error_json(error),
        job=performed_job(),
        exception=error,
    )

    log_subscriber.log_performed(outcome, 0.2)

    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().endswith(
        'duration: 0.2, error_class: "ValueError",'
        ' error_message: "the card was declined\\nby the bank"'
    )
    assert (record.event, record.error_class, record.error_message) == (
        "job_failed",
        "ValueError",
        "the card was declined\nby the bank",
    )
    assert SECRET not in caplog.text


@pytest.mark.usefixtures("subscriber")
def test_a_job_that_could_not_be_loaded_fails_with_the_claimed_name_and_no_attempt(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    error = LookupError("no such job " + "x" * 2000)
    outcome = Outcome(claimed_job(9), OutcomeKind.FAILED, error=error_json(error))

    log_subscriber.log_performed(outcome, 0.0)

    (record,) = caplog.records
    assert (record.job_name, record.job_id, record.attempt) == ("store_result", 9, None)
    assert len(record.error_message) == log_fields.MAX_MESSAGE_LENGTH + 3


def test_nothing_is_logged_when_not_connected_or_the_level_is_off(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    log_subscriber.disconnect()  # a thread-mode supervisor of another test may have connected
    log_subscriber.log_performed(Outcome(claimed_job(), OutcomeKind.FINISHED), 0.1)
    assert caplog.records == []

    log_subscriber.connect()
    try:
        caplog.set_level(logging.WARNING, logger=LOGGER)
        log_subscriber.log_performed(Outcome(claimed_job(), OutcomeKind.FINISHED), 0.1)
    finally:
        log_subscriber.disconnect()
    assert caplog.records == []


def make_record(message: str = "hello %s", *args: t.Any, **extra: t.Any) -> logging.LogRecord:
    logger = logging.getLogger("flask_solidq.test")
    record = logger.makeRecord(logger.name, logging.WARNING, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_the_text_formatter_writes_what_logging_s_own_does_across_seconds():
    ours = formats.TextFormatter()
    stdlib = logging.Formatter(formats.TEXT_FORMAT)
    start = 1_764_561_599.25  # a quarter second before a minute turns
    for offset in (0.0, 0.5, 0.74, 0.75, 0.9, 61.001, 0.3):  # back in time too
        record = logging.LogRecord("flask_solidq", logging.INFO, "", 0, "line", (), None)
        record.created = start + offset
        record.msecs = (record.created - int(record.created)) * 1000
        assert ours.format(record) == stdlib.format(record)
        assert ours.formatTime(record, "%H:%M") == stdlib.formatTime(record, "%H:%M")


def test_the_text_formatter_appends_a_traceback_and_a_stack_as_logging_s_own_does():
    ours = formats.TextFormatter()
    stdlib = logging.Formatter(formats.TEXT_FORMAT)
    try:
        raise ValueError("boom")
    except ValueError:
        failed = make_record("failed %s", "x", exc_info=sys.exc_info())
    stacked = make_record("here", stack_info="Stack (most recent call last):\n  here")
    for record in (failed, stacked, make_record("plain %d", 3)):
        assert ours.format(record) == stdlib.format(record)


def test_the_json_formatter_writes_one_object_per_line_with_the_extra_fields():
    record = make_record(
        "SolidQ %s\nsecond line", "x", event="job_failed", job_id=3, duration=0.5, attempt=None
    )

    line = formats.JsonFormatter().format(record)

    assert "\n" not in line
    data = json.loads(line)
    assert list(data) == [
        "time",
        "level",
        "logger",
        "message",
        "event",
        "job_id",
        "duration",
        "attempt",
    ]
    assert data["level"] == "WARNING"
    assert data["logger"] == "flask_solidq.test"
    assert data["message"] == "SolidQ x\nsecond line"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", data["time"])
    assert (data["event"], data["job_id"], data["duration"], data["attempt"]) == (
        "job_failed",
        3,
        0.5,
        None,
    )


def test_the_json_formatter_keeps_a_traceback_and_writes_values_json_cant_as_text():
    try:
        raise Boom("inside")
    except Boom:
        record = make_record("failed", when=dt.date(2026, 5, 1))
        record.exc_info = __import__("sys").exc_info()

    data = json.loads(formats.JsonFormatter().format(record))

    assert data["when"] == "2026-05-01"
    assert "Boom: inside" in data["exception"]


@pytest.fixture
def fresh_logger() -> t.Iterator[logging.Logger]:
    """A logger of its own, under no configured parent; its handlers go afterwards."""
    logger = logging.getLogger("solidq_configure_test")
    saved = logger.handlers[:], logger.level, logger.propagate
    logger.handlers.clear()
    logger.setLevel(logging.NOTSET)
    yield logger
    logger.handlers[:], logger.level, logger.propagate = saved


def test_configure_without_options_adds_text_to_stderr_at_info_once(fresh_logger, monkeypatch):
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])

    formats.configure(fresh_logger, level=None, log_format=None)
    formats.configure(fresh_logger, level=None, log_format=None)

    (handler,) = fresh_logger.handlers
    assert handler.formatter is not None
    assert handler.formatter._fmt == formats.TEXT_FORMAT
    assert fresh_logger.level == logging.INFO
    assert fresh_logger.propagate


def test_configure_without_options_leaves_an_app_s_own_handlers_and_level(fresh_logger):
    own = logging.StreamHandler(io.StringIO())
    fresh_logger.addHandler(own)
    fresh_logger.setLevel(logging.ERROR)

    formats.configure(fresh_logger, level=None, log_format=None)

    assert fresh_logger.handlers == [own]
    assert fresh_logger.level == logging.ERROR


def test_configure_with_a_format_and_level_writes_them_and_stops_propagating(fresh_logger):
    own = logging.StreamHandler(io.StringIO())
    fresh_logger.addHandler(own)
    fresh_logger.setLevel(logging.ERROR)

    formats.configure(fresh_logger, level=formats.LogLevel.DEBUG, log_format=formats.LogFormat.TEXT)
    formats.configure(fresh_logger, level=formats.LogLevel.DEBUG, log_format=formats.LogFormat.JSON)

    ours = [handler for handler in fresh_logger.handlers if handler is not own]
    assert len(ours) == 1
    assert isinstance(ours[0].formatter, formats.JsonFormatter)
    assert fresh_logger.level == logging.DEBUG
    assert not fresh_logger.propagate


# -- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--queues", ""], "--queues"),
        (["--queues", " , "], "--queues"),
        (["--threads", "0"], "--threads"),
        (["--processes", "0"], "--processes"),
        (["--polling-interval", "0"], "--polling-interval"),
        (["--polling-interval", "soon"], "--polling-interval"),
        (["--log-level", "loud"], "--log-level"),
        (["--log-format", "xml"], "--log-format"),
    ],
)
def test_bad_work_options_are_usage_errors(args, option):
    app = support.create_app("sqlite://")

    result = app.test_cli_runner().invoke(args=["solidq", "work", *args])

    assert result.exit_code == 2, result.output
    assert result.output.startswith("Usage: ")
    assert f"Error: Invalid value for '{option}'" in result.output


def test_an_empty_queue_list_says_how_to_name_every_queue():
    app = support.create_app("sqlite://")

    result = app.test_cli_runner().invoke(args=["solidq", "work", "--queues", ""])

    assert "Error: Invalid value for '--queues': '' names no queue;" in result.output
    assert 'use "*" for every queue' in result.output


def test_a_real_work_process_exits_2_on_a_usage_error(tmp_path):
    work = runtime_support.WorkProcess(
        f"sqlite:///{tmp_path}/unused.db",
        ["work", "--queues", ""],
        log_path=tmp_path / "work.log",
    )
    try:
        assert work.wait(30) == 2
        assert "Error: Invalid value for '--queues'" in work.output()
    finally:
        work.kill()


# -- real `flask solidq work` processes ------------------------------------------------------


def enqueue_outcomes(app) -> dict[str, int]:
    """One job per outcome: finished, retried twice then failed, discarded, failed."""
    with app.app_context():
        return {
            "record": worker_jobs.record.perform_later(SECRET).provider_job_id,
            "flaky": worker_jobs.flaky.perform_later("flaky-value").provider_job_id,
            "unwanted": worker_jobs.unwanted.perform_later("unwanted-value").provider_job_id,
            "fail": worker_jobs.fail.perform_later("b").provider_job_id,
        }


def run_until_settled(engine, work: runtime_support.WorkProcess, ids: dict[str, int]) -> str:
    """Wait for every job's outcome; stop the worker; return its output."""
    support.wait_until(
        lambda: (
            support.count(engine, FAILED) == 2
            and runtime_support.finished_ids(engine) == {ids["record"], ids["unwanted"]}
        ),
        timeout=30,
    )
    work.signal(signal.SIGTERM)
    assert work.wait(15) == 0, work.output()
    return work.output()


def lines_about(output: str, job_id: int) -> list[str]:
    return [line for line in output.splitlines() if f", job_id: {job_id}, " in line]


@pytest.mark.processes
def test_work_logs_a_line_when_each_job_starts_and_one_when_it_ends(app, engine, launcher):
    ids = enqueue_outcomes(app)
    work = launcher.start("--queues", "default,emials,mail*")

    output = run_until_settled(engine, work, ids)

    assert all(TEXT_LINE.match(line) for line in output.splitlines()), output
    record = lines_about(output, ids["record"])
    assert [line.split(" SolidQ ")[1].split(" job_name")[0] for line in record] == [
        "Job started",
        "Job finished",
    ]
    assert " INFO " in record[0]
    assert " INFO " in record[1]
    assert 'job_name: "worker_test.record"' in record[1]
    assert 'queue: "default", attempt: 1, duration: ' in record[1]
    flaky = lines_about(output, ids["flaky"])
    assert [line.split(" SolidQ ")[1].split(" job_name")[0] for line in flaky] == [
        "Job started",
        "Job retried",
        "Job started",
        "Job retried",
        "Job started",
        "Job failed",
    ]
    assert re.search(r'retry_at: "\d{4}-\d\d-\d\dT[\d:.]+Z", wait: 0.0$', flaky[1])
    assert "attempt: 3" in flaky[-1]
    (discarded,) = [line for line in lines_about(output, ids["unwanted"]) if "discarded" in line]
    assert " INFO " in discarded
    assert 'error_class: "tests.jobs.worker.NotWanted"' in discarded
    (failed,) = [line for line in lines_about(output, ids["fail"]) if "Job failed" in line]
    assert " WARNING " in failed
    assert failed.endswith('error_class: "ValueError", error_message: "failing on purpose with b"')
    # Never an argument (only an error's own message shows what it says).
    assert SECRET not in output
    assert "flaky-value" not in output
    # One hint, for the queue no job uses; none for a prefix.
    hints = [line for line in output.splitlines() if "no job definition uses" in line]
    assert len(hints) == 1, output
    assert ' WARNING SolidQ no job definition uses the queue "emials" (known: ' in hints[0]
    assert '"default"' in hints[0]


@pytest.mark.processes
def test_work_log_format_json_writes_json_lines_from_every_process(app, engine, launcher):
    ids = enqueue_outcomes(app)
    work = launcher.start("--log-format", "json", "--processes", "2", "--queues", "default,emials")

    output = run_until_settled(engine, work, ids)

    records = [json.loads(line) for line in output.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    started = [record for record in records if record["message"].startswith("SolidQ started")]
    assert sorted(record["message"].split()[2] for record in started) == [
        "Dispatcher",
        "Supervisor(fork)",
        "Worker",
        "Worker",
    ]
    by_event: dict[str, list[dict[str, t.Any]]] = {}
    for record in records:
        by_event.setdefault(record.get("event", ""), []).append(record)
    (finished,) = by_event["job_finished"]
    assert finished["level"] == "INFO"
    assert {key: finished[key] for key in ("job_name", "job_id", "queue", "attempt")} == {
        "job_name": "worker_test.record",
        "job_id": ids["record"],
        "queue": "default",
        "attempt": 1,
    }
    assert isinstance(finished["duration"], float)
    assert len(finished["active_job_id"]) == 36
    assert len(by_event["job_started"]) == 6
    assert [record["attempt"] for record in by_event["job_retried"]] == [1, 2]
    failed = {record["job_id"]: record for record in by_event["job_failed"]}
    assert failed[ids["fail"]]["level"] == "WARNING"
    assert failed[ids["fail"]]["error_class"] == "ValueError"
    assert failed[ids["fail"]]["error_message"] == "failing on purpose with b"
    assert failed[ids["flaky"]]["attempt"] == 3
    (discarded,) = by_event["job_discarded"]
    assert discarded["job_id"] == ids["unwanted"]
    (hint,) = by_event["unused_queue"]
    assert hint["queue"] == "emials"
    assert "default" in hint["known_queues"]
    assert SECRET not in output


@pytest.mark.processes
def test_work_log_level_warning_leaves_only_warnings(app, engine, launcher):
    ids = enqueue_outcomes(app)
    work = launcher.start("--log-level", "warning")

    output = run_until_settled(engine, work, ids)

    levels = {TEXT_LINE.match(line).group(1) for line in output.splitlines()}  # type: ignore[union-attr]
    assert levels == {"WARNING"}
    failed = [line for line in output.splitlines() if "SolidQ Job failed" in line]
    assert len(failed) == 2

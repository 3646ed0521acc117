"""The log subscriber: one line per signal, at the right level, never with arguments, with
its fields as ``extra=`` too, and nothing built when the level is off. (The lines of the jobs
a worker performs: tests/processes/test_worker_logging.py.)"""

from __future__ import annotations

import datetime as dt
import logging
import typing as t

import blinker
import pytest

from flask_solidq import CoalesceStatus
from flask_solidq import signals
from flask_solidq.definitions.batches import Batch
from flask_solidq.logging import fields as log_fields
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.logging.events import LogEvent
from tests.jobs import basic as jobs

LOGGER = "flask_solidq"


class Boom(Exception):
    pass


class Untouchable:
    """A job whose every attribute raises: a receiver that formats it fails the test."""

    def __getattr__(self, name: str) -> t.Any:
        raise AssertionError(f"the receiver read job.{name} with the level off")


@pytest.fixture(autouse=True)
def subscriber() -> t.Iterator[None]:
    log_subscriber.connect()
    yield
    log_subscriber.disconnect()


def messages(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(record.levelno, record.getMessage()) for record in caplog.records]


def test_connect_subscribes_to_every_signal():
    named = [value for value in vars(signals).values() if isinstance(value, blinker.NamedSignal)]

    assert len(named) >= 14
    assert all(signal.receivers for signal in named)


def test_an_enqueue_logs_the_job_name_ids_and_queue_at_debug(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    job = jobs.store_result.new("secret argument")
    job.provider_job_id = 41

    signals.enqueue.send(type(job), job=job)

    assert messages(caplog) == [
        (
            logging.DEBUG,
            f'SolidQ Enqueue job_name: "store_result", job_id: 41, active_job_id: "{job.job_id}",'
            ' queue: "default", attempt: 0',
        )
    ]
    (record,) = caplog.records
    assert (record.event, record.job_name, record.job_id, record.active_job_id) == (
        "enqueue",
        "store_result",
        41,
        job.job_id,
    )
    assert "secret" not in caplog.text


def test_a_perform_start_logs_the_attempt_at_info(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    job = jobs.store_result.new("secret argument")
    job.provider_job_id = 8
    job.executions = 2

    signals.perform_start.send(type(job), job=job)

    ((level, message),) = messages(caplog)
    assert level == logging.INFO
    assert message.startswith('SolidQ Job started job_name: "store_result", job_id: 8,')
    assert message.endswith('queue: "default", attempt: 2')
    assert caplog.records[0].event == "job_started"
    assert caplog.records[0].attempt == 2
    assert "secret" not in caplog.text


def test_a_retry_names_the_error_class_and_the_wait(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    job = jobs.StoreResultJob.new(1)

    signals.retry.send(type(job), job=job, error=Boom("with private detail"), wait=3.0)

    ((level, message),) = messages(caplog)
    assert level == logging.DEBUG
    assert message.startswith('SolidQ Retry job_name: "StoreResultJob"')
    assert message.endswith(f'attempt: 0, error_class: "{__name__}.Boom", wait: 3.0')
    assert "private detail" not in message


def test_a_failure_signal_logs_at_debug_even_without_a_loaded_job(caplog):
    # DEBUG: the worker's "Job failed" line is the WARNING, with the error's message.
    caplog.set_level(logging.DEBUG, logger=LOGGER)

    signals.fail.send(None, job=None, error=ValueError("x"), provider_job_id=9)

    assert messages(caplog) == [(logging.DEBUG, 'SolidQ Fail job_id: 9, error_class: "ValueError"')]


def test_a_dropped_collected_call_logs_at_warning(caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)

    signals.drop_coalesced_call.send(
        None,
        call_id=3,
        job_id=7,
        active_job_id="a-b",
        class_name="digest",
        exception_class="DeserializationError",
    )

    assert messages(caplog) == [
        (
            logging.WARNING,
            'SolidQ Drop coalesced call call_id: 3, job_id: 7, active_job_id: "a-b",'
            ' class_name: "digest", exception_class: "DeserializationError"',
        )
    ]


def test_events_without_a_job_log_their_plain_fields(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)

    signals.coalesce.send(
        None,
        status=CoalesceStatus.CREATED,
        key="digest/1",
        job_id=5,
        active_job_id="u",
        class_name="digest",
    )
    signals.defer_rate_limited.send(
        None, class_name="sync", keys=["Api/global"], job_ids=[1, 2], size=2
    )
    signals.release_blocked.send(None, job_id=4, concurrency_key="account/1", released=True)

    assert [message for _, message in messages(caplog)] == [
        # Never the coalesce key: the app builds it, possibly from personal data.
        'SolidQ Coalesce status: "created", job_id: 5, active_job_id: "u", class_name: "digest"',
        'SolidQ Defer rate-limited jobs class_name: "sync", keys: ["Api/global"],'
        " job_ids: [1, 2], size: 2",
        'SolidQ Release blocked job_id: 4, concurrency_key: "account/1", released: True',
    ]


def test_connecting_twice_logs_each_event_once(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    log_subscriber.connect()

    signals.perform_start.send(None, job=jobs.store_result.new(1))

    assert len(caplog.records) == 1


def test_connect_takes_another_logger(caplog):
    caplog.set_level(logging.DEBUG, logger="my.jobs")
    log_subscriber.connect(logging.getLogger("my.jobs"))

    signals.perform.send(None, job=jobs.store_result.new(1))

    assert [record.name for record in caplog.records] == ["my.jobs"]


def test_after_disconnect_nothing_is_logged(caplog):
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    log_subscriber.disconnect()

    signals.discard.send(None, job=jobs.store_result.new(1), error=Boom())

    assert caplog.records == []
    assert not signals.discard.receivers


def test_with_debug_off_receivers_build_nothing(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    job = Untouchable()

    for signal in (signals.enqueue, signals.perform):
        signal.send(None, job=job)
    signals.retry.send(None, job=job, error=Boom(), wait=1)
    signals.release_blocked.send(None, job_id=1, concurrency_key="k", released=False)

    assert caplog.records == []


def test_a_finished_batch_logs_its_status_counts_and_duration_at_info(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    batch = Batch(
        id=7,
        total_jobs=1000,
        completed_jobs=998,
        failed_jobs=2,
        pending_jobs=0,
        metadata={"secret": "s3cr3t"},
        callbacks={},
        created_at=start,
        enqueued_at=start,
        finished_at=start + dt.timedelta(seconds=41.25),
        failed_at=start + dt.timedelta(seconds=41.25),
    )

    signals.batch_finish.send(None, batch=batch, status=batch.status)

    assert messages(caplog) == [
        (
            logging.INFO,
            'SolidQ Batch finished batch_id: 7, status: "failed", total_jobs: 1000,'
            " completed_jobs: 998, failed_jobs: 2, duration: 41.25",
        )
    ]
    assert caplog.records[0].event == "batch_finish"
    assert "s3cr3t" not in caplog.text


def test_a_line_s_record_is_the_one_logger_log_would_make(caplog):
    """:func:`log` skips ``logger.log``'s search of the stack: the record still names the
    subscriber's ``log`` as where it was logged, carries the fields as ``extra=`` and is
    handled by the logger's handlers and filters."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    logger = logging.getLogger(LOGGER)
    seen: list[logging.LogRecord] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    logger.addFilter(keep)
    try:
        fields = {"job_id": 3, "queue": "a, b", "wait": 1.5, "ok": True, "attempt": None}
        log_subscriber.log(logger, logging.INFO, LogEvent.RETRY, "Retry", fields)
    finally:
        logger.removeFilter(keep)

    (record,) = caplog.records
    assert seen == [record]
    assert record.getMessage() == (
        'SolidQ Retry job_id: 3, queue: "a, b", wait: 1.5, ok: True, attempt: None'
    )
    assert (record.msg, record.args) == ("SolidQ %s %s", ("Retry", record.args[1]))
    assert record.pathname == log_subscriber.__file__
    assert record.funcName == "log"
    assert record.module == "subscriber"
    assert record.event == "retry"
    assert (record.job_id, record.queue, record.wait, record.attempt) == (3, "a, b", 1.5, None)


def test_a_logger_adapter_logs_through_its_own_log(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    adapter = logging.LoggerAdapter(logging.getLogger(LOGGER), {"tenant": "t1"})

    log_subscriber.log(
        adapter,  # type: ignore[arg-type]
        logging.INFO,
        LogEvent.RETRY,
        "Retry",
        {"job_id": 3},
    )

    (record,) = caplog.records
    assert record.getMessage() == "SolidQ Retry job_id: 3"
    assert record.tenant == "t1"  # the adapter's extra (before Python 3.13, in place of ours)


def test_a_line_is_not_made_below_the_logger_s_level(caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER)
    logger = logging.getLogger(LOGGER)

    log_subscriber.log(logger, logging.INFO, LogEvent.RETRY, "Retry", {"a": 1})

    assert caplog.records == []


def test_values_format_by_kind_with_subclasses_and_lists_as_before():
    class Kind(str):
        pass

    fields = {
        "text": 'say "hi", ünïcode',
        "subclass": Kind("x"),
        "number": 7,
        "flag": False,
        "ratio": 0.25,
        "none": None,
        "ids": [1, "two"],
        "keys": ("k",),
    }

    assert log_fields.format_fields(fields) == (
        'text: "say \\"hi\\", ünïcode", subclass: "x", number: 7, flag: False, ratio: 0.25,'
        ' none: None, ids: [1, "two"], keys: ["k"]'
    )

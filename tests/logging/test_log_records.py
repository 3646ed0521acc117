"""The records of the subscriber's lines (flask_solidq.logging.records): the record
``Logger.makeRecord`` makes, attribute for attribute and in its order, and the app's own
record factory, logger class or ``makeRecord`` still making them when it has one."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import typing as t

import pytest

from flask_solidq.logging import records
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.logging.events import LogEvent

PATH = log_subscriber.__file__
ARGS = ("Job started", 'job_name: "a", job_id: 3')
EXTRA = {"event": "job_started", "job_name": "a", "job_id": 3, "queue": "q", "attempt": 1}
#: What a record's clock sets: the only attributes two records made one after the other
#: may differ in.
CLOCK = {"created", "msecs", "relativeCreated"}


@pytest.fixture
def logger() -> logging.Logger:
    return logging.getLogger("flask_solidq.test_records")


def standard(logger: logging.Logger, extra: dict[str, t.Any] = EXTRA) -> logging.LogRecord:
    return logger.makeRecord(
        logger.name, logging.INFO, PATH, 150, "SolidQ %s %s", ARGS, None, "log", extra
    )


def made(logger: logging.Logger, extra: dict[str, t.Any] = EXTRA) -> logging.LogRecord:
    return records.make_record(logger, logging.INFO, PATH, 150, "SolidQ %s %s", ARGS, "log", extra)


def without_clock(record: logging.LogRecord) -> list[tuple[str, t.Any]]:
    return [(key, value) for key, value in vars(record).items() if key not in CLOCK]


def test_the_record_is_make_record_s_attribute_for_attribute_in_its_order(logger):
    expected, record = standard(logger), made(logger)

    assert type(record) is logging.LogRecord
    assert without_clock(record) == without_clock(expected)
    assert list(vars(record)) == list(vars(expected))
    assert record.getMessage() == expected.getMessage()
    assert (record.filename, record.module) == ("subscriber.py", "subscriber")


@pytest.mark.parametrize("fraction_ns", [0, 123_456_789, 999_500_000, 999_999_999])
def test_its_clock_fields_are_log_record_s_at_the_same_time(logger, monkeypatch, fraction_ns):
    """Both read the clock as ``LogRecord`` does (``time.time``, or from Python 3.13
    ``time.time_ns``): at one frozen time the two records are equal, clock fields too, at
    the edges of a second as well."""
    ns = 1_700_000_000 * 10**9 + fraction_ns
    monkeypatch.setattr(time, "time", lambda: ns / 1e9)
    monkeypatch.setattr(time, "time_ns", lambda: ns)

    assert vars(made(logger)) == vars(standard(logger))


def test_each_thread_s_record_names_that_thread(logger):
    seen: list[logging.LogRecord] = []
    thread = threading.Thread(target=lambda: seen.append(made(logger)), name="records-thread")
    thread.start()
    thread.join()

    (record,) = seen
    assert (record.thread, record.threadName) == (thread.ident, "records-thread")


def test_a_renamed_thread_s_next_record_has_its_new_name(logger):
    current = threading.current_thread()
    name = current.name
    current.name = "renamed-for-the-test"
    try:
        record = made(logger)
    finally:
        current.name = name

    assert record.threadName == "renamed-for-the-test"


def test_an_asyncio_task_s_record_names_the_task_as_log_record_does(logger):
    async def log_in_a_task() -> tuple[logging.LogRecord, logging.LogRecord]:
        return made(logger), standard(logger)

    record, expected = asyncio.run(log_in_a_task())

    assert without_clock(record) == without_clock(expected)


def test_an_extra_field_the_record_has_raises_make_record_s_key_error(logger):
    for key in ("levelname", "message", "asctime"):
        with pytest.raises(KeyError, match=f"Attempt to overwrite '{key}' in LogRecord"):
            made(logger, {"event": "x", key: "y"})


def test_a_record_factory_of_the_app_s_makes_the_records(logger):
    base = logging.getLogRecordFactory()
    made_by_factory: list[logging.LogRecord] = []

    def factory(*args: t.Any, **kwargs: t.Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        record.tenant = "t1"
        made_by_factory.append(record)
        return record

    logging.setLogRecordFactory(factory)
    try:
        record = made(logger)
        with pytest.raises(KeyError, match="'tenant'"):
            made(logger, {"tenant": "t2"})  # as makeRecord: the factory's field stays
    finally:
        logging.setLogRecordFactory(base)

    assert made_by_factory[0] is record
    assert (record.tenant, record.job_id, record.event) == ("t1", 3, "job_started")
    without_tenant = [item for item in without_clock(record) if item[0] != "tenant"]
    assert without_tenant == without_clock(standard(logger))


class MarkingLogger(logging.Logger):
    def makeRecord(self, *args: t.Any, **kwargs: t.Any) -> logging.LogRecord:
        record = super().makeRecord(*args, **kwargs)
        record.marked = True
        return record


def test_a_logger_class_with_its_own_make_record_makes_the_records():
    logger = MarkingLogger("flask_solidq.test_records.marking")

    record = made(logger)

    assert record.marked is True
    assert record.job_id == 3


def test_a_logger_subclass_without_its_own_make_record_gets_the_standard_record():
    logger = type("PlainSubclass", (logging.Logger,), {})("flask_solidq.test_records.sub")

    assert without_clock(made(logger)) == without_clock(standard(logger))


def test_a_make_record_set_on_the_logger_itself_makes_the_records(logger, monkeypatch):
    calls: list[tuple[t.Any, ...]] = []
    original = logger.makeRecord

    def make(*args: t.Any) -> logging.LogRecord:
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(logger, "makeRecord", make)

    record = made(logger)

    assert len(calls) == 1
    assert record.job_id == 3


def test_with_logging_s_switches_off_the_record_is_log_record_s(logger, monkeypatch):
    monkeypatch.setattr(logging, "logThreads", False)
    monkeypatch.setattr(logging, "logProcesses", False)

    record = made(logger)

    assert (record.thread, record.threadName, record.process) == (None, None, None)
    assert without_clock(record) == without_clock(standard(logger))


def test_the_subscriber_s_lines_reach_a_custom_factory_and_logger_class(caplog):
    base = logging.getLogRecordFactory()
    seen: list[str] = []

    def factory(*args: t.Any, **kwargs: t.Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        seen.append(record.getMessage())
        return record

    caplog.set_level(logging.INFO, logger="flask_solidq")
    logging.setLogRecordFactory(factory)
    try:
        log_subscriber.log(
            logging.getLogger("flask_solidq"),
            logging.INFO,
            LogEvent.RETRY,
            "Retry",
            {"job_id": 3},
        )
    finally:
        logging.setLogRecordFactory(base)

    assert seen == ["SolidQ Retry job_id: 3"]
    assert caplog.records[0].job_id == 3

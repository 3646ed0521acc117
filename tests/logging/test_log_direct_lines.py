"""The subscriber's lines written straight to ``flask solidq work``'s text handler
(flask_solidq.logging.subscriber.log with formats.sole_line_handler): the same bytes the
handler writes of a record, and the record made and handled as before as soon as anything
else could see it: a handler on the way, a filter, another format, a level."""

from __future__ import annotations

import json
import logging
import os
import time
import types
import typing as t

import pytest

from flask_solidq.logging import formats
from flask_solidq.logging import line_writer
from flask_solidq.logging import records
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.logging.events import LogEvent

LOGGER = "flask_solidq"
EVENT = LogEvent
#: A job's lines as a worker logs them: started, finished, and a failure with a message that
#: needs quoting and characters an ASCII stream can't take.
JOB_LINES: list[tuple[int, LogEvent, str, dict[str, t.Any]]] = [
    (
        logging.INFO,
        EVENT.JOB_STARTED,
        "Job started",
        {"job_name": "noop", "job_id": 7, "active_job_id": "a1", "queue": "q", "attempt": 1},
    ),
    (
        logging.INFO,
        EVENT.JOB_FINISHED,
        "Job finished",
        {"job_name": "noop", "job_id": 7, "queue": "q", "attempt": 1, "duration": 0.0012},
    ),
    (
        logging.WARNING,
        EVENT.JOB_FAILED,
        "Job failed",
        {"job_id": 7, "error_class": "KeyError", "error_message": 'no "clé" %s, ünï ✓'},
    ),
]


class Recording(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Chain(t.NamedTuple):
    logger: logging.Logger
    handler: formats._StderrHandler
    read: int

    def log_job(self, logger: logging.Logger | None = None) -> bytes:
        """Log a job's lines (to ``logger``, by default the chain's) and read what the
        handler wrote of them."""
        for level, event, title, fields in JOB_LINES:
            log_subscriber.log(logger or self.logger, level, event, title, dict(fields))
        self.handler.flush()
        data = b""
        while True:
            try:
                data += os.read(self.read, 65536)
            except BlockingIOError:
                return data


@pytest.fixture
def chain() -> t.Iterator[Chain]:
    """A ``flask_solidq`` logger with only ``flask solidq work``'s text handler on its way to
    a root logger without handlers, its writer on a pipe: loggers of a manager of their own,
    since pytest puts its handlers on the root logger of ``logging``'s while a test runs."""
    root = logging.RootLogger(logging.WARNING)
    manager = logging.Manager(root)
    root.manager = manager  # as logging sets Logger.manager for its own
    logger = manager.getLogger(LOGGER)
    assert type(logger) is logging.Logger and logger.parent is root
    logger.setLevel(logging.INFO)
    read, write = os.pipe()
    os.set_blocking(read, False)
    handler = formats._StderrHandler()
    handler.stream = types.SimpleNamespace(encoding="utf-8")
    handler.writer = line_writer.LineWriter(write)
    handler.setFormatter(formats.TextFormatter())
    logger.addHandler(handler)
    try:
        yield Chain(logger, handler, read)
    finally:
        handler.close()
        for descriptor in (read, write):
            try:
                os.close(descriptor)
            except OSError:  # closed by the test
                pass


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock stopped at a time with milliseconds, as records and the direct path read
    it (``time.time``, or from Python 3.13 ``time.time_ns``)."""
    ns = 1_700_000_000 * 10**9 + 987_654_321
    monkeypatch.setattr(time, "time_ns", lambda: ns)
    monkeypatch.setattr(time, "time", lambda: ns / 1e9)


def no_record(*args: object) -> t.NoReturn:
    raise AssertionError("a record was made")


def passes(record: logging.LogRecord) -> bool:
    return True


@pytest.mark.parametrize("encoding", [None, "utf-8", "ascii"])
def test_a_job_s_lines_are_the_bytes_the_handler_writes_of_their_records(
    chain, frozen, monkeypatch, encoding
):
    chain.handler.stream.encoding = encoding
    assert formats.sole_line_handler(chain.logger, logging.INFO) is chain.handler

    with monkeypatch.context() as patched:
        patched.setattr(records, "make_record", no_record)
        direct = chain.log_job()
    chain.handler.addFilter(passes)  # the record made and handled, as before the direct path
    assert formats.sole_line_handler(chain.logger, logging.INFO) is None
    standard = chain.log_job()

    assert direct == standard
    lines = direct.splitlines()
    moment = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_000)).encode()
    assert lines[0] == (
        moment + b",987 INFO SolidQ Job started "
        b'job_name: "noop", job_id: 7, active_job_id: "a1", queue: "q", attempt: 1'
    )
    assert lines[2].startswith(moment + b",987 WARNING SolidQ Job failed job_id: 7, ")
    if encoding == "ascii":
        assert lines[2].endswith(b'"no \\"cl\\xe9\\" %s, \\xfcn\\xef \\u2713"')
    else:
        assert lines[2].endswith('"no \\"clé\\" %s, ünï ✓"'.encode())


@pytest.mark.parametrize("where", ["root", "flask_solidq", "child"])
def test_a_handler_added_anywhere_on_the_way_gets_the_records(chain, where):
    chain.log_job()  # direct first: nothing remembered that the new handler would miss
    child = chain.logger.manager.getLogger(f"{LOGGER}.worker")
    target = {"root": chain.logger.parent, "flask_solidq": chain.logger, "child": child}[where]
    recording = Recording()
    target.addHandler(recording)
    try:
        written = chain.log_job(child if where == "child" else None)
    finally:
        target.removeHandler(recording)

    assert [record.getMessage().split(" ", 3)[2] for record in recording.records] == [
        "started",
        "finished",
        "failed",
    ]
    assert (recording.records[0].event, recording.records[0].job_id) == ("job_started", 7)
    assert written.count(b"\n") == 3  # and our handler still wrote each line once


def test_a_filter_on_the_logger_or_the_handler_sees_the_records(chain):
    seen: list[logging.LogRecord] = []

    def drop_started(record: logging.LogRecord) -> bool:
        seen.append(record)
        return t.cast(str, record.event) != "job_started"

    chain.logger.addFilter(drop_started)
    written = chain.log_job()
    chain.logger.removeFilter(drop_started)
    assert [record.event for record in seen] == ["job_started", "job_finished", "job_failed"]
    assert b"Job started" not in written and written.count(b"\n") == 2

    seen.clear()
    chain.handler.addFilter(drop_started)
    written = chain.log_job()
    assert [record.funcName for record in seen] == ["log", "log", "log"]
    assert b"Job started" not in written and written.count(b"\n") == 2


@pytest.mark.parametrize("method", ["callHandlers", "handle"])
def test_a_logger_class_patched_as_sentry_patches_it_sees_the_records(chain, monkeypatch, method):
    """Sentry's logging integration replaces ``Logger.callHandlers`` on the class to make
    breadcrumbs and events of records: the job lines must reach it as records."""
    seen: list[logging.LogRecord] = []
    standard = getattr(logging.Logger, method)

    def patched(self: logging.Logger, record: logging.LogRecord) -> t.Any:
        seen.append(record)
        return standard(self, record)

    monkeypatch.setattr(logging.Logger, method, patched)
    assert formats.sole_line_handler(chain.logger, logging.INFO) is None
    written = chain.log_job()
    assert [record.event for record in seen] == ["job_started", "job_finished", "job_failed"]
    assert written.count(b"\n") == 3  # and the handler still wrote each line

    monkeypatch.undo()
    assert formats.sole_line_handler(chain.logger, logging.INFO) is chain.handler


def test_a_json_format_writes_json_lines(chain):
    chain.handler.setFormatter(formats.JsonFormatter())

    lines = chain.log_job().splitlines()

    first = json.loads(lines[0])
    assert (first["event"], first["job_id"], first["level"]) == ("job_started", 7, "INFO")
    assert len(lines) == 3


def test_a_level_above_the_line_s_writes_nothing_and_a_level_back_writes_it(chain):
    chain.handler.setLevel(logging.WARNING)
    assert formats.sole_line_handler(chain.logger, logging.INFO) is None
    assert chain.log_job().count(b"\n") == 1

    chain.handler.setLevel(logging.NOTSET)
    chain.logger.setLevel(logging.ERROR)
    assert chain.log_job() == b""

    chain.logger.setLevel(logging.INFO)
    assert chain.log_job().count(b"\n") == 3


def test_a_disabled_logger_writes_nothing_and_one_not_propagating_has_no_handler(chain):
    child = chain.logger.manager.getLogger(f"{LOGGER}.worker")
    child.disabled = True
    try:
        assert chain.log_job(child) == b""
    finally:
        child.disabled = False
    child.propagate = False
    try:
        assert formats.sole_line_handler(child, logging.INFO) is None
    finally:
        child.propagate = True
    assert formats.sole_line_handler(child, logging.INFO) is chain.handler


def test_a_formatter_changed_on_the_instance_formats_the_records(chain):
    formatter = t.cast(formats.TextFormatter, chain.handler.formatter)
    formatter.formatTime = lambda record, datefmt=None: "then"  # type: ignore[method-assign]
    try:
        assert chain.log_job().startswith(b"then INFO SolidQ Job started")
    finally:
        del formatter.formatTime
    formatter.format = lambda record: "formatted"  # type: ignore[method-assign]
    try:
        assert chain.log_job().splitlines()[0] == b"formatted"
    finally:
        del formatter.format
    assert formats.sole_line_handler(chain.logger, logging.INFO) is chain.handler


def test_a_failed_write_is_reported_as_the_handler_reports_it(chain, monkeypatch):
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(chain.handler, "handleError", reported.append)
    os.close(chain.read)  # a WARNING line is written at once: to a pipe without a reader
    chain.handler.writer.descriptor = os.open(os.devnull, os.O_RDONLY)

    log_subscriber.log(chain.logger, *JOB_LINES[2][:3], dict(JOB_LINES[2][3]))

    (record,) = reported
    assert (record.event, record.funcName) == ("job_failed", "log")


def test_a_record_factory_or_make_record_of_the_app_s_makes_the_records(chain, monkeypatch):
    made: list[str] = []

    def factory(*args: t.Any, **kwargs: t.Any) -> logging.LogRecord:
        record = logging.LogRecord(*args, **kwargs)
        record.levelname = "NOTE"
        made.append(record.getMessage())
        return record

    monkeypatch.setattr(logging, "_logRecordFactory", factory)
    assert chain.log_job().splitlines()[0].split(b" ")[2] == b"NOTE"
    monkeypatch.undo()
    assert len(made) == 3

    standard = chain.logger.makeRecord

    def make_record(*args: t.Any, **kwargs: t.Any) -> logging.LogRecord:
        record = standard(*args, **kwargs)
        record.msg, record.args = "made", ()
        return record

    chain.logger.makeRecord = make_record  # type: ignore[method-assign]
    assert chain.log_job().splitlines()[0].endswith(b" INFO made")

"""How ``flask solidq work`` writes its log: the level its ``--log-level`` chooses, and the
format its ``--log-format`` does: text lines, or one JSON object per line.

A JSON line has the record's ``time``, ``level``, ``logger`` and ``message``, then every field
the record carries as ``extra=`` (flask-solidq's records carry ``event``, ``job_name``,
``job_id``, ``active_job_id``, ``queue``, ``attempt``, ``duration``... see
:mod:`flask_solidq.logging.subscriber`), so a log pipeline can filter on them without parsing
the message. flask-solidq never puts a job's arguments or keys in a record.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import time
import typing as t

from flask_solidq.logging import line_writer

#: The text format: what ``flask solidq work`` has always written.
TEXT_FORMAT = "%(asctime)s %(levelname)s %(message)s"


class LogFormat(str, enum.Enum):
    """The formats ``flask solidq work --log-format`` writes."""

    TEXT = "text"
    JSON = "json"


class LogLevel(str, enum.Enum):
    """The levels ``flask solidq work --log-level`` takes."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"

    @property
    def number(self) -> int:
        return int(logging.getLevelName(self.value))


#: The attributes every log record has: anything else on a record came from ``extra=``.
_RECORD_ATTRIBUTES = frozenset(
    {*vars(logging.LogRecord("", logging.INFO, "", 0, "", (), None)), "message", "asctime"}
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in values are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "time": _utc_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update(extra_fields(record))
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return json.dumps(data, ensure_ascii=False, default=str)


def extra_fields(record: logging.LogRecord) -> dict[str, object]:
    """The fields ``record`` was given as ``extra=``, in the order they were given."""
    return {
        key: value
        for key, value in vars(record).items()
        if key not in _RECORD_ATTRIBUTES and not key.startswith("_")
    }


def _utc_time(created: float) -> str:
    moment = dt.datetime.fromtimestamp(created, dt.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """:data:`TEXT_FORMAT` lines, each second's date and time formatted once.

    ``logging.Formatter`` turns every record's time into a date and time string again (a
    ``localtime`` and a ``strftime`` call): for a worker logging thousands of lines a second,
    a tenth of what a line costs, for the same string.
    """

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        """What ``logging.Formatter.format`` makes of :data:`TEXT_FORMAT`, in one f-string
        when the record has no traceback or stack to append (the job lines never do): the
        general path looks the fields up in the record's ``__dict__`` through ``%``-style
        formatting, and checks whether the format uses the time, for each line."""
        if record.exc_info or record.exc_text or record.stack_info:
            return super().format(record)
        record.message = record.getMessage()
        record.asctime = self.formatTime(record)
        return f"{record.asctime} {record.levelname} {record.message}"

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.time_text(record.created, record.msecs)

    def time_text(self, created: float, msecs: float) -> str:
        """The ``asctime`` of a record with these clock fields."""
        second, text = self._second  # one tuple: threads never see half an update
        if second != int(created):
            text = time.strftime(self.default_time_format, self.converter(created))
            self._second = (int(created), text)
        if self.default_msec_format is None:  # as logging.Formatter: no milliseconds then
            return text
        return self.default_msec_format % (text, msecs)


def formatter(log_format: LogFormat) -> logging.Formatter:
    """The formatter of ``log_format``."""
    if log_format is LogFormat.JSON:
        return JsonFormatter()
    return TextFormatter()


def configure(
    logger: logging.Logger, *, level: LogLevel | None, log_format: LogFormat | None
) -> None:
    """Set up ``logger`` (``flask_solidq``'s) for ``flask solidq work``.

    Without a format, lines go to stderr as text only when the app set up no handler that
    would write them, as before these options existed. With one, the command writes the
    logger's lines to stderr itself, in that format, and stops them propagating to the app's
    handlers, so each line is written once, in the format asked for. Without a level, the
    logger logs INFO and above unless the app set its level.

    Set up before the supervisor forks: each forked process inherits it.
    """
    if log_format is not None:
        _write_to_stderr(logger, log_format)
        logger.propagate = False
    elif not logger.hasHandlers():
        _write_to_stderr(logger, LogFormat.TEXT)
    if level is not None:
        logger.setLevel(level.number)
    elif logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


if t.TYPE_CHECKING:
    _StreamHandler = logging.StreamHandler[t.TextIO]
else:  # not subscriptable at run time before Python 3.11
    _StreamHandler = logging.StreamHandler


class _StderrHandler(_StreamHandler):
    """The handler :func:`configure` adds (a class of its own, so configuring again replaces
    it instead of adding a second one). It formats a record where it is logged and hands the
    line to a :class:`~flask_solidq.logging.line_writer.LineWriter` on stderr's descriptor,
    which writes the lines of a few milliseconds with one call, and those at WARNING and above
    at once (see :mod:`flask_solidq.logging.line_writer` for why: written one by one, the job
    lines of a worker's threads cost it as much CPU as the rest of the jobs).

    When stderr has no descriptor (a test runner's capture, say), the handler is an ordinary
    :class:`logging.StreamHandler` writing to the stream under its lock.
    """

    def __init__(self) -> None:
        super().__init__()
        descriptor = _descriptor(self.stream)
        self.writer = None if descriptor is None else line_writer.LineWriter(descriptor)

    def handle(self, record: logging.LogRecord) -> bool:
        if self.writer is None:
            return super().handle(record)
        # Without filters, ``filter`` passes every record: not asked (a call a line).
        passed = self.filter(record) if self.filters else True
        if isinstance(passed, logging.LogRecord):  # Python 3.12+: a filter may replace it
            record = passed
        if passed:
            try:
                formatter = self.formatter  # what self.format calls, called directly
                text = self.format(record) if formatter is None else formatter.format(record)
                self.write_text(text, record.levelno)
            except Exception:  # noqa: BLE001 - as logging does: report, never raise
                self.handleError(record)
        return passed

    def write_text(self, text: str, level: int) -> None:
        """Hand ``text``, a formatted line of ``level``, to the writer: encoded as the stream
        would encode it, written before returning from WARNING up."""
        line = (text + self.terminator).encode(
            getattr(self.stream, "encoding", None) or "utf-8", "backslashreplace"
        )
        writer = self.writer
        if writer is None:  # without a descriptor, handle writes through the stream
            raise RuntimeError("This handler has no descriptor to write lines to.")
        writer.write(line, now=level >= logging.WARNING)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()
        super().flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        super().close()


#: What, set on a logger, handler or formatter itself, would change what it does with a record.
_OWN_METHODS = frozenset(
    {"makeRecord", "handle", "callHandlers", "emit", "filter", "format", "formatTime", "time_text"}
)
#: ``Logger``'s own ``handle`` and ``callHandlers``: a library that patches the class (Sentry's
#: logging integration replaces ``Logger.callHandlers`` to turn records into breadcrumbs and
#: events) sees every record, which only the standard path gives it.
_LOGGER_HANDLE = logging.Logger.handle
_LOGGER_CALL_HANDLERS = logging.Logger.callHandlers


def sole_line_handler(logger: logging.Logger, level: int) -> _StderrHandler | None:
    """The handler that alone would write a record of ``level`` that ``logger`` logs, when
    :func:`write_line` writes the line it would write: a :class:`_StderrHandler` with its
    writer and a :class:`TextFormatter`, no filter on it or on a logger on the way, and no
    other handler on the way (an app's, pytest's ``caplog``). None otherwise.

    Asked for each line, as ``Logger.callHandlers`` walks the loggers for each record: an
    app changes handlers and filters by changing plain lists, which no cache would notice.
    The caller checked that ``logger`` is a ``logging.Logger`` enabled for ``level``. A
    ``Logger`` class whose ``handle`` or ``callHandlers`` was replaced (Sentry's logging
    integration does) has no sole handler: the replacement must see the record.
    """
    if (
        logger.disabled
        or logging.Logger.callHandlers is not _LOGGER_CALL_HANDLERS
        or logging.Logger.handle is not _LOGGER_HANDLE
        or not _OWN_METHODS.isdisjoint(vars(logger))
    ):
        return None
    found = None
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        for handler in current.handlers:
            if found is not None:
                return None
            found = handler
        current = current.parent if current.propagate else None
    if (
        type(found) is not _StderrHandler
        or found.writer is None
        or found.filters
        or level < found.level
        or type(found.formatter) is not TextFormatter
        or not _OWN_METHODS.isdisjoint(vars(found))
        or not _OWN_METHODS.isdisjoint(vars(found.formatter))
    ):
        return None
    return found


def write_line(
    handler: _StderrHandler, level: int, message: str, created: float, msecs: float
) -> None:
    """Write the line ``handler`` would write for a record of ``level`` with this message
    and these clock fields (:func:`sole_line_handler`'s handler), without the record."""
    formatter = handler.formatter
    if type(formatter) is not TextFormatter:  # sole_line_handler's handlers have one
        raise TypeError(f"write_line needs a TextFormatter, not {formatter!r}.")
    text = f"{formatter.time_text(created, msecs)} {logging.getLevelName(level)} {message}"
    handler.write_text(text, level)


def _descriptor(stream: object) -> int | None:
    """``stream``'s file descriptor, or None when it has none."""
    fileno = getattr(stream, "fileno", None)
    if fileno is None:
        return None
    try:
        return int(fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None


def _write_to_stderr(logger: logging.Logger, log_format: LogFormat) -> None:
    for handler in list(logger.handlers):
        if isinstance(handler, _StderrHandler):
            logger.removeHandler(handler)
            handler.close()  # writes its pending lines
    handler = _StderrHandler()
    handler.setFormatter(formatter(log_format))
    logger.addHandler(handler)

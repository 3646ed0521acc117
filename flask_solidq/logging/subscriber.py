"""The log subscriber: flask-solidq's log lines about jobs, as Solid Queue's log subscriber
writes one per notification.

Lines read ``SolidQ <Event> key: value, ...`` and name the job, never its arguments or keys
(:mod:`.fields`). The same fields ride on each record as ``extra=`` with an ``event``
(:class:`~flask_solidq.logging.events.LogEvent`), so structured loggers get them without
parsing the message.

:func:`connect` connects a receiver to each signal for the line :mod:`.signal_lines` gives it.
The worker logs the end of each run itself (:func:`log_performed`): finished, retried with
when it runs again, discarded or deferred, with its duration, at INFO; a failed run at
WARNING, with its error's class and message.

Signals are sent in the thread doing the work, so each receiver first asks the logger whether
the line would be written at all and, when not, returns before building anything.
"""

from __future__ import annotations

import logging
import sys
import typing as t

from flask_solidq import signals
from flask_solidq.logging import formats
from flask_solidq.logging import records
from flask_solidq.logging.events import LogEvent
from flask_solidq.logging.fields import LogFields
from flask_solidq.logging.fields import count_of
from flask_solidq.logging.fields import format_fields
from flask_solidq.logging.fields import list_jobs
from flask_solidq.logging.fields import outcome_fields
from flask_solidq.logging.signal_lines import SIGNAL_LINES
from flask_solidq.logging.signal_lines import SignalLine
from flask_solidq.operations.outcomes import OutcomeKind

if t.TYPE_CHECKING:
    from blinker import NamedSignal

    from flask_solidq.operations.outcomes import Outcome
    from flask_solidq.values import JobRef

#: The logger lines go to unless :func:`connect` is given another.
LOGGER_NAME = "flask_solidq"

Receiver = t.Callable[..., None]

_connected: dict[str, logging.Logger] = {}

#: The event and title of each kind of end of a run, by the kind's value (an enum's own
#: hash is a Python call, a string's isn't).
_OUTCOME_LINES = {
    kind.value: (event, f"Job {kind.value}")
    for kind, event in (
        (OutcomeKind.FINISHED, LogEvent.JOB_FINISHED),
        (OutcomeKind.RETRIED, LogEvent.JOB_RETRIED),
        (OutcomeKind.DISCARDED, LogEvent.JOB_DISCARDED),
        (OutcomeKind.FAILED, LogEvent.JOB_FAILED),
        (OutcomeKind.INTERRUPTED, LogEvent.JOB_INTERRUPTED),
        (OutcomeKind.DEFERRED, LogEvent.JOB_DEFERRED),
    )
}


def connect(logger: logging.Logger | None = None) -> None:
    """Log every flask-solidq signal, and the jobs workers perform, to ``logger`` (the
    ``flask_solidq`` logger by default).

    Connecting again only changes the logger: each event still logs once.
    """
    _connected["logger"] = logger or logging.getLogger(LOGGER_NAME)
    for signal, receiver in _RECEIVERS:
        signals.declare_plain(receiver)  # module constants: sent without blinker's check
        signal.connect(receiver, weak=False)


def disconnect() -> None:
    """Stop logging. Doing it when not connected does nothing."""
    for signal, receiver in _RECEIVERS:
        signal.disconnect(receiver)
    _connected.pop("logger", None)


def _logger_for(level: int) -> logging.Logger | None:
    """The connected logger, when it would write a line at ``level``."""
    logger = _connected.get("logger")
    if logger is None or not logger.isEnabledFor(level):
        return None
    return logger


def log(logger: logging.Logger, level: int, event: LogEvent, title: str, fields: LogFields) -> None:
    """Log ``SolidQ <title> key: value, ...`` with ``fields`` and ``event`` as ``extra=``.

    What ``logger.log`` does, less its search of the stack for the caller (always this
    function): the record is the one ``logger.log`` would make (made for less by
    :func:`~flask_solidq.logging.records.make_record` when neither the logger's class nor the
    record factory is the app's own), its ``pathname``, ``lineno`` and ``funcName`` this
    call's, and it goes to ``logger.handle`` as ``logger.log``'s would.

    When the only handler the record would reach is ``flask solidq work``'s text handler
    (:func:`~flask_solidq.logging.formats.sole_line_handler` says when), nothing but that
    handler would see the record: the line it would write is written without one.
    """
    if not logger.isEnabledFor(level):
        return
    if type(logger) is logging.Logger:
        handler = formats.sole_line_handler(logger, level)
        if handler is not None and records.is_standard(logger) and records.is_extra(fields):
            _write_line(handler, logger, level, event, title, fields)
            return
    elif not isinstance(logger, logging.Logger):
        # Something shaped like a logger (a LoggerAdapter, say): its own ``log``.
        extra: LogFields = {"event": event._value_}  # what ``.value`` reads, without its descriptor
        extra.update(fields)
        logger.log(level, "SolidQ %s %s", title, format_fields(fields), extra=extra)
        return
    text = format_fields(fields)
    logger.handle(_record(logger, level, event, title, text, fields, sys._getframe().f_lineno))


def _record(
    logger: logging.Logger,
    level: int,
    event: LogEvent,
    title: str,
    text: str,
    fields: LogFields,
    line: int,
) -> logging.LogRecord:
    """The record ``logger.log`` would make of a line logged at ``line`` of :func:`log`."""
    extra: LogFields = {"event": event._value_}  # what ``.value`` reads, without its descriptor
    extra.update(fields)
    if logging._srcfile:  # None: the app turned the lookup of the caller off
        path, function = __file__, "log"
    else:
        path, line, function = "(unknown file)", 0, "(unknown function)"
    message = (title, text)
    return records.make_record(logger, level, path, line, "SolidQ %s %s", message, function, extra)


def _write_line(
    handler: formats._StderrHandler,
    logger: logging.Logger,
    level: int,
    event: LogEvent,
    title: str,
    fields: LogFields,
) -> None:
    """What ``handler`` would write of the line, written without a record or
    ``logger.handle`` (see :func:`formats.sole_line_handler` for when): the same text, from
    the clock read as the record's would be."""
    text = format_fields(fields)
    created, msecs, _ = records.clock()
    try:
        formats.write_line(handler, level, f"SolidQ {title} {text}", created, msecs)
    except Exception:  # noqa: BLE001 - as the handler does: report, never raise
        record = _record(logger, level, event, title, text, fields, sys._getframe().f_lineno)
        handler.handleError(record)


def log_performed(outcome: Outcome, duration: float) -> None:
    """Log the end of a run a worker performed: at INFO, finished, retried (with when it runs
    again), discarded or interrupted (where: ``interrupted at step 'embed'``); at
    WARNING, failed, with its error's class and message."""
    level = logging.WARNING if outcome.kind is OutcomeKind.FAILED else logging.INFO
    logger = _logger_for(level)
    if logger is not None:
        fields = outcome_fields(outcome, duration)
        event, title = _OUTCOME_LINES[outcome.kind._value_]
        if outcome.kind is OutcomeKind.INTERRUPTED and outcome.job is not None:
            title += f" {outcome.job._steps.describe()}"
        log(logger, level, event, title, fields)


def log_released(
    logger: logging.Logger, who: str, reason: str, jobs: t.Sequence[JobRef], size: int
) -> None:
    """Log at WARNING that ``who`` put ``size`` jobs back to ready (``reason``), naming them
    (``jobs``: what it read just before): they were interrupted and run again from the start.
    The line lists the first :data:`~flask_solidq.logging.fields.MAX_LISTED`; its fields
    list them all."""
    listed = f": {list_jobs(jobs)}" if jobs else ""
    logger.warning(
        "SolidQ %s put %s back to ready (%s)%s",
        who,
        count_of(size, "job"),
        reason,
        listed,
        extra={
            "event": LogEvent.JOBS_RELEASED.value,
            "size": size,
            "job_ids": [job.id for job in jobs],
            "job_names": [job.class_name for job in jobs],
        },
    )


def _receiver(line: SignalLine) -> Receiver:
    """The receiver that logs ``line`` for each send of its signal."""
    event, level, title, fields = line.event, line.level, line.title, line.fields

    def receive(sender: object, **payload: object) -> None:
        logger = _logger_for(level)
        if logger is not None:
            log(logger, level, event, title, fields(payload))

    return receive


_RECEIVERS: tuple[tuple[NamedSignal, Receiver], ...] = tuple(
    (line.signal, _receiver(line)) for line in SIGNAL_LINES
)

"""The log subscriber: flask-solidq's log lines about jobs, as Solid Queue's log subscriber
writes one per notification.

Lines read ``SolidQ <Event> key: value, ...`` and name the job (``job_name``, ``job_id``, the
job record's id, ``active_job_id``, ``queue``, ``attempt`` and, for errors, ``error_class``),
never its arguments or keys: those may hold personal data, and a log is the wrong place to
keep it. The same fields ride on each record as ``extra=`` with an ``event``
(:class:`LogEvent`), so structured loggers get them without parsing the message.

Levels: a job a worker starts, the end of each run (:func:`log_performed`: finished,
retried with when it runs again, discarded or deferred, with its duration), and a rate-limit
budget backing off, log at INFO; a failed run at WARNING, with its error's class and message.
The other signals (enqueue, the outcome signals, controls) log at DEBUG; a dropped collected
call at WARNING, since someone should look at it.

Signals are sent in the thread doing the work, so each receiver first asks the logger whether
the line would be written at all and, when not, returns before building anything.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import sys
import typing as t
from json import encoder as json_encoder

from flask_solidq import signals
from flask_solidq.logging import formats
from flask_solidq.logging import records
from flask_solidq.operations.execute import OutcomeKind

if t.TYPE_CHECKING:
    from blinker import NamedSignal

    from flask_solidq.operations.execute import Outcome
    from flask_solidq.values import JobRef

#: The logger lines go to unless :func:`connect` is given another.
LOGGER_NAME = "flask_solidq"
#: The most characters of an error's message a failure's line shows.
MAX_MESSAGE_LENGTH = 1000
#: The most jobs a line naming jobs put back to ready lists.
MAX_LISTED = 20

Receiver = t.Callable[..., None]

_connected: dict[str, logging.Logger] = {}

#: A string in JSON's double quotes, non-ASCII characters kept: what
#: ``json.JSONEncoder(ensure_ascii=False).encode`` does with a string, without its checks
#: (``json.dumps``'s set-up would cost more than the rest of a line).
_quote = json_encoder.encode_basestring
#: The types whose values a line shows as their ``repr``, looked up by exact type (a
#: subclass, an enum say, takes the general path).
_REPR_TYPES = frozenset({int, float, bool, type(None)})


class LogEvent(str, enum.Enum):
    """What one of flask-solidq's records is about: its ``event`` field."""

    ENQUEUE = "enqueue"
    JOB_STARTED = "job_started"
    JOB_FINISHED = "job_finished"
    JOB_RETRIED = "job_retried"
    JOB_DISCARDED = "job_discarded"
    JOB_FAILED = "job_failed"
    JOB_INTERRUPTED = "job_interrupted"
    JOB_DEFERRED = "job_deferred"
    PERFORM = "perform"
    RETRY = "retry"
    DISCARD = "discard"
    FAIL = "fail"
    COALESCE = "coalesce"
    DROP_COALESCED_CALL = "drop_coalesced_call"
    DEFER_RATE_LIMITED = "defer_rate_limited"
    RATE_LIMIT_BACK_OFF = "rate_limit_back_off"
    RELEASE_BLOCKED = "release_blocked"
    CLAIM = "claim"
    RELEASE = "release"
    PRUNE = "prune"
    THREAD_ERROR = "thread_error"
    BATCH_FINISH = "batch_finish"
    #: A supervisor was asked to stop: it says what it waits for.
    STOPPING = "stopping"
    #: A supervisor was asked to stop at once.
    STOPPING_NOW = "stopping_now"
    #: Running jobs went back to ready at shutdown.
    JOBS_RELEASED = "jobs_released"
    #: A worker's queue that no job definition uses.
    UNUSED_QUEUE = "unused_queue"
    #: A recurring task's queue that none of the supervisor's workers serves.
    UNSERVED_QUEUE = "unserved_queue"


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


def log(
    logger: logging.Logger, level: int, event: LogEvent, title: str, fields: dict[str, t.Any]
) -> None:
    """Log ``SolidQ <title> key: value, ...`` with ``fields`` and ``event`` as ``extra=``.

    What ``logger.log`` does, less its search of the stack for the caller: a worker logs two
    lines per job, and walking the frames to find this function (always this function) cost a
    fifth of a line. The record is the one ``logger.log`` would make (the logger's
    ``makeRecord``'s, made for less by :func:`~flask_solidq.logging.records.make_record`
    when neither the logger's class nor the record factory is the app's own), its
    ``pathname``, ``lineno`` and ``funcName`` this call's, and it goes to ``logger.handle``
    as ``logger.log``'s would.

    When the only handler the record would reach is ``flask solidq work``'s text handler
    (:func:`~flask_solidq.logging.formats.sole_line_handler` says when), nothing but that
    handler would see the record: the line it would write is written without one. Making
    the record and walking the loggers and the handler with it cost a third of a worker's CPU
    for a no-op job.
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
        extra = {"event": event._value_}  # what ``.value`` reads, without its descriptor
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
    fields: dict[str, t.Any],
    line: int,
) -> logging.LogRecord:
    """The record ``logger.log`` would make of a line logged at ``line`` of :func:`log`."""
    extra = {"event": event._value_}  # what ``.value`` reads, without its descriptor
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
    fields: dict[str, t.Any],
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


def outcome_fields(outcome: Outcome, duration: float) -> dict[str, t.Any]:
    """What the line of a run's end shows: the job, the run's duration in seconds, its
    error's class (and a failure's message), and when a retry runs (``retry_at``, and
    ``wait`` seconds from the run's end). A job that could not be loaded has no attempt."""
    claimed, job = outcome.claimed, outcome.job
    fields: dict[str, t.Any] = {
        "job_name": claimed.class_name if job is None else _job_name(job),
        "job_id": claimed.id,
        "active_job_id": claimed.active_job_id,
        "queue": claimed.queue_name,
        "attempt": None if job is None else job.executions,
        "duration": round(duration, 4),
    }
    if outcome.kind is OutcomeKind.FAILED and outcome.error is not None:
        fields.update(_error_fields(outcome.error))
    elif outcome.exception is not None:
        fields["error_class"] = error_class_name(outcome.exception)
    if outcome.retry is not None:
        fields["retry_at"] = _utc_iso(outcome.retry.scheduled_at)
        fields["wait"] = round(outcome.retry.wait, 3)
    return fields


def _utc_iso(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error_fields(error_json: str) -> dict[str, str]:
    """The class and message of a failed execution's error (as the worker stores it)."""
    error = json.loads(error_json)
    message = str(error.get("message", ""))
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[:MAX_MESSAGE_LENGTH] + "..."
    return {
        "error_class": str(error.get("exception_class", "")).removeprefix("builtins."),
        "error_message": message,
    }


def log_released(
    logger: logging.Logger, who: str, reason: str, jobs: t.Sequence[JobRef], size: int
) -> None:
    """Log at WARNING that ``who`` put ``size`` jobs back to ready (``reason``), naming them
    (``jobs``: what it read just before): they were interrupted and run again from the start.
    The line lists the first :data:`MAX_LISTED`; its fields list them all."""
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


def describe_jobs(jobs: t.Sequence[JobRef]) -> str:
    """``2 running jobs (12 send_email, 13 reindex)``: how many, then which."""
    return f"{count_of(len(jobs), 'running job')} ({list_jobs(jobs)})"


def list_jobs(jobs: t.Sequence[JobRef]) -> str:
    """``12 send_email, 13 reindex``: each job's record id and name, the first
    :data:`MAX_LISTED` of them."""
    listed = ", ".join(f"{job.id} {job.class_name}" for job in jobs[:MAX_LISTED])
    if len(jobs) > MAX_LISTED:
        listed += f" and {len(jobs) - MAX_LISTED} more"
    return listed


def count_of(count: int, noun: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _job_receiver(event: LogEvent, level: int, title: str) -> Receiver:
    """A receiver for a job event: its payload has ``job``, and maybe ``error`` and ``wait``."""

    def receive(sender: object, **payload: t.Any) -> None:
        logger = _logger_for(level)
        if logger is not None:
            log(logger, level, event, title, job_fields(payload))

    return receive


def _fields_receiver(event: LogEvent, level: int, title: str, keys: tuple[str, ...]) -> Receiver:
    """A receiver for an event whose payload is plain values: it logs ``keys`` of it."""

    def receive(sender: object, **payload: t.Any) -> None:
        logger = _logger_for(level)
        if logger is not None:
            log(logger, level, event, title, {key: payload.get(key) for key in keys})

    return receive


def _batch_finish_receiver(level: int) -> Receiver:
    """The receiver of ``batch_finish``: the batch, how it ended, its counts and how long it
    took from its enqueue."""

    def receive(sender: object, **payload: t.Any) -> None:
        logger = _logger_for(level)
        if logger is None:
            return
        batch = payload["batch"]
        took = None
        if batch.enqueued_at is not None and batch.finished_at is not None:
            took = round((batch.finished_at - batch.enqueued_at).total_seconds(), 3)
        fields = {
            "batch_id": batch.id,
            "status": str(payload["status"].value),
            "total_jobs": batch.total_jobs,
            "completed_jobs": batch.completed_jobs,
            "failed_jobs": batch.failed_jobs,
            "duration": took,
        }
        log(logger, level, LogEvent.BATCH_FINISH, "Batch finished", fields)

    return receive


def _back_off_receiver(level: int) -> Receiver:
    """The receiver of ``rate_limit_back_off``: the job, the budgets and the pause's end."""

    def receive(sender: object, **payload: t.Any) -> None:
        logger = _logger_for(level)
        if logger is not None:
            fields = {key: payload.get(key) for key in ("class_name", "job_id", "keys")}
            fields["until"] = _utc_iso(payload["until"])
            log(logger, level, LogEvent.RATE_LIMIT_BACK_OFF, "Back off rate limit", fields)

    return receive


def _thread_error_receiver(level: int) -> Receiver:
    """The receiver of ``thread_error``: the process, where, and the error's class (the code
    that sent it logs the traceback)."""

    def receive(sender: object, **payload: t.Any) -> None:
        logger = _logger_for(level)
        if logger is not None:
            fields = {
                # Not "process": a log record's own attribute (the pid).
                "process_name": payload.get("process"),
                "where": payload.get("where"),
                "error_class": error_class_name(payload["error"]),
            }
            log(logger, level, LogEvent.THREAD_ERROR, "Thread error", fields)

    return receive


def job_fields(payload: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """What a job event's line shows of its payload: the job's name, ids, queue and attempt,
    the error's class and a retry's wait. A failed job that could not be loaded has only its
    record's id."""
    job = payload.get("job")
    fields: dict[str, t.Any] = {}
    if job is None:
        fields["job_id"] = payload.get("provider_job_id")
    else:
        fields["job_name"] = _job_name(job)
        fields["job_id"] = job.provider_job_id
        fields["active_job_id"] = job.job_id
        fields["queue"] = job.queue_name
        fields["attempt"] = job.executions
    if payload.get("error") is not None:
        fields["error_class"] = error_class_name(payload["error"])
    if payload.get("wait") is not None:
        fields["wait"] = payload["wait"]
    return fields


def _job_name(job: t.Any) -> str:
    return t.cast(str, getattr(type(job), "job_name", type(job).__qualname__))


def error_class_name(error: BaseException | str) -> str:
    """The error's class, with its module unless it is a built-in."""
    if isinstance(error, str):
        return error
    cls = type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def format_fields(fields: t.Mapping[str, object]) -> str:
    """``key: value, ...``, with strings in double quotes so a value with a comma in it
    still reads as one."""
    parts = []
    value: t.Any  # narrowed by exact type below, which mypy doesn't follow
    for key, value in fields.items():
        # :func:`_format_value`'s two common cases inline: a job line has six values.
        kind = type(value)
        if kind is str:
            parts.append(f"{key}: {_quote(value)}")
        elif kind in _REPR_TYPES:
            parts.append(f"{key}: {value!r}")
        else:
            parts.append(f"{key}: {_format_value(value)}")
    return ", ".join(parts)


def _format_value(value: object) -> str:
    if type(value) in _REPR_TYPES:  # by exact type: a bool is an int, but not an int's repr
        return repr(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ", ".join(_format_value(item) for item in value) + "]"
    return repr(value)


_RECEIVERS: tuple[tuple[NamedSignal, Receiver], ...] = (
    (signals.enqueue, _job_receiver(LogEvent.ENQUEUE, logging.DEBUG, "Enqueue")),
    (signals.perform_start, _job_receiver(LogEvent.JOB_STARTED, logging.INFO, "Job started")),
    (signals.perform, _job_receiver(LogEvent.PERFORM, logging.DEBUG, "Perform")),
    (signals.retry, _job_receiver(LogEvent.RETRY, logging.DEBUG, "Retry")),
    (signals.discard, _job_receiver(LogEvent.DISCARD, logging.DEBUG, "Discard")),
    # DEBUG: the worker's "Job failed" line is the WARNING, with the error's message.
    (signals.fail, _job_receiver(LogEvent.FAIL, logging.DEBUG, "Fail")),
    (
        signals.coalesce,
        _fields_receiver(
            LogEvent.COALESCE,
            logging.DEBUG,
            "Coalesce",
            # Never the key: the app builds it, possibly from personal data.
            ("status", "job_id", "active_job_id", "class_name"),
        ),
    ),
    (
        signals.drop_coalesced_call,
        _fields_receiver(
            LogEvent.DROP_COALESCED_CALL,
            logging.WARNING,
            "Drop coalesced call",
            ("call_id", "job_id", "active_job_id", "class_name", "exception_class"),
        ),
    ),
    (
        signals.defer_rate_limited,
        _fields_receiver(
            LogEvent.DEFER_RATE_LIMITED,
            logging.DEBUG,
            "Defer rate-limited jobs",
            ("class_name", "keys", "job_ids", "size"),
        ),
    ),
    # INFO: an API said 429, rarer than a deferral and worth seeing.
    (signals.rate_limit_back_off, _back_off_receiver(logging.INFO)),
    (
        signals.release_blocked,
        _fields_receiver(
            LogEvent.RELEASE_BLOCKED,
            logging.DEBUG,
            "Release blocked",
            ("job_id", "concurrency_key", "released"),
        ),
    ),
    (
        signals.claim,
        _fields_receiver(LogEvent.CLAIM, logging.DEBUG, "Claim", ("process_id", "job_ids", "size")),
    ),
    (
        signals.release,
        # DEBUG: what a stopping process puts back to ready has its WARNING, naming the jobs.
        _fields_receiver(
            LogEvent.RELEASE,
            logging.DEBUG,
            "Release claimed",
            ("process_id", "reason", "job_ids", "size"),
        ),
    ),
    (
        signals.prune,
        # DEBUG: the supervisor logs each pruned process at WARNING.
        _fields_receiver(
            LogEvent.PRUNE, logging.DEBUG, "Prune processes", ("process_ids", "names", "size")
        ),
    ),
    # DEBUG: the thread that hit the error logs it, with its traceback.
    (signals.thread_error, _thread_error_receiver(logging.DEBUG)),
    (signals.batch_finish, _batch_finish_receiver(logging.INFO)),
)

"""The log subscriber: one log line per flask-solidq signal, as Solid Queue's log subscriber
writes one per notification.

Lines read ``SolidQ <Event> key: value, ...`` and name the job (its name, ``job_id``,
``provider_job_id``, queue and, for failures, the error's class), never its arguments: those
may hold personal data, and a log is the wrong place to keep it. Routine events log at DEBUG;
a failed job and a dropped collected call at WARNING, since someone should look at them.

Signals are sent in the thread doing the work, so each receiver first asks the logger whether
the line would be written at all and, when not, returns before building anything.
"""

from __future__ import annotations

import json
import logging
import typing as t

from flask_solidq import signals

if t.TYPE_CHECKING:
    from blinker import NamedSignal

#: The logger lines go to unless :func:`connect` is given another.
LOGGER_NAME = "flask_solidq"

Receiver = t.Callable[..., None]

_connected: dict[str, logging.Logger] = {}


def connect(logger: logging.Logger | None = None) -> None:
    """Log every flask-solidq signal to ``logger`` (the ``flask_solidq`` logger by default).

    Connecting again only changes the logger: each event still logs once.
    """
    _connected["logger"] = logger or logging.getLogger(LOGGER_NAME)
    for signal, receiver in _RECEIVERS:
        signal.connect(receiver, weak=False)


def disconnect() -> None:
    """Stop logging the signals. Doing it when not connected does nothing."""
    for signal, receiver in _RECEIVERS:
        signal.disconnect(receiver)
    _connected.pop("logger", None)


def _logger_for(level: int) -> logging.Logger | None:
    """The connected logger, when it would write a line at ``level``."""
    logger = _connected.get("logger")
    if logger is None or not logger.isEnabledFor(level):
        return None
    return logger


def _job_receiver(event: str, level: int) -> Receiver:
    """A receiver for a job event: its payload has ``job``, and maybe ``error`` and ``wait``."""

    def receive(sender: object, **payload: t.Any) -> None:
        logger = _logger_for(level)
        if logger is not None:
            logger.log(level, "SolidQ %s %s", event, format_fields(job_fields(payload)))

    return receive


def _fields_receiver(event: str, level: int, keys: tuple[str, ...]) -> Receiver:
    """A receiver for an event whose payload is plain values: it logs ``keys`` of it."""

    def receive(sender: object, **payload: t.Any) -> None:
        logger = _logger_for(level)
        if logger is not None:
            fields = {key: payload.get(key) for key in keys}
            logger.log(level, "SolidQ %s %s", event, format_fields(fields))

    return receive


def job_fields(payload: t.Mapping[str, t.Any]) -> dict[str, object]:
    """What a job event's line shows of its payload: the job's name, ids and queue, the error's
    class and a retry's wait. A failed job that could not be loaded has only its row id."""
    job = payload.get("job")
    fields: dict[str, object] = {}
    if job is None:
        fields["provider_job_id"] = payload.get("provider_job_id")
    else:
        fields["job"] = getattr(type(job), "job_name", type(job).__qualname__)
        fields["job_id"] = job.job_id
        fields["provider_job_id"] = job.provider_job_id
        fields["queue"] = job.queue_name
    if payload.get("error") is not None:
        fields["error"] = error_class_name(payload["error"])
    if payload.get("wait") is not None:
        fields["wait"] = payload["wait"]
    return fields


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
    return ", ".join(f"{key}: {_format_value(value)}" for key, value in fields.items())


def _format_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple, set, frozenset)):
        return "[" + ", ".join(_format_value(item) for item in value) + "]"
    return repr(value)


_RECEIVERS: tuple[tuple[NamedSignal, Receiver], ...] = (
    (signals.enqueue, _job_receiver("Enqueue", logging.DEBUG)),
    (signals.perform_start, _job_receiver("Perform start", logging.DEBUG)),
    (signals.perform, _job_receiver("Perform", logging.DEBUG)),
    (signals.retry, _job_receiver("Retry", logging.DEBUG)),
    (signals.discard, _job_receiver("Discard", logging.DEBUG)),
    (signals.fail, _job_receiver("Fail", logging.WARNING)),
    (
        signals.coalesce,
        _fields_receiver(
            "Coalesce",
            logging.DEBUG,
            # Never the key: the app builds it, possibly from personal data.
            ("status", "job_id", "active_job_id", "class_name"),
        ),
    ),
    (
        signals.drop_coalesced_call,
        _fields_receiver(
            "Drop coalesced call",
            logging.WARNING,
            ("call_id", "job_id", "active_job_id", "class_name", "exception_class"),
        ),
    ),
    (
        signals.defer_rate_limited,
        _fields_receiver(
            "Defer rate-limited jobs", logging.DEBUG, ("class_name", "keys", "job_ids", "size")
        ),
    ),
    (
        signals.release_blocked,
        _fields_receiver(
            "Release blocked", logging.DEBUG, ("job_id", "concurrency_key", "released")
        ),
    ),
)

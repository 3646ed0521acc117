"""The line each flask-solidq signal logs: its event, level, title, and the fields it shows
of the signal's payload (:data:`SIGNAL_LINES`, which :mod:`.subscriber` connects).

Levels: a job a worker starts, and a rate-limit budget backing off, log at INFO; a dropped
collected call at WARNING, since someone should look at it; the rest at DEBUG, where the
worker, the supervisor or the thread that hit an error logs the same event louder.
"""

from __future__ import annotations

import logging
import typing as t

from flask_solidq import signals
from flask_solidq.logging.events import LogEvent
from flask_solidq.logging.fields import LogFields
from flask_solidq.logging.fields import error_class_name
from flask_solidq.logging.fields import job_fields
from flask_solidq.logging.fields import utc_iso

if t.TYPE_CHECKING:
    from blinker import NamedSignal

#: What a line shows of a signal's payload.
Fields = t.Callable[[signals.Payload], LogFields]


class SignalLine(t.NamedTuple):
    """The line a signal logs: ``SolidQ <title> <fields>`` at ``level``, as ``event``."""

    signal: NamedSignal
    event: LogEvent
    level: int
    title: str
    fields: Fields


def picking(*keys: str) -> Fields:
    """The fields of a payload of plain values: ``keys`` of it."""

    def fields(payload: signals.Payload) -> LogFields:
        return {key: payload.get(key) for key in keys}

    return fields


def batch_finish_fields(payload: signals.Payload) -> LogFields:
    """``batch_finish``: the batch, how it ended, its counts and how long it took from its
    enqueue."""
    batch = payload["batch"]
    took = None
    if batch.enqueued_at is not None and batch.finished_at is not None:
        took = round((batch.finished_at - batch.enqueued_at).total_seconds(), 3)
    return {
        "batch_id": batch.id,
        "status": str(payload["status"].value),
        "total_jobs": batch.total_jobs,
        "completed_jobs": batch.completed_jobs,
        "failed_jobs": batch.failed_jobs,
        "duration": took,
    }


def back_off_fields(payload: signals.Payload) -> LogFields:
    """``rate_limit_back_off``: the job, the budgets and the pause's end."""
    fields: LogFields = {key: payload.get(key) for key in ("class_name", "job_id", "keys")}
    fields["until"] = utc_iso(payload["until"])
    return fields


def thread_error_fields(payload: signals.Payload) -> LogFields:
    """``thread_error``: the process, where, and the error's class (the code that sent it
    logs the traceback)."""
    return {
        # Not "process": a log record's own attribute (the pid).
        "process_name": payload.get("process"),
        "where": payload.get("where"),
        "error_class": error_class_name(payload["error"]),
    }


SIGNAL_LINES: tuple[SignalLine, ...] = (
    SignalLine(signals.enqueue, LogEvent.ENQUEUE, logging.DEBUG, "Enqueue", job_fields),
    SignalLine(
        signals.perform_start, LogEvent.JOB_STARTED, logging.INFO, "Job started", job_fields
    ),
    SignalLine(signals.perform, LogEvent.PERFORM, logging.DEBUG, "Perform", job_fields),
    SignalLine(signals.retry, LogEvent.RETRY, logging.DEBUG, "Retry", job_fields),
    SignalLine(signals.discard, LogEvent.DISCARD, logging.DEBUG, "Discard", job_fields),
    # DEBUG: the worker's "Job failed" line is the WARNING, with the error's message.
    SignalLine(signals.fail, LogEvent.FAIL, logging.DEBUG, "Fail", job_fields),
    SignalLine(
        signals.coalesce,
        LogEvent.COALESCE,
        logging.DEBUG,
        "Coalesce",
        # Never the key: the app builds it, possibly from personal data.
        picking("status", "job_id", "active_job_id", "class_name"),
    ),
    SignalLine(
        signals.drop_coalesced_call,
        LogEvent.DROP_COALESCED_CALL,
        logging.WARNING,
        "Drop coalesced call",
        picking("call_id", "job_id", "active_job_id", "class_name", "exception_class"),
    ),
    SignalLine(
        signals.defer_rate_limited,
        LogEvent.DEFER_RATE_LIMITED,
        logging.DEBUG,
        "Defer rate-limited jobs",
        picking("class_name", "keys", "job_ids", "size"),
    ),
    # INFO: an API said 429, rarer than a deferral and worth seeing.
    SignalLine(
        signals.rate_limit_back_off,
        LogEvent.RATE_LIMIT_BACK_OFF,
        logging.INFO,
        "Back off rate limit",
        back_off_fields,
    ),
    SignalLine(
        signals.release_blocked,
        LogEvent.RELEASE_BLOCKED,
        logging.DEBUG,
        "Release blocked",
        picking("job_id", "concurrency_key", "released"),
    ),
    SignalLine(
        signals.claim,
        LogEvent.CLAIM,
        logging.DEBUG,
        "Claim",
        picking("process_id", "job_ids", "size"),
    ),
    # DEBUG: what a stopping process puts back to ready has its WARNING, naming the jobs.
    SignalLine(
        signals.release,
        LogEvent.RELEASE,
        logging.DEBUG,
        "Release claimed",
        picking("process_id", "reason", "job_ids", "size"),
    ),
    # DEBUG: the supervisor logs each pruned process at WARNING.
    SignalLine(
        signals.prune,
        LogEvent.PRUNE,
        logging.DEBUG,
        "Prune processes",
        picking("process_ids", "names", "size"),
    ),
    # DEBUG: the thread that hit the error logs it, with its traceback.
    SignalLine(
        signals.thread_error,
        LogEvent.THREAD_ERROR,
        logging.DEBUG,
        "Thread error",
        thread_error_fields,
    ),
    SignalLine(
        signals.batch_finish,
        LogEvent.BATCH_FINISH,
        logging.INFO,
        "Batch finished",
        batch_finish_fields,
    ),
)

"""What flask-solidq's log lines show: the fields of a job's line (its name, ids, queue,
attempt, and an error's class), of a run's end, and the ``key: value, ...`` text they read as.

Never a job's arguments or keys: those may hold personal data, and a log is the wrong place
to keep it.
"""

from __future__ import annotations

import datetime as dt
import json
import typing as t
from json import encoder as json_encoder

from flask_solidq.operations.outcomes import OutcomeKind

if t.TYPE_CHECKING:
    from flask_solidq.operations.outcomes import Outcome
    from flask_solidq.signals import Payload
    from flask_solidq.values import JobRef

#: The most characters of an error's message a failure's line shows.
MAX_MESSAGE_LENGTH = 1000
#: The most jobs a line naming jobs put back to ready lists.
MAX_LISTED = 20

#: A string in JSON's double quotes, non-ASCII characters kept: what
#: ``json.JSONEncoder(ensure_ascii=False).encode`` does with a string, without its checks
#: (``json.dumps``'s set-up would cost more than the rest of a line).
_quote = json_encoder.encode_basestring
#: The types whose values a line shows as their ``repr``, looked up by exact type (a
#: subclass, an enum say, takes the general path).
_REPR_TYPES = frozenset({int, float, bool, type(None)})

#: The fields of a line, by name: what its text shows and its record's ``extra=`` holds.
LogFields = dict[str, object]


def outcome_fields(outcome: Outcome, duration: float) -> LogFields:
    """What the line of a run's end shows: the job, the run's duration in seconds, its
    error's class (and a failure's message), and when a retry runs (``retry_at``, and
    ``wait`` seconds from the run's end). A job that could not be loaded has no attempt."""
    claimed, job = outcome.claimed, outcome.job
    fields: LogFields = {
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
        fields["retry_at"] = utc_iso(outcome.retry.scheduled_at)
        fields["wait"] = round(outcome.retry.wait, 3)
    return fields


def utc_iso(moment: dt.datetime) -> str:
    """``2026-01-02T10:00:00.000Z``: a UTC time as a line shows it."""
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


def job_fields(payload: Payload) -> LogFields:
    """What a job event's line shows of its payload: the job's name, ids, queue and attempt,
    the error's class and a retry's wait. A failed job that could not be loaded has only its
    record's id."""
    job = payload.get("job")
    fields: LogFields = {}
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


def _job_name(job: object) -> str:
    name: str = getattr(type(job), "job_name", type(job).__qualname__)
    return name


def error_class_name(error: BaseException | str) -> str:
    """The error's class, with its module unless it is a built-in."""
    if isinstance(error, str):
        return error
    cls = type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


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

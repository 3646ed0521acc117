"""A job's stored payload (``solidq_jobs.arguments``): the job's import path, its arguments
in their stored forms, its attempt counters, its steps' progress and, when it was enqueued in a
traced span, its enqueuer's trace context; built from a job, written as compact JSON, and
loaded back into one.
"""

from __future__ import annotations

import json
import typing as t

from flask_solidq.definitions import arguments
from flask_solidq.errors import DeserializationError
from flask_solidq.values import JobArgument
from flask_solidq.values import JSONValue

if t.TYPE_CHECKING:
    import datetime as dt


class StoredJob(t.Protocol):
    """What a payload is built from: a :class:`~flask_solidq.Job`, named by what it reads so
    that this module, below the job class, needn't import it."""

    # Properties: read-only here, so the job's own (mutable) attributes match them.
    @property
    def arguments(self) -> tuple[JobArgument, ...]: ...
    @property
    def kwargs(self) -> dict[str, JobArgument]: ...
    @property
    def executions(self) -> int: ...
    @property
    def exception_executions(self) -> dict[str, int]: ...
    @property
    def _coalesced_as(self) -> str | None: ...
    @property
    def _trace_context(self) -> dict[str, str] | None: ...
    @property
    def job_id(self) -> str: ...
    @property
    def queue_name(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def enqueued_at(self) -> dt.datetime | None: ...
    @property
    def scheduled_at(self) -> dt.datetime | None: ...
    def payload(self) -> dict[str, JSONValue]: ...
    def _steps_payload_keys(self) -> dict[str, JSONValue]: ...


#: How :func:`encoded_payload` writes a string: as the payload encoder does.
_encode_string = json.encoder.encode_basestring


def payload(job: StoredJob) -> dict[str, JSONValue]:
    """The JSON-ready payload stored in ``solidq_jobs.arguments`` (``Job.payload``).

    :raises flask_solidq.SerializationError: an argument can't be stored.
    """
    coalesced_as = job._coalesced_as
    data: dict[str, JSONValue] = {"coalesce": coalesced_as} if coalesced_as else {}
    data["job"] = arguments.import_path(type(job))
    data["args"] = arguments.dump_args(job.arguments)
    if job.kwargs:
        data["kwargs"] = arguments.dump_kwargs(job.kwargs)
    if job.executions:
        data["executions"] = job.executions
    if job.exception_executions:
        data["exception_executions"] = dict(job.exception_executions)
    data.update(job._steps_payload_keys())
    if job._trace_context:
        data["trace"] = dict(job._trace_context)
    return data


def encoded_payload(job: StoredJob, encode: t.Callable[[JSONValue], str]) -> str:
    """:meth:`~flask_solidq.Job.payload` as ``encode`` (compact JSON: see
    :func:`~flask_solidq.definitions.arguments.payload_encoder`) writes it
    (``Job.encoded_payload``). For a job that holds nothing but its positional arguments (how a
    job is built to be enqueued), the same text written without building the dict.

    :raises flask_solidq.SerializationError: an argument can't be stored.
    """
    plain = not (
        job.kwargs
        or job._coalesced_as
        or job.executions
        or job.exception_executions
        # Not through __dict__: reading it makes a dict for the job's attributes, which
        # the garbage collector then tracks (a full collection every few bulk enqueues).
        or getattr(job, "_progress", None) is not None
        or type(job).payload is not payload
        or job._trace_context is not None
    )
    if not plain:
        return encode(job.payload())
    path = _encode_string(arguments.import_path(type(job)))
    return f'{{"job":{path},"args":{encode(arguments.dump_args(job.arguments))}}}'


def trace_context(data: t.Mapping[str, JSONValue]) -> dict[str, str] | None:
    """A stored payload's ``"trace"``: the trace context its enqueuer's span propagated
    (see :mod:`flask_solidq.tracing`), kept through retries; None when it isn't an object of
    strings (a payload written by hand), which only loses the span's parent."""
    carrier = data.get("trace")
    if type(carrier) is not dict:
        return None
    return {key: value for key, value in carrier.items() if type(value) is str}


def attempt_counters(data: t.Mapping[str, JSONValue]) -> tuple[int, dict[str, int]]:
    """A stored payload's ``executions`` and ``exception_executions``.

    :raises flask_solidq.DeserializationError: they are not an int and an object of ints.
    """
    executions = data.get("executions", 0)
    exception_executions = data.get("exception_executions", {})
    counts: dict[str, int] = {}
    if type(exception_executions) is dict:
        for name, count in exception_executions.items():
            if type(count) is not int:
                break
            counts[name] = count
        else:
            if type(executions) is int:
                return executions, counts
    raise DeserializationError(
        'The stored payload\'s attempt counters are malformed: "executions" should be'
        ' an int and "exception_executions" an object of ints.'
    )

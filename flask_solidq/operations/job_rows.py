"""The ``solidq_jobs`` row of a job being enqueued, and its reference once stored: the plain
enqueue's (:mod:`~flask_solidq.operations.enqueue`), which lends them to the coalescing
control's admission through its store (:data:`~flask_solidq.operations.enqueue.STORE`)."""

from __future__ import annotations

import threading
import typing as t

from flask_solidq import controls
from flask_solidq import current
from flask_solidq.definitions import arguments
from flask_solidq.values import JobRef

if t.TYPE_CHECKING:
    import datetime as dt

    from flask_solidq.definitions.job import Job
    from flask_solidq.values import JobRow
    from flask_solidq.values import JSONValue


def build_row(
    job: Job,
    now: dt.datetime,
    payload: dict[str, JSONValue] | None = None,
    *,
    controlled: bool = True,
) -> JobRow:
    """The ``solidq_jobs`` row for ``job``, enqueued at ``now`` (its payload ``payload``, by
    default the job's own); its controls' keys stamped unless no control concerns it
    (``controlled`` false: see :func:`flask_solidq.controls.concern_enqueue`).

    :raises flask_solidq.SerializationError: an argument can't be stored.
    :raises Exception: whatever a control's key callable raises.
    """
    batch = current.open_batch()
    encode = getattr(_thread, "encode", None) or _thread_encoder()
    try:
        return _row(job, now, encode, payload, None if batch is None else batch.id, controlled)
    except BaseException:
        # The encoder's record of the containers being encoded may be left filled.
        _thread.encode = None
        raise


#: Each thread's payload encoder for :func:`build_row`.
_thread = threading.local()


def _thread_encoder() -> t.Callable[[JSONValue], str]:
    """A payload encoder (:func:`flask_solidq.definitions.arguments.payload_encoder`) kept by
    this thread for its single enqueues: making the JSON module's C encoder took half of
    encoding a small payload, and a third of building a row."""
    encode = _thread.encode = arguments.payload_encoder()
    return encode


def build_rows(jobs: t.Sequence[Job], now: dt.datetime, *, controlled: bool = True) -> list[JobRow]:
    """The ``solidq_jobs`` rows for ``jobs``, enqueued at ``now`` together (a bulk enqueue):
    :func:`build_row`'s for each, the open batch read once and the payloads encoded by one
    encoder (:func:`flask_solidq.definitions.arguments.payload_encoder`); ``controlled`` as
    :func:`build_row` takes it.

    :raises flask_solidq.SerializationError: an argument can't be stored.
    :raises Exception: whatever a control's key callable raises.
    """
    batch = current.open_batch()
    batch_id = None if batch is None else batch.id
    encode = arguments.payload_encoder()
    return [_row(job, now, encode, None, batch_id, controlled) for job in jobs]


def _row(
    job: Job,
    now: dt.datetime,
    encode: t.Callable[[JSONValue], str],
    payload: dict[str, JSONValue] | None,
    batch_id: int | None,
    controlled: bool,
) -> JobRow:
    """The row of ``job`` (its payload ``payload``, by default its own, encoded by
    ``encode``), its controls' keys stamped when ``controlled``."""
    job.mark_enqueued(now)
    row: JobRow = {
        "queue_name": job.queue_name,
        "class_name": type(job).job_name,
        "arguments": job.encoded_payload(encode) if payload is None else encode(payload),
        "priority": job.priority,
        "active_job_id": job.job_id,
        "scheduled_at": job.scheduled_at or now,
        "concurrency_key": None,
        "rate_limit_key": None,
        "rate_limit_charges": None,
        "batch_id": batch_id,
        "created_at": now,
        "updated_at": now,
    }
    if controlled:
        controls.stamp(job, row)
    return row


def ref(job_id: int, row: JobRow, now: dt.datetime) -> JobRef:
    """The reference of the job stored as ``row`` with id ``job_id``; its ``scheduled_at``
    only when it is due after ``now``."""
    scheduled_at = row["scheduled_at"]
    return JobRef(
        id=job_id,
        queue_name=row["queue_name"],
        priority=row["priority"],
        class_name=row["class_name"],
        concurrency_key=row["concurrency_key"],
        scheduled_at=scheduled_at if scheduled_at > now else None,
    )

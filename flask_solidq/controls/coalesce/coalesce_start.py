"""What starting a coalesced job does: free its key, then read what it runs.

A worker about to perform a job whose payload says ``coalesce`` opened it (the payload's first
characters, :data:`~flask_solidq.values.MARKER_PREFIX`) first deletes the key's
row if it still points at this job, in a transaction of its own: from then on a call opens the
next job. Only then does it read the job's payload again (``replace``: a replacement admitted
before the release runs in this run) and its calls (``collect``), oldest first; the release
waited for any admission holding the key's lock, so both reads see what it wrote. Other jobs
pay nothing for this: the check is a string prefix.

The calls of a collecting job are loaded one by one (:func:`calls_for`): a call whose model
record is gone is skipped for this attempt, with ``signals.drop_coalesced_call``; any other
error fails the job with all its calls, before any skipped call is announced.
"""

from __future__ import annotations

import functools
import json
import types
import typing as t

import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq import signals
from flask_solidq.definitions import arguments
from flask_solidq.definitions.calls import Call
from flask_solidq.definitions.coalescing import OnConflict
from flask_solidq.definitions.model_references import MissingRecord
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import COALESCED_CALLS
from flask_solidq.models.tables import JOBS
from flask_solidq.storage import db
from flask_solidq.values import MARKER_PREFIX

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob


class StoredCall(t.NamedTuple):
    """A row of ``solidq_coalesced_calls``, as read at start."""

    id: int
    arguments: str | None


def opened_as(payload: str | None) -> OnConflict | None:
    """How ``coalesce`` opened the job stored with ``payload``, or None for any other job."""
    if not payload or not payload.startswith(MARKER_PREFIX):
        return None
    rest = payload[len(MARKER_PREFIX) :]
    return next((mode for mode in OnConflict if rest.startswith(f'"{mode.value}"')), None)


def begin(engine: sa.Engine, claimed: ClaimedJob) -> tuple[ClaimedJob, list[StoredCall] | None]:
    """Free the key of the coalesced job ``claimed`` (if it still holds it), then read what
    the run needs: its payload again and, collecting, its calls (None for a job that doesn't
    collect). Returns ``claimed`` with the payload read again."""
    mode = opened_as(claimed.arguments)
    db.retrying_deadlocks(functools.partial(release_key, engine, claimed.id), attempts=10)
    if mode is OnConflict.DISCARD or mode is None:
        return claimed, None
    with db.read(engine) as connection:
        payload = connection.scalar(sa.select(JOBS.c.arguments).where(JOBS.c.id == claimed.id))
        if payload is not None:
            claimed = claimed._replace(arguments=payload)
        if mode is not OnConflict.COLLECT:
            return claimed, None
        rows = connection.execute(
            sa.select(COALESCED_CALLS.c.id, COALESCED_CALLS.c.arguments)
            .where(COALESCED_CALLS.c.job_id == claimed.id)
            .order_by(COALESCED_CALLS.c.id)
        )
        return claimed, [StoredCall(row.id, row.arguments) for row in rows]


def release_key(engine: sa.Engine, job_id: int) -> None:
    """Delete the key row that points at ``job_id``, if any.

    The row is found by a read that locks nothing, then deleted through the key's unique
    index, where admissions lock it: a delete through the ``job_id`` index would lock the
    index entries in the opposite order and deadlock with them on MySQL/MariaDB.
    """
    with db.read(engine) as connection:
        key = connection.scalar(
            sa.select(COALESCE_KEYS.c.key).where(COALESCE_KEYS.c.job_id == job_id)
        )
    if key is None:
        return
    with db.write(engine) as connection:
        connection.execute(
            COALESCE_KEYS.delete().where(
                COALESCE_KEYS.c.key == key, COALESCE_KEYS.c.job_id == job_id
            )
        )


def calls_for(job: Job, stored: list[StoredCall] | None) -> list[Call] | None:
    """The calls ``job`` (loaded from a stored job) runs with: None when it wasn't stored by
    a collecting admission (a collecting definition then runs its own arguments as one
    call), else its stored calls, loaded, oldest first; empty when every call's record is
    gone (the run is then skipped, and the job finishes).

    :raises flask_solidq.CollectedJobMismatch: the job holds collected calls but its
        definition no longer collects, or its calls are gone.
    :raises flask_solidq.DeserializationError: a call can't be loaded (other than a missing
        record).
    """
    definition = type(job)
    if job.coalesced_as != OnConflict.COLLECT.value:
        return None
    if not definition.is_collecting():
        raise errors.CollectedJobMismatch(
            f"{definition.job_name} holds collected calls, but its definition no longer declares"
            " coalesce(on_conflict='collect'). Restore the declaration and retry the failed"
            " job to run its calls, or discard it."
        )
    if not stored:
        raise errors.CollectedJobMismatch(
            f"{definition.job_name} was stored with collected calls, but none is left."
        )
    calls: list[Call] = []
    dropped: list[tuple[int, MissingRecord]] = []
    for call in stored:
        try:
            calls.append(load_call(call))
        except MissingRecord as error:
            dropped.append((call.id, error))
    for call_id, missing in dropped:
        signals.drop_coalesced_call.send(
            definition,
            call_id=call_id,
            job_id=job.provider_job_id,
            active_job_id=job.job_id,
            class_name=definition.job_name,
            exception_class=f"{type(missing).__module__}.{type(missing).__qualname__}",
        )
    return calls


def load_call(call: StoredCall) -> Call:
    """One stored call, its arguments loaded as a normal run's are.

    :raises flask_solidq.DeserializationError: it can't be loaded (``MissingRecord``: an
        argument's model record is gone).
    """
    try:
        data = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        raise errors.DeserializationError(
            f"Collected call {call.id}'s stored payload isn't a JSON object that loads."
        ) from None
    if type(data) is not dict:
        raise errors.DeserializationError(
            f"Collected call {call.id}'s stored payload must be a JSON object."
        )
    return Call(
        call.id,
        arguments.load_args(data.get("args", [])),
        arguments.load_kwargs(data.get("kwargs", {})),
        types.MappingProxyType(data),
    )

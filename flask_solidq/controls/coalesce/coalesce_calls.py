"""Coalesced calls before and after their admission
(:mod:`~flask_solidq.controls.coalesce.coalesce_admission`): each call worked out before anything is
written (its key, the time it asks for, the payloads it may store: :func:`prepare`), and its
outcome recorded on the job and announced (:func:`record`, :func:`announce`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import typing as t

from flask_solidq import signals
from flask_solidq.controls.coalesce import coalesce_timing as timing
from flask_solidq.definitions import calls
from flask_solidq.definitions.arguments import dumps
from flask_solidq.definitions.coalescing import OnConflict
from flask_solidq.values import MARKER
from flask_solidq.values import CoalesceStatus

if t.TYPE_CHECKING:
    from flask_solidq.definitions.coalescing import Coalesce
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import JSONValue


def applies(job: Job) -> bool:
    """Whether ``job``'s definition coalesces its enqueues."""
    return type(job)._declared.active_coalesce is not None


def debounces(job: Job) -> bool:
    """Whether ``job``'s definition coalesces and times its job from its calls
    (``debounce``, ``max_wait``): such an enqueue reads the database's clock, which the
    dispatcher runs the job by (see :mod:`flask_solidq.storage.database_clock`)."""
    declaration = type(job)._declared.active_coalesce
    return declaration is not None and declaration.debounce is not None


@dataclasses.dataclass
class Pending:
    """One coalesced call, with everything it may need worked out before anything is
    written: its key, the time it asks for, and the payloads it may store."""

    job: Job
    key: str
    declaration: Coalesce
    #: When the call wants its job to come due (rules 1 and 2); None: now, no opinion.
    wanted_at: dt.datetime | None
    #: The payload the call's job is stored with, marked with how it was opened; None for a
    #: call that won't need one unless it has to open a job after all (then it is built then).
    payload: dict[str, JSONValue] | None = None
    #: ``collect``: the stored call (``solidq_coalesced_calls.arguments``).
    call_arguments: str | None = None

    def marked_payload(self) -> dict[str, JSONValue]:
        if self.payload is None:
            self.payload = marked(self.job, self.declaration.on_conflict)
        return self.payload


class Decision(t.NamedTuple):
    """What an admission did with one call: its status and the job that holds it (None for
    both when a concurrency conflict destroyed the job it created)."""

    pending: Pending
    status: CoalesceStatus | None
    job_id: int | None


def marked(job: Job, mode: OnConflict) -> dict[str, JSONValue]:
    """``job``'s payload, with how its job is opened recorded first."""
    payload = job.payload()
    payload.pop(MARKER, None)
    return {MARKER: mode.value, **payload}


def call_arguments(job: Job) -> str:
    """The stored form of a collected call: its payload, and the request's own fields
    (``Call.job_data``)."""
    return dumps(calls.job_data_of(job))


def prepare(jobs: t.Sequence[Job], now: dt.datetime, *, bulk: bool) -> list[list[Pending]]:
    """The coalesced ``jobs`` grouped by key (and definition), the groups sorted by key, each
    keeping its calls' order; every key and every payload a call will need is built here, so
    a key callable that raises or an argument that won't serialize fails the enqueue before
    anything is written. A repeated ``discard`` call's payload is never built (it is never
    stored), nor is a ``replace`` call's that a later call of the same key supersedes, nor,
    outside ``bulk``, a lone ``discard`` call's until it opens a job.

    :raises flask_solidq.SerializationError: an argument can't be stored.
    :raises ValueError: a key is longer than its column takes.
    :raises Exception: whatever a key callable raises.
    """
    groups: dict[tuple[str, type], list[Pending]] = {}
    for job in jobs:
        definition = type(job)
        declaration = t.cast("Coalesce", definition._declared.active_coalesce)
        key = declaration.stored_key(definition.job_name, job.arguments, job.kwargs)
        explicit = job.requests_wait()
        job.mark_enqueued(now)
        wanted_at = timing.wanted(declaration, job.scheduled_at, explicit, now)
        groups.setdefault((key, definition), []).append(Pending(job, key, declaration, wanted_at))
    for group in groups.values():
        mode = group[0].declaration.on_conflict
        if mode is OnConflict.COLLECT:
            for pending in group:
                pending.marked_payload()
                pending.call_arguments = call_arguments(pending.job)
        elif mode is OnConflict.REPLACE:
            group[-1].marked_payload()
        elif bulk:
            # A single discard call's payload is built only if it opens a job: a discarded
            # call is never stored, so an argument that can't be stays silently discarded.
            group[0].marked_payload()
    return [groups[group_key] for group_key in sorted(groups, key=lambda item: item[0])]


_STORED = (CoalesceStatus.CREATED, CoalesceStatus.COLLECTED, CoalesceStatus.REPLACED)


def record(decision: Decision, *, bulk: bool) -> None:
    """Set a call's outcome on its job: after its transaction committed, or, inside a
    caller's transaction, before that commits."""
    job = decision.pending.job
    job.mark_coalesced(decision.status)
    job.provider_job_id = decision.job_id
    # As docs/coalescing.md's outcome table has it: a single enqueue that didn't raise reports True
    # (Active Job sets it), even when the call was discarded or a concurrency conflict
    # destroyed its job; in bulk only a call whose data was stored reports True.
    job.successfully_enqueued = not bulk or decision.status in _STORED


def announce(decision: Decision) -> None:
    """Announce a recorded outcome (``signals.coalesce``); none for a call a concurrency
    conflict destroyed."""
    job = decision.pending.job
    if decision.status is not None:
        definition = type(job)
        signals.coalesce.send(
            definition,
            status=decision.status.value,
            key=decision.pending.key,
            job_id=decision.job_id,
            active_job_id=job.job_id,
            class_name=definition.job_name,
        )


def announce_all(decisions: t.Iterable[Decision]) -> None:
    """Send ``signals.coalesce`` for each decision that
    :func:`flask_solidq.controls.coalesce.coalesce_admission.admit_all` didn't announce."""
    for decision in decisions:
        announce(decision)

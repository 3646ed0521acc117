"""The coalescing control as a :class:`~flask_solidq.controls.base.Control`, like
the concurrency and rate limits: it takes over the enqueue of every job whose definition
declares ``coalesce`` (a call may join the key's pending job instead of storing one:
:mod:`~flask_solidq.controls.coalesce.coalesce_admission`), and acts when a worker starts such a job
(it frees the key, then reads what the job runs:
:mod:`~flask_solidq.controls.coalesce.coalesce_start`).

The declaration is :mod:`~flask_solidq.controls.coalesce`, its timing rules
:mod:`~flask_solidq.controls.coalesce.coalesce_timing`, and what a call carries before and after its
admission :mod:`~flask_solidq.controls.coalesce.coalesce_calls`.
"""

from __future__ import annotations

import functools
import typing as t

from flask_solidq.controls.base import Control
from flask_solidq.controls.coalesce import coalesce_admission
from flask_solidq.controls.coalesce import coalesce_calls
from flask_solidq.controls.coalesce import coalesce_start
from flask_solidq.definitions import registry

if t.TYPE_CHECKING:
    import datetime as dt

    import sqlalchemy as sa

    from flask_solidq.controls.base import JobStore
    from flask_solidq.controls.coalesce.coalesce_calls import Pending
    from flask_solidq.controls.coalesce.coalesce_start import StoredCall
    from flask_solidq.definitions.declared import Declared
    from flask_solidq.definitions.job import Job
    from flask_solidq.values import ClaimedJob


class Coalescing(Control):
    """The hooks of ``coalesce``: ENQUEUE (take the call over) and START."""

    def concerns_enqueue(self, declared: Declared) -> bool:
        return declared.active_coalesce is not None

    def takes_enqueue(self, job: Job) -> bool:
        return coalesce_calls.applies(job)

    def reads_database_clock(self, job: Job) -> bool:
        return coalesce_calls.debounces(job)

    def prepare_enqueue(
        self, jobs: t.Sequence[Job], now: dt.datetime, *, bulk: bool
    ) -> list[list[Pending]]:
        return coalesce_calls.prepare(jobs, now, bulk=bulk)

    def enqueue(
        self,
        engine: sa.Engine,
        prepared: list[list[Pending]],
        now: dt.datetime,
        store: JobStore,
        *,
        bulk: bool,
    ) -> t.Callable[[], None]:
        """A bulk enqueue announces each call as its transaction commits (a later key's
        failure leaves the earlier ones admitted and heard of); a single one hands its
        announcement back, to be made past the enqueue's handling of database errors."""
        if bulk:
            coalesce_admission.admit_all(engine, prepared, now, store, bulk=True)
            return _nothing
        decided = coalesce_admission.admit_all(
            engine, prepared, now, store, bulk=False, announce=False
        )
        return functools.partial(coalesce_calls.announce_all, decided)

    def checked_at_claim(self) -> frozenset[str]:
        """The collecting definitions: a worker claims their jobs only for idle threads and
        starts them first, never ahead of its threads (``prefetch``), as it does rate-limited
        ones. So a claimed collecting job is one starting now, and
        ``CoalescedCall.waiting()``, which stops counting a job's calls once it is claimed
        and no longer holds its key (full, or run again after a retry), misses none waiting
        in a worker's queue. Nothing is deferred: the CLAIM hook is the base's."""
        return frozenset(
            definition.job_name
            for definition in registry.definitions()
            if definition.is_collecting()
        )

    def acts_at_start(self, claimed: ClaimedJob) -> bool:
        """A string-prefix check: only a job ``coalesce`` opened."""
        return coalesce_start.opened_as(claimed.arguments) is not None

    def start(
        self, engine: sa.Engine, claimed: ClaimedJob
    ) -> tuple[ClaimedJob, list[StoredCall] | None]:
        return coalesce_start.begin(engine, claimed)

    def prepare_run(self, job: Job, started: list[StoredCall] | None) -> bool:
        calls = coalesce_start.calls_for(job, started)
        if calls is None:
            return True
        job.coalesced_calls = calls
        return bool(calls)  # every call's record gone: nothing to run, and nothing failed


def _nothing() -> None:
    """Nothing left to announce."""


CONTROL = Coalescing()

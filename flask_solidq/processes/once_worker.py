"""The worker of ``flask solidq work --once``: a :class:`~flask_solidq.processes.worker.Worker`
(the same claim, pool, finisher and controls) that also makes the due scheduled jobs ready, as
a dispatcher's poll would, and stops once nothing it could run is ready or due.

Each poll dispatches, then claims. The worker is done after a poll that began with nothing
held (no job running, queued or waiting for the finisher to store its outcome) and whose
claims found nothing: no job claimed, none deferred by its rate limit, none held back. Starting
from nothing held matters: a job's outcome is stored (a retry scheduled, a blocked job of its
concurrency key released) and the jobs it enqueued are committed before that poll looks, so
they are worked off too when they are due.
"""

from __future__ import annotations

import typing as t

from flask_solidq import controls
from flask_solidq.operations import dispatch
from flask_solidq.processes import job_notices
from flask_solidq.processes.worker import Worker
from flask_solidq.storage import db
from flask_solidq.values import JSONValue

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import WorkerSettings
    from flask_solidq.operations.claim import ClaimBatch
    from flask_solidq.operations.outcomes import Outcome
    from flask_solidq.processes.pool import Pool
    from flask_solidq.processes.tally import Tally


class OnceWorker(Worker):
    """A worker that dispatches due jobs itself and stops when none is left to run."""

    def __init__(
        self,
        app: Flask,
        worker: WorkerSettings,
        *,
        tally: Tally,
        batch_size: int,
        maintain_concurrency: bool,
        supervisor_id: int | None = None,
    ) -> None:
        super().__init__(app, worker, supervisor_id=supervisor_id)
        self.tally = tally
        self.batch_size = batch_size
        #: Expire concurrency semaphores and free the jobs they blocked at the first poll, as
        #: a dispatcher does at its start (unless the dispatchers are configured not to).
        self._maintenance_due = maintain_concurrency
        #: Whether this poll's claims ran, and found anything (claimed, deferred, held back).
        self._claimed = False
        self._found = False

    @property
    def metadata(self) -> dict[str, JSONValue]:
        return {**super().metadata, "once": True}

    def poll(self) -> float:
        held_nothing = self._holds_nothing()
        if self._maintenance_due:
            controls.maintain(self.engine, self.batch_size)
            self._maintenance_due = False
        self._dispatch_due()
        self._claimed = self._found = False
        delay = super().poll()
        if held_nothing and self._claimed and not self._found and not self.stopping:
            self.tally.mark_drained()
            self.stop()
        return delay

    def _holds_nothing(self) -> bool:
        """No job running or queued in the pool, and every outcome stored."""
        pool = self.pool
        return pool is not None and pool.idle_threads == pool.size and not self.held.snapshot()

    def _dispatch_due(self) -> None:
        """Make every due scheduled job ready (or blocked, or coalesced), a batch at a time.
        A read comes first: the dispatch is a write transaction (on SQLite it takes the
        database's write lock), and most polls of a busy worker find nothing due."""
        if dispatch.next_due_in(self.engine) != 0.0:
            return
        skip_locked = self.settings.use_skip_locked
        while True:
            count = dispatch.dispatch_due(self.engine, self.batch_size, skip_locked=skip_locked)
            if count:
                notified = db.supports_listen_notify(self.engine)
                job_notices.announce_ready(self.engine, notified=notified)
            if count < self.batch_size:
                return

    def _post(self, pool: Pool, batch: ClaimBatch) -> None:
        self._claimed = True
        self._found = self._found or bool(batch.jobs or batch.deferrals or batch.held_back)
        super()._post(pool, batch)

    def _stored(self, batch: list[Outcome]) -> None:
        """Count the stored runs; wake the worker once it holds nothing, to look again."""
        super()._stored(batch)
        self.tally.add_all(outcome.kind for outcome in batch)
        if not self.held.snapshot():
            self.wake_up()

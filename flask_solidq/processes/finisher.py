"""The finisher: stores the outcomes of a worker's jobs, many per transaction.

Worker threads hand their outcomes over and go back to work at once; the finisher stores
whatever arrived while its previous transaction committed, in one transaction (a group
commit). Finishing is what caps a database queue's throughput, and this turns one commit per
job into one per batch.

Once a batch committed, the outcomes' signals (``retry``, ``discard``, ``fail``) are sent from
here, in an app context of the worker's app: a receiver sees what was stored.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import typing as t

import sqlalchemy as sa
from flask import current_app
from flask import has_app_context

from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.processes import job_notices
from flask_solidq.processes.thread_errors import ThreadActivity
from flask_solidq.storage import db

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.operations.outcomes import Outcome
    from flask_solidq.processes.outage import Outage

logger = logging.getLogger("flask_solidq")

#: The most outcomes stored in one transaction.
BATCH_SIZE = 500
#: The longest pause, in seconds, between two tries to store a batch.
MAX_BACKOFF = 5.0
#: How long the finisher waits, once an outcome arrived, for more to join its batch. A
#: batch's statement costs about the same CPU whatever its size, so a short wait while the other
#: threads finish their jobs stores several outcomes for the price of one; the worker's threads
#: don't wait for it.
LINGER = 0.002


class Finisher:
    """A thread storing the outcomes handed to :meth:`add` for process ``process_id``."""

    def __init__(
        self,
        engine: sa.Engine,
        process_id: t.Callable[[], int | None],
        *,
        preserve_finished: bool,
        outage: Outage | None = None,
        on_stored: t.Callable[[list[Outcome]], None] | None = None,
    ) -> None:
        self.engine = engine
        self.process_id = process_id
        self.preserve_finished = preserve_finished
        #: The process's outage: a database that can't be reached is logged once for the
        #: process, not once per failed batch.
        self.outage = outage
        #: Called with each batch once its transaction committed (the worker forgets the
        #: jobs its threads held).
        self.on_stored = on_stored
        #: The app whose context the batches are stored (and their signals sent) in: the
        #: one current where the finisher is made (a worker's boot), if any.
        self.app: Flask | None = (
            current_app._get_current_object()  # type: ignore[attr-defined]
            if has_app_context()
            else None
        )
        self.linger = LINGER
        self._pending: list[Outcome] = []
        self._condition = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="solidq-finisher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, outcome: Outcome) -> None:
        """Store ``outcome`` soon (any thread). Only the first outcome of a batch wakes the
        finisher: the later ones join it while it lingers or stores."""
        with self._condition:
            self._pending.append(outcome)
            if len(self._pending) == 1:
                self._condition.notify()

    def stop(self, timeout: float) -> None:
        """Store what is pending, trying for up to ``timeout`` seconds, then stop. Outcomes
        that couldn't be stored leave their claims behind, which the process's shutdown
        releases: their jobs run again rather than being lost."""
        with self._condition:
            self._stopping = True
            self._condition.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        failures = 0
        while True:
            with self._condition:
                while not self._pending and not self._stopping:
                    self._condition.wait()
                if not self._pending:
                    return
                self._linger()
                batch, self._pending = self._pending[:BATCH_SIZE], self._pending[BATCH_SIZE:]
            started = time.monotonic()
            try:
                self._store(batch)
                failures = 0
                if self.outage is not None:
                    self.outage.succeeded(started=started)
            except Exception as error:  # the database failed: keep the outcomes, try again
                failures += 1
                if self.outage is None or not self.outage.failed(
                    error, started=started, retry_every=MAX_BACKOFF, where=ThreadActivity.FINISH
                ):
                    logger.exception(
                        "SolidQ couldn't store %s job outcomes; trying again", len(batch)
                    )
                with self._condition:
                    self._pending[:0] = batch
                    if self._stopping and failures >= 3:
                        return
                time.sleep(min(MAX_BACKOFF, 0.1 * 2**failures))

    def _linger(self) -> None:
        """Wait up to :data:`LINGER` for more outcomes (the condition's lock held)."""
        deadline = time.monotonic() + self.linger
        while not self._stopping and len(self._pending) < BATCH_SIZE:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._condition.wait(remaining)

    def _store(self, batch: list[Outcome]) -> None:
        process_id = self.process_id()
        if process_id is None:  # pruned: our claims were failed or released by someone else
            log_dropped(batch, "this process was pruned")
            return
        with self._app_context():
            stored = finalize.finalize_all(
                self.engine, process_id, batch, preserve_finished=self.preserve_finished
            )
        _announce_deferred(self.engine, stored)
        if len(stored) < len(batch):
            kept = {outcome.claimed.id for outcome in stored}
            log_dropped(
                [outcome for outcome in batch if outcome.claimed.id not in kept],
                f"its claim is no longer process {process_id}'s",
            )
        if self.on_stored is not None:
            self.on_stored(batch)

    def _app_context(self) -> t.ContextManager[object]:
        """A fresh app context per batch, so a receiver using the app's session gets one
        that is torn down after it."""
        return self.app.app_context() if self.app is not None else contextlib.nullcontext()


def _announce_deferred(engine: sa.Engine, stored: t.Sequence[Outcome]) -> None:
    """Wake the dispatchers that would sleep past the first job deferred by ``RateLimited``
    (on PostgreSQL the transaction notified them already)."""
    due = [o.retry.scheduled_at for o in stored if o.kind is OutcomeKind.DEFERRED and o.retry]
    if due:
        job_notices.announce_scheduled(engine, min(due), notified=db.supports_listen_notify(engine))


def log_dropped(outcomes: t.Sequence[Outcome], why: str) -> None:
    """Say, one WARNING per job, that an outcome was not stored and why.

    It happens to a process that was silent past the alive threshold (paused by SIGSTOP, a
    VM's pause or a debugger, or starved) and was pruned meanwhile: its claims were failed or
    released (``SOLIDQ_ON_WORKER_DEATH``) by a supervisor, so what the database says of the
    job stands, and the job's "finished" line in this process's log does not.
    """
    for outcome in outcomes:
        logger.warning(
            "SolidQ dropped the %s outcome of job %s (%s): %s; the queue keeps what the"
            " pruning did with it (SOLIDQ_ON_WORKER_DEATH)",
            outcome.kind.value,
            outcome.claimed.id,
            outcome.claimed.class_name,
            why,
        )

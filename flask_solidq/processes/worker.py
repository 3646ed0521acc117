"""The worker: claims ready jobs for its threads and performs them.

Each poll claims jobs in one transaction per queue and hands them to the pool; the outcomes
go to the finisher. A thread that frees wakes the worker when it may claim, so a busy worker
claims again as soon as it can; jobs made ready by another process wake it too (see
:mod:`~flask_solidq.processes.job_notices`), and an idle one polls every ``polling_interval``
as the fallback.

How many jobs a claim asks for (claiming ahead of the threads while a backlog lasts) is
:mod:`~flask_solidq.processes.claim_sizing`'s; the jobs the threads hold, and the release of
the claims none holds (a claim's reply lost), are :mod:`~flask_solidq.processes.held_jobs`'.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import typing as t

from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.operations import claim as claim_operation
from flask_solidq.operations import execute
from flask_solidq.operations import release
from flask_solidq.operations.process_commands import ProcessCommand
from flask_solidq.processes import job_notices
from flask_solidq.processes.claim_sizing import ClaimSizing
from flask_solidq.processes.finisher import Finisher
from flask_solidq.processes.held_jobs import HeldJobs
from flask_solidq.processes.held_jobs import StraySweep
from flask_solidq.processes.host_bell import WORKER
from flask_solidq.processes.job_stats import JobStats
from flask_solidq.processes.poller import Poller
from flask_solidq.processes.pool import Pool
from flask_solidq.processes.pool import Queued
from flask_solidq.processes.pool import StartLedger
from flask_solidq.processes.stats_flusher import StatsFlusher
from flask_solidq.storage import db
from flask_solidq.storage import engines
from flask_solidq.values import JSONValue
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import WorkerSettings
    from flask_solidq.operations.outcomes import Outcome
    from flask_solidq.processes.signal_safe_waker import Watched
    from flask_solidq.values import ClaimedJob

logger = logging.getLogger("flask_solidq")

#: How long a worker with no idle thread sleeps: a thread that frees wakes it anyway.
BUSY_SLEEP = 600.0
#: How many claims one poll may make when its claims defer jobs and leave threads idle.
CLAIMS_PER_POLL = 5


class Worker(Poller):
    """A worker process (or thread, in thread mode)."""

    kind = ProcessKind.WORKER

    def __init__(
        self, app: Flask, worker: WorkerSettings, *, supervisor_id: int | None = None
    ) -> None:
        super().__init__(app, supervisor_id=supervisor_id)
        self.worker = worker
        self.selector = claim_operation.QueueSelector(worker.queues)
        self.pool: Pool | None = None
        self.finisher: Finisher | None = None
        self._subscription: job_notices.Subscription | None = None
        self.held = HeldJobs()
        self._strays = StraySweep(self.settings.process_heartbeat_interval)
        self._sizing = ClaimSizing(worker.threads, worker.prefetch)
        #: Whether the worker acted on :meth:`quiet` (see :meth:`_stay_quiet`).
        self._quieted = False
        #: Shared with the supervisor in fork mode (see pool.StartLedger).
        self.start_ledger: StartLedger | None = None
        #: The runs counted for ``solidq_job_stats``, and the thread that writes them.
        self.stats = JobStats()
        self.stats_flusher: StatsFlusher | None = None

    @property
    def metadata(self) -> dict[str, JSONValue]:
        return {
            "queues": ",".join(self.worker.queues),
            "threads": self.worker.threads,
            "prefetch": self.worker.prefetch,
            "polling_interval": self.worker.polling_interval,
        }

    def use_start_ledger(self, ledger: StartLedger) -> None:
        """List the pool's queued jobs in ``ledger``, which the supervisor reads if this
        process dies (called before :meth:`run`)."""
        self.start_ledger = ledger

    def boot(self) -> None:
        super().boot()
        self.pool = Pool(
            self.worker.threads,
            on_idle=self.wake_up,
            ledger=self.start_ledger,
            name=f"{self.name}-thread",
        )
        self.finisher = Finisher(
            self.engine,
            lambda: self.process_id,
            preserve_finished=self.settings.preserve_finished_jobs,
            outage=self.outage,
            on_stored=self._stored,
        )
        self.stats_flusher = StatsFlusher(
            self.engine, self.stats, self.settings.stats_flush_interval
        )
        self._strays.schedule()
        # One connection per thread, open before the first claim (see engines.warm).
        engines.warm(self.engine, self.worker.threads)
        self.finisher.start()
        self.stats_flusher.start()
        job_notices.listen_ready(self.wake_up)
        self._subscription = job_notices.Subscription(
            self.state.claim_engine,
            WORKER,
            self._heard_ready,
            tag=job_notices.worker_tag(self.selector),
            on_gap=self.wake_up,
        )

    def watched(self) -> list[Watched]:
        return self._subscription.watched() if self._subscription is not None else []

    def _stored(self, batch: list[Outcome]) -> None:
        """The finisher stored ``batch``: its jobs are no longer held (finisher thread)."""
        self.held.discard(outcome.claimed.id for outcome in batch)

    def _heard_ready(self, payload: bytes | str) -> None:
        """Another process made jobs ready: wake up, unless it named queues this worker
        doesn't claim from."""
        if job_notices.concerns(payload, self.selector.matches):
            self.wake_up()

    @property
    def registered_command(self) -> str | None:
        return ProcessCommand.QUIET.value if self._quiet else None

    def poll(self) -> float:
        pool = t.cast(Pool, self.pool)
        self._sizing.gather(pool)
        if self.process_id is None:
            return self.worker.polling_interval
        if self._quiet:
            return self._stay_quiet(pool)
        if self._strays.due():
            self._strays.sweep(self.engine, self.process_id, self.held, f"{self.kind} {self.name}")
        try:
            self._claim(pool)
        except Exception:
            self._strays.suspect()
            raise
        if pool.idle_threads:
            return self.worker.polling_interval
        return min(BUSY_SLEEP, max(0.0, self._strays.next_at - time.monotonic()))

    def _stay_quiet(self, pool: Pool) -> float:
        """Claim nothing more: the first time, put the jobs claimed ahead and not started
        back to ready and let the threads end with their current jobs; then sleep until
        stopped (the heartbeat goes on)."""
        self.reached_database = False
        if not self._quieted:
            self._quieted = True
            queued = pool.close()
            logger.info(
                "SolidQ %s %s is quiet: it claims no more jobs and finishes the %s it runs",
                self.kind,
                self.name,
                pool.size - pool.idle_threads,
            )
            self._release_queued(pool, queued)
        return BUSY_SLEEP

    def _claim(self, pool: Pool) -> None:
        """Claim what :class:`~flask_solidq.processes.claim_sizing.ClaimSizing` says and post
        it. Claim again at once after a claim whose controls deferred jobs (over their rate
        limit), so the threads don't sit idle behind waiting jobs, or after a full claim for
        the idle threads that leaves room to claim ahead; at most :data:`CLAIMS_PER_POLL`
        claims a poll."""
        for attempt in range(CLAIMS_PER_POLL):
            size = self._sizing.size(pool)
            if not size:
                if attempt == 0:  # nothing asked of the database: no sign it answers
                    self.reached_database = False
                return
            batch = claim_operation.claim_batch(
                self.state.claim_engine,
                self.selector,
                size,
                t.cast(int, self.process_id),
                skip_locked=self.settings.use_skip_locked,
                # Only the worker's own thread posts, so the idle threads can only grow
                # until the post: each rate-limited job it admits finds one.
                limited_cap=pool.idle_threads,
                # _post starts a job charged ahead of the clock at its moment.
                charge_ahead=True,
            )
            self._post(pool, batch)
            self._sizing.claimed(batch, size)
            if batch.deferrals:
                self._announce_deferrals(batch)
            elif not self._sizing.backlog:
                return

    def _post(self, pool: Pool, batch: claim_operation.ClaimBatch) -> None:
        """Hand the claimed jobs to the pool: the rate-limited ones first (ahead of any queued
        job), so they start at once on the idle threads their claim counted; then the rest,
        in claim order."""
        limited = set(batch.limited)
        for job in reversed([job for job in batch.jobs if job.id in limited]):
            self.held.add(job.id)
            start = batch.starts.get(job.id)
            perform = self._perform if start is None else functools.partial(self._perform, at=start)
            pool.post(perform, job, job_id=job.id, front=True)
        jobs = [job for job in batch.jobs if job.id not in limited] if limited else batch.jobs
        job_ids = [job.id for job in jobs]
        self.held.add_all(job_ids)
        pool.post_each(self._perform, jobs, job_ids)

    def _announce_deferrals(self, batch: claim_operation.ClaimBatch) -> None:
        """Wake the dispatchers that would sleep past the first deferred job's time (on
        PostgreSQL the claim's transaction notified them already)."""
        engine = self.state.claim_engine
        earliest = min(deferral.until for deferral in batch.deferrals)
        job_notices.announce_scheduled(engine, earliest, notified=db.supports_listen_notify(engine))

    def _perform(self, job: ClaimedJob, at: float | None = None) -> None:
        """Perform one claimed job on a pool thread, not before the ``time.monotonic()``
        ``at`` its rate limit charged it for (250 ms ahead at most); hand its outcome to
        the finisher, then log how it ended and how long it took."""
        started = time.monotonic()
        try:
            if at is not None:
                _wait_until(at)
                started = time.monotonic()
            outcome = execute.perform_in_app(self.app, job, self._is_stopping, self.process_id)
        except BaseException as error:  # the wait's: keep the job as failed, never lost
            outcome = execute.escaped(job, error)
        t.cast(Finisher, self.finisher).add(outcome)
        seconds = time.monotonic() - started
        self.stats.record(outcome, ended_at=time.time(), duration=seconds)
        self._sizing.timed(seconds)
        log_subscriber.log_performed(outcome, seconds)

    def _is_stopping(self) -> bool:
        """Whether the worker is stopping: a job with steps then stops at its next checkpoint
        and goes back to its queue (the finisher stores that while the pool shuts down)."""
        return self._stopping

    def shutdown(self) -> None:
        """Stop claiming; put the jobs claimed ahead and not started back to ready at once;
        give running jobs ``SOLIDQ_SHUTDOWN_TIMEOUT`` to finish, store their outcomes,
        release the claims of jobs still running, then deregister."""
        self._stopping = True
        job_notices.forget(self.wake_up)
        if self._subscription is not None:
            self._subscription.close()
        timeout = self.settings.shutdown_timeout
        if self.pool is not None:
            self._release_queued(self.pool, self.pool.close())
            self.pool.shutdown(timeout)
        if self.finisher is not None:
            self.finisher.stop(timeout=max(timeout, 5.0))
        if self.stats_flusher is not None:
            self.stats_flusher.stop(timeout=5.0)
        if self.process_id is not None:
            self._release_unfinished()
        super().shutdown()

    def _release_queued(self, pool: Pool, queued: list[Queued]) -> None:
        """Put the jobs the pool will never start back to ready (they never started), then
        forget them. They stay listed in the start ledger until that committed: if this
        process dies first, its supervisor releases them. If the database fails here, the
        release of every unfinished claim at the end of the shutdown takes them too."""
        job_ids = [task.job_id for task in queued if task.job_id is not None]
        if not job_ids:
            return
        if self.process_id is not None:
            try:
                released = release.release_never_started(
                    self.engine,
                    self.process_id,
                    job_ids,
                    reason=release.ReleaseReason.SHUTDOWN,
                )
            except Exception:  # the database failed: _release_unfinished tries again
                logger.warning(
                    "SolidQ %s %s couldn't put its %s jobs claimed ahead back to ready yet",
                    self.kind,
                    self.name,
                    len(job_ids),
                    exc_info=True,
                )
                return
            logger.info(
                "SolidQ %s %s put %s jobs it had claimed ahead back to ready (not started)",
                self.kind,
                self.name,
                len(released),
                extra={"job_ids": [job.id for job in released]},
            )
        pool.unlist(queued)
        self.held.discard(job_ids)

    def _release_unfinished(self) -> None:
        """Put the jobs still claimed (running past the shutdown timeout, or whose outcome
        couldn't be stored) back to ready, and say which."""
        process_id = t.cast(int, self.process_id)
        unfinished = release.claimed_jobs(self.engine, [process_id])
        count = release.release_all(self.engine, [process_id])
        if count:
            log_subscriber.log_released(
                logger,
                f"{self.kind} {self.name}",
                f"unfinished after SOLIDQ_SHUTDOWN_TIMEOUT, {self.settings.shutdown_timeout:g} s",
                unfinished,
                count,
            )


def _wait_until(moment: float) -> None:
    """Wait until ``time.monotonic()`` reaches ``moment``. An Event's timed wait rather than
    ``time.sleep``: the latter's ``clock_nanosleep`` fails with EINVAL under libfaketime (the
    clock-skew tests run workers under it), and the wait runs inside ``_perform``'s ``try``
    anyway, so no error of it could leave a claimed job unperformed."""
    threading.Event().wait(max(0.0, moment - time.monotonic()))

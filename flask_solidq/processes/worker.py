"""The worker: claims ready jobs for its threads and performs them.

Each poll claims jobs in one transaction per queue and hands them to the pool; the outcomes
go to the finisher. A thread that frees wakes the worker when it may claim, so a busy worker
claims again as soon as it can; jobs made ready by another process wake it too (see
:mod:`~flask_solidq.processes.job_notices`), and an idle one polls every ``polling_interval``
as the fallback.

**Claiming ahead** (``prefetch``). A claim costs about the same whether it takes 1 job or 10,
and with one claim per idle thread the threads of a busy worker mostly wait for the next one.
So while a backlog lasts (its last claim came back full) a worker claims jobs beyond its idle
threads, queued in its pool for the next thread that frees, and refills the queue once half of
it ran. How many: what its threads get through in :data:`AHEAD_SECONDS` by its last runs'
mean, at most ``prefetch``. No-op jobs fill the whole ``prefetch``; jobs that run longer than
``AHEAD_SECONDS`` per thread (60 ms with 3 threads) are never claimed ahead, so a worker
doesn't sit on slow jobs that another worker's idle threads could run (and before it timed a
run, it claims for idle threads only). The claimed-ahead jobs are claims like any other (in
:class:`HeldJobs`, never stray), but they never count as started:

* a worker that stops puts them back to ready at once, before it waits for its running jobs;
* a worker that dies has them put back to ready by its supervisor, which reads them from the
  pool's :class:`~flask_solidq.processes.pool.StartLedger` (a job leaves the ledger just
  before it starts), whatever ``SOLIDQ_ON_WORKER_DEATH`` says of the running ones;
* rate-limited jobs are never claimed ahead: a claim admits at most as many as the worker has
  idle threads (``limited_cap``), and they go to the front of the pool's queue, so each
  starts within a hand-off of its admission (docs/rate-limits.md, "Admissions and starts"),
  after a check that its budget wasn't paused since (an API's 429). A claim that met more
  of them than it could admit leaves them ready and stops there; until a claim leaves none,
  the worker claims only for idle threads, as without ``prefetch``, so they aren't starved
  by the unlimited jobs behind them. Collecting jobs are treated the same (a claimed one is
  one starting now, so ``CoalescedCall.waiting()`` counts the calls of every collecting job
  not yet started: see :class:`~flask_solidq.controls.coalesce.control.Coalescing`).

Without a backlog a worker claims for its idle threads only, so it doesn't hoard the few
ready jobs another worker's idle threads could run.

A claim can commit on the server while the worker sees an error (the reply was lost, e.g. a
connection reset): the claimed jobs would then sit in claimed executions under a live
process, untouched by pruning. So the worker keeps the ids of the jobs its threads hold
(posted, until the finisher stored their outcome), and after a failed claim, and every
heartbeat interval, releases the claims of its process that none of its threads holds. It
does so between polls, in its own thread, the only one that claims: a claim it made is either
posted (held) or lost with the error.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
import typing as t

from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.operations import claim as claim_operation
from flask_solidq.operations import execute
from flask_solidq.operations import release
from flask_solidq.processes import job_notices
from flask_solidq.processes.finisher import Finisher
from flask_solidq.processes.host_bell import WORKER
from flask_solidq.processes.poller import Poller
from flask_solidq.processes.pool import Pool
from flask_solidq.processes.pool import Queued
from flask_solidq.processes.pool import StartLedger
from flask_solidq.storage import db
from flask_solidq.storage import engines
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import WorkerSettings
    from flask_solidq.operations.execute import Outcome
    from flask_solidq.processes.signal_safe_waker import Watched
    from flask_solidq.values import ClaimedJob

logger = logging.getLogger("flask_solidq")

#: How long a worker with no idle thread sleeps: a thread that frees wakes it anyway.
BUSY_SLEEP = 600.0
#: How many claims one poll may make when its claims defer jobs and leave threads idle.
CLAIMS_PER_POLL = 5
#: With a backlog, how long a woken worker waits for more of its threads to free before it
#: claims: a fraction of a claim's own cost, so short jobs are claimed several at a time.
GATHER_TIMEOUT = 0.002
#: With a backlog, how much work a worker claims ahead of its threads: the jobs they run in
#: this many seconds (at most ``prefetch``). Enough to cover a claim's round trip several
#: times over, so the threads never wait for the next claim; little enough that a worker
#: doesn't sit on jobs another worker's idle threads could run.
AHEAD_SECONDS = 0.02
#: How many of its last runs a worker times to size what it claims ahead.
RUNS_TIMED = 16


class HeldJobs:
    """The ids of the jobs a worker's threads hold: posted to the pool, until the finisher
    stored their outcome. A count per id, not a set: a job retried at once can be claimed
    again by the same worker before the finisher forgets its first run."""

    def __init__(self) -> None:
        self._counts: collections.Counter[int] = collections.Counter()
        self._lock = threading.Lock()

    def add(self, job_id: int) -> None:
        with self._lock:
            self._counts[job_id] += 1

    def add_all(self, job_ids: t.Iterable[int]) -> None:
        """:meth:`add` each of ``job_ids``, under one hold of the lock."""
        with self._lock:
            self._counts.update(job_ids)

    def discard(self, job_ids: t.Iterable[int]) -> None:
        with self._lock:
            for job_id in job_ids:
                count = self._counts[job_id] - 1
                if count > 0:
                    self._counts[job_id] = count
                else:
                    del self._counts[job_id]

    def snapshot(self) -> set[int]:
        with self._lock:
            return set(self._counts)


class Worker(Poller):
    """A worker process (or thread, in thread mode)."""

    kind = ProcessKind.WORKER

    def __init__(self, app: Flask, worker: WorkerSettings, **options: t.Any) -> None:
        super().__init__(app, **options)
        self.worker = worker
        self.selector = claim_operation.QueueSelector(worker.queues)
        self.pool: Pool | None = None
        self._backlog = False
        self.finisher: Finisher | None = None
        self._subscription: job_notices.Subscription | None = None
        self.held = HeldJobs()
        #: A claim failed: its jobs may be claimed on the server all the same.
        self._strays_suspected = False
        self._next_sweep = 0.0
        #: The last claim held rate-limited jobs back (no idle thread for them): claim for
        #: idle threads only until a claim holds none back.
        self._holding_back = False
        #: Shared with the supervisor in fork mode (see pool.StartLedger).
        self.start_ledger: StartLedger | None = None
        #: How many seconds the last runs took their threads (see :meth:`_claim_ahead`).
        self._runs: collections.deque[float] = collections.deque(maxlen=RUNS_TIMED)

    @property
    def metadata(self) -> dict[str, t.Any]:
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

    def _claim_ahead(self, pool: Pool) -> None:
        """Size the pool's queue for the jobs as they run now: as many as the threads get
        through in :data:`AHEAD_SECONDS`, by the mean of the last :data:`RUNS_TIMED` runs, and
        at most ``prefetch`` (none before a run was timed). The mean, not a median: with
        quick and slow jobs mixed, what the queued jobs hold up is their total time."""
        runs = list(self._runs)
        ahead = 0
        if runs:
            mean = max(sum(runs) / len(runs), 1e-6)
            ahead = int(self.worker.threads * AHEAD_SECONDS / mean)
        pool.set_ahead(ahead, self.worker.prefetch)

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
        self._next_sweep = time.monotonic() + self.settings.process_heartbeat_interval
        # One connection per thread, open before the first claim (see engines.warm).
        engines.warm(self.engine, self.worker.threads)
        self.finisher.start()
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

    def poll(self) -> float:
        pool = t.cast(Pool, self.pool)
        if self._backlog and not self.worker.prefetch:
            # Jobs are waiting and the threads run them quickly: let the threads about to free
            # up join this claim, so one claim feeds several threads instead of one each.
            pool.wait_for_idle(pool.size, timeout=GATHER_TIMEOUT)
            self._backlog = False
        if self.process_id is None:
            return self.worker.polling_interval
        if self._strays_suspected or time.monotonic() >= self._next_sweep:
            self._release_strays()
        try:
            self._claim(pool)
        except Exception:
            self._strays_suspected = True
            raise
        if pool.idle_threads:
            return self.worker.polling_interval
        return min(BUSY_SLEEP, max(0.0, self._next_sweep - time.monotonic()))

    def _release_strays(self) -> None:
        """Release the claims of this process that none of its threads holds (see the
        module's docstring); if this fails, the next poll tries again before claiming."""
        count = release.release_strays(
            self.engine, t.cast(int, self.process_id), self.held.snapshot()
        )
        self._strays_suspected = False
        self._next_sweep = time.monotonic() + self.settings.process_heartbeat_interval
        if count:
            logger.warning(
                "SolidQ %s %s released %s claims none of its threads held (a claim's reply"
                " was lost); their jobs run again",
                self.kind,
                self.name,
                count,
            )

    def _claim(self, pool: Pool) -> None:
        """Claim what :meth:`_claim_size` says and post it. Claim again at once after a claim
        whose controls deferred jobs (over their rate limit), so the threads don't sit idle
        behind waiting jobs, or after a full claim for the idle threads that leaves room to
        claim ahead; at most :data:`CLAIMS_PER_POLL` claims a poll."""
        for attempt in range(CLAIMS_PER_POLL):
            size = self._claim_size(pool)
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
            self._holding_back = batch.held_back > 0
            self._backlog = len(batch.jobs) == size or self._holding_back
            if batch.deferrals:
                self._announce_deferrals(batch)
            elif not self._backlog:
                return

    def _claim_size(self, pool: Pool) -> int:
        """How many jobs to claim now: the free slots while a backlog lasts (claiming
        ahead), once at least the pool's ``refill_at`` are free or a thread is idle;
        otherwise, or while rate-limited jobs are held back, just the idle threads."""
        idle = pool.idle_threads
        if self.worker.prefetch and self._backlog and not self._holding_back:
            self._claim_ahead(pool)
            free = pool.free_slots
            return free if idle or free >= pool.refill_at else 0
        return idle

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
        self._runs.append(seconds)  # a deque's append is atomic: any thread
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

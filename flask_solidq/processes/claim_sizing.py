"""How many jobs a worker claims at a time: for its idle threads, or ahead of them while a
backlog lasts (its ``prefetch``).

A claim costs about the same whether it takes 1 job or 10, and with one claim per idle thread
the threads of a busy worker mostly wait for the next one. So while a backlog lasts (its last
claim came back full) a worker claims jobs beyond its idle threads, queued in its pool for the
next thread that frees, and refills the queue once half of it ran. How many: what its threads
get through in :data:`AHEAD_SECONDS` by its last runs' mean, at most ``prefetch``. Jobs that
run longer than ``AHEAD_SECONDS`` per thread are never claimed ahead, so a worker doesn't sit
on slow jobs that another worker's idle threads could run (and before it timed a run, it
claims for idle threads only). The claimed-ahead jobs are claims like any other (held, never
stray), but they never count as started:

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
ready jobs another worker's idle threads could run; without ``prefetch``, a backlog makes it
wait a moment for the threads about to free, so one claim feeds several.
"""

from __future__ import annotations

import collections
import typing as t

if t.TYPE_CHECKING:
    from flask_solidq.operations.claim import ClaimBatch
    from flask_solidq.processes.pool import Pool

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


class ClaimSizing:
    """A worker's backlog, and from it the size of its next claim."""

    def __init__(self, threads: int, prefetch: int) -> None:
        self.threads = threads
        self.prefetch = prefetch
        #: The last claim came back full (or held rate-limited jobs back).
        self.backlog = False
        #: The last claim held rate-limited jobs back (no idle thread for them): claim for
        #: idle threads only until a claim holds none back.
        self.holding_back = False
        #: How many seconds the last runs took their threads (see :meth:`_size_ahead`).
        self._runs: collections.deque[float] = collections.deque(maxlen=RUNS_TIMED)

    def timed(self, seconds: float) -> None:
        """A run took its thread ``seconds`` (any thread: a deque's append is atomic)."""
        self._runs.append(seconds)

    def gather(self, pool: Pool) -> None:
        """Without ``prefetch``, while a backlog lasts: let the threads about to free up join
        the next claim, so one claim feeds several threads instead of one each."""
        if self.backlog and not self.prefetch:
            pool.wait_for_idle(pool.size, timeout=GATHER_TIMEOUT)
            self.backlog = False

    def size(self, pool: Pool) -> int:
        """How many jobs to claim now: the free slots while a backlog lasts (claiming
        ahead), once at least the pool's ``refill_at`` are free or a thread is idle;
        otherwise, or while rate-limited jobs are held back, just the idle threads."""
        idle = pool.idle_threads
        if self.prefetch and self.backlog and not self.holding_back:
            self._size_ahead(pool)
            free = pool.free_slots
            return free if idle or free >= pool.refill_at else 0
        return idle

    def claimed(self, batch: ClaimBatch, size: int) -> None:
        """A claim of ``size`` came back with ``batch``: a full one, or one that held
        rate-limited jobs back, means a backlog."""
        self.holding_back = batch.held_back > 0
        self.backlog = len(batch.jobs) == size or self.holding_back

    def _size_ahead(self, pool: Pool) -> None:
        """Size the pool's queue for the jobs as they run now: as many as the threads get
        through in :data:`AHEAD_SECONDS`, by the mean of the last :data:`RUNS_TIMED` runs, and
        at most ``prefetch`` (none before a run was timed). The mean, not a median: with
        quick and slow jobs mixed, what the queued jobs hold up is their total time."""
        runs = list(self._runs)
        ahead = 0
        if runs:
            mean = max(sum(runs) / len(runs), 1e-6)
            ahead = int(self.threads * AHEAD_SECONDS / mean)
        pool.set_ahead(ahead, self.prefetch)

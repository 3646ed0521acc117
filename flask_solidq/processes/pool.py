"""The worker's thread pool: runs claimed jobs, keeps a few claimed ahead, and says when it can
take more.

A pool of ``size`` threads holds up to ``size`` jobs plus those its worker claims ahead
(``prefetch`` at most): those running and those queued for the next thread that frees. A
thread that finishes takes the next queued job itself, so with jobs queued it never waits for
its worker's next claim (a claim costs about the same whatever its size, so claiming ahead
also makes each claim feed more jobs).

Which queued jobs have not started is shared with the supervisor through a
:class:`StartLedger`, so that a worker that dies puts them back to ready instead of failing
them (see :mod:`flask_solidq.processes.forks`).
"""

from __future__ import annotations

import collections
import logging
import mmap
import struct
import threading
import time
import typing as t

logger = logging.getLogger("flask_solidq")

T = t.TypeVar("T")

#: A ledger slot: the job id, then the id XOR :data:`_CHECK` (see :class:`StartLedger`).
_SLOT = struct.Struct("<QQ")
_WORD = struct.Struct("<Q")
_CHECK = 0x5A17_C0DE_5A17_C0DE


class StartLedger:
    """The ids of the jobs a worker process claimed and queued but hasn't started, in memory
    its supervisor reads once the worker died.

    An anonymous shared ``mmap`` made by the supervisor before it forks the worker, one slot
    per job the pool can hold. The pool lists a job when it is queued and unlists it *before*
    a thread starts it, under the pool's lock. So after a death, a listed job never started
    and can go back to ready with no risk of running twice; a job that died between its
    unlisting and its start is not listed and follows ``SOLIDQ_ON_WORKER_DEATH``, failing a
    job that never ran, as a worker dying between its claim and its hand-off already did.

    Each slot holds the id and a check word (the id XOR a constant), written id first and
    cleared check first: a process killed in the middle of either write leaves a slot whose
    check doesn't match, which reads as unlisted (the conservative side).

    Only the worker writes (under its pool's lock); only the supervisor reads, after the
    worker exited, so there is nothing to synchronise between the two.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._memory = mmap.mmap(-1, max(1, slots) * _SLOT.size)
        self._free = list(range(slots - 1, -1, -1))

    def enter(self, job_id: int) -> int | None:
        """Record ``job_id`` as queued and not started; return its slot (None when every slot
        is taken, which a pool within its capacity never meets)."""
        if not self._free or job_id <= 0:
            return None
        slot = self._free.pop()
        offset = slot * _SLOT.size
        _WORD.pack_into(self._memory, offset, job_id)
        _WORD.pack_into(self._memory, offset + _WORD.size, job_id ^ _CHECK)
        return slot

    def clear(self, slot: int) -> None:
        """Forget the job of ``slot``: it is about to start, or went back to ready."""
        offset = slot * _SLOT.size
        _WORD.pack_into(self._memory, offset + _WORD.size, 0)
        _WORD.pack_into(self._memory, offset, 0)
        self._free.append(slot)

    def listed(self) -> list[int]:
        """The job ids listed: queued, never started."""
        if self._memory.closed:
            return []
        ids = []
        for slot in range(self.slots):
            job_id, check = _SLOT.unpack_from(self._memory, slot * _SLOT.size)
            if job_id and check == job_id ^ _CHECK:
                ids.append(job_id)
        return ids

    def close(self) -> None:
        self._memory.close()


@t.runtime_checkable
class UsesStartLedger(t.Protocol):
    """A runner that records its queued jobs in a :class:`StartLedger` (a worker)."""

    def use_start_ledger(self, ledger: StartLedger) -> None: ...


class Queued(t.NamedTuple):
    """A job posted to the pool and not started."""

    function: t.Callable[..., None]
    args: tuple[object, ...]
    job_id: int | None
    slot: int | None


class Pool:
    """``size`` daemon threads running the jobs posted, and holding up to as many more queued
    as :meth:`set_ahead` last said (none until it does).

    When a job ends, ``on_idle`` runs (the worker's wake-up) if the worker may now want to
    claim: a thread became idle, or the free slots just reached ``refill_at``. A pool that
    holds nothing ahead wakes its worker as its first idle thread frees, as a
    claim-per-idle-thread worker needs (the worker counts the idle threads when it claims).

    Daemon threads, unlike ``ThreadPoolExecutor``'s, don't hold the interpreter open at exit:
    a job still running after the shutdown timeout has had its claim released, and must not
    keep the process alive.
    """

    def __init__(
        self,
        size: int,
        on_idle: t.Callable[[], None],
        *,
        ledger: StartLedger | None = None,
        name: str = "solidq-worker",
    ) -> None:
        self.size = size
        #: Jobs running and queued at most: ``size`` until :meth:`set_ahead` says more.
        self.capacity = size
        #: Free slots that wake the worker to refill the queue (see :meth:`set_ahead`).
        self.refill_at = 1
        self.ledger = ledger
        self._on_idle = on_idle
        self._running = 0
        self._queue: collections.deque[Queued] = collections.deque()
        self._closed = False
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._drained = threading.Condition(self._lock)
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{index}", daemon=True)
            for index in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def set_ahead(self, ahead: int, limit: int) -> None:
        """Hold up to ``ahead`` jobs beyond the threads from now on (at most ``limit``, the
        ``prefetch`` the start ledger was sized for), and wake the worker when half of them
        ran."""
        ahead = max(0, min(ahead, limit))
        with self._lock:
            self.capacity = self.size + ahead
            self.refill_at = max(1, (ahead + 1) // 2)

    @property
    def idle_threads(self) -> int:
        """How many threads have nothing to run, counting the queued jobs as theirs: jobs
        posted now start at once on that many threads. Read under the lock: a thread taking
        a job moves it from queued to running in one step, never seen half done."""
        with self._lock:
            return self._idle()

    @property
    def free_slots(self) -> int:
        """How many more jobs may be posted (running and queued stay within the capacity)."""
        with self._lock:
            return self._free()

    def _idle(self) -> int:
        return max(0, self.size - self._running - len(self._queue))

    def _free(self) -> int:
        return max(0, self.capacity - self._running - len(self._queue))

    @property
    def queued(self) -> int:
        """How many posted jobs wait for a thread."""
        return len(self._queue)

    def post(
        self,
        function: t.Callable[..., None],
        *args: object,
        job_id: int | None = None,
        front: bool = False,
    ) -> None:
        """Run ``function(*args)`` on the next thread free; ``front`` puts it ahead of the
        jobs queued. ``job_id`` lists it in the ledger until a thread starts it. The caller
        checked there is a free slot."""
        with self._lock:
            slot = self.ledger.enter(job_id) if self.ledger and job_id is not None else None
            task = Queued(function, args, job_id, slot)
            if front:
                self._queue.appendleft(task)
            else:
                self._queue.append(task)
            self._work.notify()

    def post_each(
        self, function: t.Callable[[T], None], items: t.Sequence[T], job_ids: t.Sequence[int]
    ) -> None:
        """:meth:`post` ``function(item)`` for each of ``items`` in order, each listed under its
        job id: under one hold of the lock, the threads woken once (a worker posts a claim's
        jobs together)."""
        with self._lock:
            ledger = self.ledger
            for item, job_id in zip(items, job_ids, strict=True):
                slot = ledger.enter(job_id) if ledger else None
                self._queue.append(Queued(function, (item,), job_id, slot))
            self._work.notify(len(items))

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._work.wait()
                if not self._queue:
                    return
                task = self._queue.popleft()
                self._running += 1
                # Unlisted before the job starts: a listed job never ran (see StartLedger).
                if task.slot is not None and self.ledger is not None:
                    self.ledger.clear(task.slot)
            try:
                task.function(*task.args)
            except BaseException:  # noqa: BLE001 - a bug of ours: jobs' own errors never get here
                logger.exception("flask-solidq: error in a worker thread")
            finally:
                with self._lock:
                    self._running -= 1
                    self._drained.notify_all()
                    # Only as a thread becomes idle or the free slots reach the refill mark:
                    # once per refill, not after every job past the mark. A ring is a write
                    # to a pipe, which hands the GIL over, and the worker checks the free
                    # slots again after each claim anyway.
                    wake = self._idle() == 1 or self._free() == self.refill_at
                if wake:
                    self._on_idle()

    def wait_for_idle(self, count: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds until at least ``count`` threads are idle."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._idle() < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._drained.wait(remaining)

    def close(self) -> list[Queued]:
        """Stop starting jobs: the threads end once their current job is done. Return the
        queued jobs, which will never start here; they stay listed in the ledger until the
        caller put them back to ready and calls :meth:`unlist`."""
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
            self._work.notify_all()
        return queued

    def unlist(self, tasks: t.Iterable[Queued]) -> None:
        """Forget closed-out ``tasks`` in the ledger (they went back to ready)."""
        with self._lock:
            for task in tasks:
                if task.slot is not None and self.ledger is not None:
                    self.ledger.clear(task.slot)

    def shutdown(self, timeout: float) -> bool:
        """Close the pool (queued jobs are dropped: :meth:`close` first to get them), wait up
        to ``timeout`` seconds for the running jobs, then let the threads go; return whether
        every job finished in time."""
        self.close()
        deadline = time.monotonic() + timeout
        finished = True
        with self._lock:
            while self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    finished = False
                    break
                self._drained.wait(remaining)
        if finished:
            for thread in self._threads:
                thread.join(timeout=1)
        return finished

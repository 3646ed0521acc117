"""The jobs a worker's threads hold, and the sweep that releases the claims none of them holds.

A claim can commit on the server while the worker sees an error (the reply was lost, e.g. a
connection reset): the claimed jobs would then sit in claimed executions under a live
process, untouched by pruning. So the worker keeps the ids of the jobs its threads hold
(:class:`HeldJobs`: posted, until the finisher stored their outcome), and after a failed claim,
and every heartbeat interval, releases the claims of its process that none of its threads
holds (:class:`StraySweep`). It does so between polls, in its own thread, the only one that
claims: a claim it made is either posted (held) or lost with the error.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import typing as t

from flask_solidq.operations import release

if t.TYPE_CHECKING:
    import sqlalchemy as sa

logger = logging.getLogger("flask_solidq")


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


class StraySweep:
    """When a worker releases the claims of its process that none of its threads holds: after
    a claim that failed (:meth:`suspect`), and every ``interval`` seconds."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        #: A claim failed: its jobs may be claimed on the server all the same.
        self.suspected = False
        #: The ``time.monotonic()`` of the next sweep.
        self.next_at = 0.0

    def schedule(self) -> None:
        """Sweep next in ``interval`` seconds from now."""
        self.next_at = time.monotonic() + self.interval

    def suspect(self) -> None:
        """A claim failed: sweep before the next claim."""
        self.suspected = True

    def due(self) -> bool:
        return self.suspected or time.monotonic() >= self.next_at

    def sweep(self, engine: sa.Engine, process_id: int, held: HeldJobs, who: str) -> None:
        """Release the claims of process ``process_id`` that aren't in ``held``, and say how
        many (``who``: the worker, for the log); if this fails, the next poll tries again
        before claiming."""
        count = release.release_strays(engine, process_id, held.snapshot())
        self.suspected = False
        self.schedule()
        if count:
            logger.warning(
                "SolidQ %s released %s claims none of its threads held (a claim's reply"
                " was lost); their jobs run again",
                who,
                count,
            )

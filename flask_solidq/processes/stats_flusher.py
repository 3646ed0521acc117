"""The thread that adds a worker's counted runs
(:class:`~flask_solidq.processes.job_stats.JobStats`) to ``solidq_job_stats`` every
``SOLIDQ_STATS_FLUSH_INTERVAL`` seconds, and once more when the worker stops. A write that
fails keeps its counts for the next one."""

from __future__ import annotations

import logging
import threading

import sqlalchemy as sa

from flask_solidq.processes import job_stats

logger = logging.getLogger("flask_solidq")

#: How many times a stopping worker tries its last write.
FINAL_ATTEMPTS = 3


class StatsFlusher:
    """Writes ``stats`` through ``engine`` every ``interval`` seconds, on a thread of its
    own."""

    def __init__(self, engine: sa.Engine, stats: job_stats.JobStats, interval: float) -> None:
        self.engine = engine
        self.stats = stats
        self.interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="solidq-stats", daemon=True)
        self._failing = False

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop the thread, then write what was counted since its last write (the finisher
        has stored every outcome by then)."""
        self._stopping.set()
        self._thread.join(timeout)
        for _attempt in range(FINAL_ATTEMPTS):
            if self.flush():
                return

    def flush(self) -> bool:
        """Write the runs counted so far; return whether the write succeeded (nothing to
        write succeeds)."""
        buckets = self.stats.take()
        if not buckets:
            return True
        try:
            job_stats.write(self.engine, buckets)
        except Exception:  # the database failed: the counts wait for the next write
            self.stats.give_back(buckets)
            if not self._failing:
                logger.warning("SolidQ couldn't write job statistics; trying again", exc_info=True)
            self._failing = True
            return False
        self._failing = False
        return True

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            self.flush()

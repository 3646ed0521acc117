"""The worker's thread pool: runs claimed jobs and says when a thread frees."""

from __future__ import annotations

import logging
import queue
import threading
import time
import typing as t

logger = logging.getLogger("flask_solidq")

_STOP = object()


class Pool:
    """``size`` daemon threads. A job posted takes an idle thread; when one frees,
    ``on_idle`` runs (the worker's wake-up, so it claims again at once instead of at its next
    poll).

    Daemon threads, unlike ``ThreadPoolExecutor``'s, don't hold the interpreter open at exit:
    a job still running after the shutdown timeout has had its claim released, and must not
    keep the process alive.
    """

    def __init__(
        self, size: int, on_idle: t.Callable[[], None], *, name: str = "solidq-worker"
    ) -> None:
        self.size = size
        self._on_idle = on_idle
        self._available = size
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._tasks: queue.SimpleQueue[t.Any] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"{name}-{index}", daemon=True)
            for index in range(size)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def idle_threads(self) -> int:
        """How many threads have nothing to do."""
        return self._available

    def post(self, function: t.Callable[..., None], *args: t.Any) -> None:
        """Run ``function(*args)`` on an idle thread; the caller checked there is one."""
        with self._lock:
            self._available -= 1
        self._tasks.put((function, args))

    def _serve(self) -> None:
        while True:
            task = self._tasks.get()
            if task is _STOP:
                return
            function, args = task
            try:
                function(*args)
            except BaseException:  # noqa: BLE001 - a bug of ours: jobs' own errors never get here
                logger.exception("flask-solidq: error in a worker thread")
            finally:
                with self._lock:
                    self._available += 1
                    self._drained.notify_all()
                self._on_idle()

    def wait_for_idle(self, count: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds until at least ``count`` threads are idle."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._available < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._drained.wait(remaining)

    def shutdown(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the running jobs, then let the threads go; return
        whether every job finished in time."""
        deadline = time.monotonic() + timeout
        finished = True
        with self._lock:
            while self._available < self.size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    finished = False
                    break
                self._drained.wait(remaining)
        for _ in self._threads:
            self._tasks.put(_STOP)
        if finished:
            for thread in self._threads:
                thread.join(timeout=1)
        return finished

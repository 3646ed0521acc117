"""The dispatcher: makes due scheduled jobs ready, in batches.

Beyond Solid Queue's fixed poll, it sleeps until the next scheduled job is due when that comes
before its polling interval, so a job scheduled for 12:00:00.250 is ready then, not at the
next whole poll; and a job scheduled (or deferred by its rate limit) by this process, another
process of this machine or, on PostgreSQL, any process wakes it early. Jobs it makes ready
wake the workers the same ways. A full batch means a backlog: the next poll runs at once.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import typing as t

from flask_solidq import controls
from flask_solidq.operations import dispatch
from flask_solidq.processes import job_notices
from flask_solidq.processes.host_bell import DISPATCHER
from flask_solidq.processes.poller import Poller
from flask_solidq.storage import db
from flask_solidq.storage import pooler
from flask_solidq.timing import utcnow
from flask_solidq.values import JSONValue
from flask_solidq.values import ProcessKind

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.config import DispatcherSettings
    from flask_solidq.processes.signal_safe_waker import Watched


class Dispatcher(Poller):
    """A dispatcher process (or thread, in thread mode)."""

    kind = ProcessKind.DISPATCHER

    def __init__(
        self, app: Flask, dispatcher: DispatcherSettings, *, supervisor_id: int | None = None
    ) -> None:
        super().__init__(app, supervisor_id=supervisor_id)
        self.dispatcher = dispatcher
        self._wake_at: dt.datetime | None = None
        self._next_maintenance = 0.0
        self._lock = threading.Lock()
        self._subscription: job_notices.Subscription | None = None

    @property
    def metadata(self) -> dict[str, JSONValue]:
        return {
            "polling_interval": self.dispatcher.polling_interval,
            "batch_size": self.dispatcher.batch_size,
            "concurrency_maintenance_interval": self.dispatcher.concurrency_maintenance_interval,
        }

    def boot(self) -> None:
        super().boot()
        job_notices.listen_scheduled(self._scheduled)
        self._subscription = job_notices.Subscription(
            self.engine, DISPATCHER, self._heard, on_gap=self.wake_up
        )

    def shutdown(self) -> None:
        job_notices.forget(self._scheduled)
        if self._subscription is not None:
            self._subscription.close()
        super().shutdown()

    def watched(self) -> list[Watched]:
        return self._subscription.watched() if self._subscription is not None else []

    def poll(self) -> float:
        self._maintain_concurrency()
        batch_size = self.dispatcher.batch_size
        count = dispatch.dispatch_due(
            self.engine, batch_size, skip_locked=self.settings.use_skip_locked
        )
        if count:
            job_notices.announce_ready(self.engine, notified=db.supports_listen_notify(self.engine))
        if count >= batch_size:
            return 0.0
        return self._delay_until(dispatch.next_due_in(self.engine))

    def _maintain_concurrency(self) -> None:
        """Every ``concurrency_maintenance_interval`` (and at start): expire semaphores and
        release blocked jobs their dead holders left stuck."""
        if not self.dispatcher.concurrency_maintenance or time.monotonic() < self._next_maintenance:
            return
        self._next_maintenance = time.monotonic() + self.dispatcher.concurrency_maintenance_interval
        controls.maintain(self.engine, self.dispatcher.batch_size)

    def _delay_until(self, due_in: float | None) -> float:
        """Seconds to sleep: until the next job is due (``due_in`` seconds, by the database's
        clock), at most the polling interval."""
        delay = pooler.polling_interval(self.engine, self.dispatcher.polling_interval)
        if due_in is not None:
            delay = min(delay, due_in)
        with self._lock:
            self._wake_at = utcnow() + dt.timedelta(seconds=delay)
        return delay

    def _heard(self, payload: bytes | str) -> None:
        """Another process scheduled a job (or deferred one) for the time in ``payload``."""
        at = job_notices.decode_time(payload)
        if at is not None:
            self._scheduled(at)

    def _scheduled(self, at: dt.datetime) -> None:
        """A job of this process was scheduled for ``at``: wake up if that's before the time
        this dispatcher meant to wake."""
        with self._lock:
            if self._wake_at is None or at < self._wake_at:
                self._wake_at = at
                self.wake_up()

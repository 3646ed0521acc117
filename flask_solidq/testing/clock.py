"""A clock a test holds still and moves by hand (:func:`flask_solidq.testing.frozen_clock`).

While one is on, every time flask-solidq reads in this process is the clock's: the enqueue's
stamps and due times, the claim's GCRA admissions, the debounce windows, the dispatcher's due
jobs, the retries' waits, and the database's clock as the claim and dispatch read it on
PostgreSQL and MariaDB (:mod:`flask_solidq.storage.database_clock`). They all go through one seam,
:func:`flask_solidq.timing.frozen_at`, so nothing else is patched.

The override is process-wide, not per thread: the threads a test starts (a thread-mode
worker's included) read the frozen time too. Other processes read their real clocks, so a
frozen test runs its jobs in process, with :func:`flask_solidq.testing.work_off`, and starts no
worker meanwhile: its heartbeats, and its supervisor's pruning, would go by the frozen time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import typing as t

from flask_solidq import timing

_lock = threading.Lock()
#: The clock on now, if any: one at a time in a process (see :func:`frozen_clock`).
_active: FrozenClock | None = None


class FrozenClock:
    """The time of this process while :func:`frozen_clock` is on: it moves only when
    :meth:`advance` is called."""

    def __init__(self, start: dt.datetime) -> None:
        self._at = timing.as_utc(start)
        self._on = False

    def now(self) -> dt.datetime:
        """The frozen time, an aware UTC datetime."""
        return self._at

    def advance(self, seconds: float | dt.timedelta) -> dt.datetime:
        """Move the clock forward by ``seconds`` (a number or a timedelta); return the new time.

        :raises ValueError: ``seconds`` is negative: time never goes back, as a rate limit's
            budget and a scheduled job's due time assume.
        :raises RuntimeError: the ``with`` block of this clock has ended.
        """
        step = timing.to_seconds(seconds, name="seconds", allow_zero=True)
        if not self._on:
            raise RuntimeError("This frozen clock's `with` block has ended; it no longer moves.")
        self._at += dt.timedelta(seconds=step)
        timing.set_frozen_at(self._at)
        return self._at

    def __repr__(self) -> str:
        return f"<FrozenClock at {self._at.isoformat()}>"


@contextlib.contextmanager
def frozen_clock(start: dt.datetime | None = None) -> t.Iterator[FrozenClock]:
    """Freeze the time flask-solidq reads in this process for the ``with`` block, and yield
    the clock that moves it (API.md section 9)::

        with frozen_clock() as clock:
            for n in range(10):
                call_api.perform_later(n)        # limits_rate(to=2, per=60, burst=2)
            assert len(work_off()) == 2
            clock.advance(60)
            assert len(work_off()) == 1          # then one a minute: to - burst + 1

    :param start: the time to freeze at (a naive datetime is taken as UTC); default the real
        time now.
    :raises RuntimeError: a frozen clock is on already (one at a time: two would each say
        the time is theirs).
    """
    global _active
    clock = FrozenClock(start if start is not None else timing.utcnow())
    with _lock:
        if _active is not None:
            raise RuntimeError(
                f"A frozen clock is on already ({_active!r}): move it with clock.advance()"
                " instead of nesting frozen_clock()."
            )
        _active = clock
        clock._on = True
        timing.set_frozen_at(clock.now())
    try:
        yield clock
    finally:
        with _lock:
            clock._on = False
            _active = None
            timing.set_frozen_at(None)


def active_clock() -> FrozenClock | None:
    """The frozen clock on now in this process, if any."""
    return _active

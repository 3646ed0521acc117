"""The back-offs this process knows of before the database does.

A job that raises :class:`~flask_solidq.errors.RateLimited` (or code that calls
``solidq.rate_limiter.back_off``) has just been told "stop" by the API. The pause is written to
the budgets' rows (:mod:`~flask_solidq.controls.rate_limit.back_off`), and from that commit on no
claim anywhere admits a job of those budgets; but the commit comes a transaction later, and until
then the process that heard the 429 could claim and start another job of the same budget on a
thread freed a moment before, which bench/rate_limit_429.py showed happening. So the pause is noted
here first, at once, in the thread that heard it, and this process's own claims and starts read it:

* a claim (:class:`~flask_solidq.controls.rate_limit.control.RateLimitControl`) writes a noted pause
  into the budgets it locks, counted from the database's clock, before it admits anything;
* a job about to start (:meth:`.control.RateLimitControl.start`) whose budget is noted as
  paused goes back to wait instead.

The note is by this host's clock (:func:`~flask_solidq.timing.utcnow`: it decides only what
this process does, and a test's frozen clock moves it as it moves the stored pause); it holds
for the pause's length from the moment it was heard, a hair longer than the stored pause,
which is counted from a later reading of the database's clock. A note never shortens a longer
one. Notes are forgotten once over, so the board holds only the pauses in force.
"""

from __future__ import annotations

import datetime as dt
import threading
import typing as t

from flask_solidq.timing import utcnow

if t.TYPE_CHECKING:
    from flask_solidq.controls.rate_limit.budgets import Locked


class PauseBoard:
    """Budget key -> when its pause ends, shared by the threads of one process."""

    def __init__(self) -> None:
        self._until: dict[str, dt.datetime] = {}
        self._lock = threading.Lock()

    def note(self, keys: t.Iterable[str], seconds: float) -> None:
        """Note that the budgets of ``keys`` admit nothing for ``seconds`` from now."""
        if seconds <= 0:
            return
        end = utcnow() + dt.timedelta(seconds=seconds)
        with self._lock:
            for key in keys:
                known = self._until.get(key)
                if known is None or known < end:
                    self._until[key] = end

    def remaining(self, keys: t.Iterable[str]) -> float:
        """The seconds until the last of ``keys``' noted pauses ends; 0.0 when none holds."""
        if not self._until:  # the usual case, read without the lock: no pause noted at all
            return 0.0
        now = utcnow()
        longest = 0.0
        with self._lock:
            for key in keys:
                end = self._until.get(key)
                if end is None:
                    continue
                if end <= now:
                    del self._until[key]
                else:
                    longest = max(longest, (end - now).total_seconds())
        return longest

    def forget(self) -> None:
        """Forget every note (tests; a fresh process starts with none)."""
        with self._lock:
            self._until.clear()


#: This process's board.
BOARD = PauseBoard()


def write_into(locked: Locked, keys: t.Iterable[str], now: dt.datetime) -> bool:
    """Write into the ``locked`` budgets of ``keys`` the pauses this process noted and may
    not have stored yet, counted from ``now`` (the database's clock the caller read under the
    locks); say whether any was. A claim or an ``acquire`` then admits nothing of them, and
    its commit stores the pause for every other process."""
    written = False
    for key in keys:
        remaining = BOARD.remaining([key])
        if remaining:
            locked[key].back_off(now + dt.timedelta(seconds=remaining))
            written = True
    return written

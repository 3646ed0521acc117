"""Jobs for the frozen clock's tests (:mod:`tests.testing.test_frozen_clock`), run in process
by ``work_off``. Each notes its call, and the frozen time it ran at, in :data:`PERFORMED`.

Every name starts with ``clock_test.`` (job names are process-wide).
"""

from __future__ import annotations

import datetime as dt
import typing as t

import sqlalchemy as sa

from flask_solidq import coalesce
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import retry_on
from flask_solidq.models.tables import BLOCKED
from flask_solidq.state import get_state
from flask_solidq.timing import utcnow
from tests.support import solidq

#: (job name, arguments, the time it ran at) of every job performed in this process.
PERFORMED: list[tuple[str, tuple[t.Any, ...], dt.datetime]] = []

#: :func:`debounced`'s window, in seconds.
WINDOW = 30.0
#: :func:`flaky`'s wait between attempts, in seconds.
RETRY_WAIT = 5.0
#: :func:`serial`'s concurrency lease, in seconds.
DURATION = 120.0
#: How many times :func:`flaky` raises before it succeeds.
FAILURES = {"left": 0}


class Flaky(Exception):
    """Raised by :func:`flaky` while ``FAILURES["left"]``."""


def _note(name: str, *args: t.Any) -> None:
    PERFORMED.append((name, args, utcnow()))


@solidq.job(name="clock_test.plain")
def plain(note: object = None) -> None:
    _note("clock_test.plain", note)


@solidq.job(name="clock_test.forever")
def forever(n: int) -> None:
    """Enqueues itself again each time it runs."""
    _note("clock_test.forever", n)
    forever.perform_later(n + 1)


@solidq.job(name="clock_test.call_api")
@limits_rate(to=2, per=dt.timedelta(minutes=1), burst=2, key="global")
def call_api(note: object = None) -> None:
    """The issue's recipe: at most two calls in any minute, two of them at once (then one a
    minute: ``to - burst + 1``)."""
    _note("clock_test.call_api", note)


@solidq.job(name="clock_test.debounced")
@coalesce(key=lambda key, *_: key, on_conflict="replace", debounce=WINDOW)
def debounced(key: object, note: object = None) -> None:
    """Runs once, with the latest call's arguments, ``WINDOW`` s after the last call."""
    _note("clock_test.debounced", key, note)


@solidq.job(name="clock_test.flaky")
@retry_on(Flaky, wait=RETRY_WAIT, attempts=5, jitter=0)
def flaky(note: object = None) -> None:
    _note("clock_test.flaky", note)
    if FAILURES["left"] > 0:
        FAILURES["left"] -= 1
        raise Flaky(f"{FAILURES['left']} failures left")


@solidq.job(name="clock_test.serial")
@limits_concurrency(to=1, key="global", duration=DURATION)
def serial(note: object = None) -> None:
    """One at a time: the next waits, blocked, until this one finished."""
    _note("clock_test.serial", note)
    with get_state().engine.connect() as connection:
        BLOCKED_WHILE_SERIAL_RAN.append(
            connection.scalar(sa.select(sa.func.count()).select_from(BLOCKED))
        )


#: How many jobs were blocked as each :func:`serial` job ran.
BLOCKED_WHILE_SERIAL_RAN: list[int] = []

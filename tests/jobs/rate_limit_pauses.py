"""Jobs for the tests of a back-off that holds at once
(:mod:`tests.controls.rate_limit.test_rate_limit_pause_at_once`), claimed and performed by the tests
in their own process. Each notes its run in :data:`PERFORMED`.

The limit is the one the issue measured: 20 a second, 5 at once, so one every 62.5 ms once
the burst is spent, and a claim within 50 ms of the next admission is charged ahead for it.
"""

from __future__ import annotations

import typing as t

from flask_solidq import RateLimited
from flask_solidq import limits_rate
from tests.support import solidq

#: (job name, note) of every run performed in this process.
PERFORMED: list[tuple[str, str]] = []

#: The budget every job here charges.
KEY = "pause_test.call/global"

#: The ``retry_after`` the API answers with, in seconds.
PAUSE = 2.0


@solidq.job(name="pause_test.call")
@limits_rate(to=20, per=1, burst=5, key="global")
def call(note: str, answer: str = "ok") -> None:
    """Call the fake API: ``answer`` is what it says back. ``"429"`` raises ``RateLimited``;
    ``"back_off"`` pauses the budget from inside the run, which then goes on and finishes."""
    PERFORMED.append(("pause_test.call", note))
    if answer == "429":
        raise RateLimited(retry_after=PAUSE)
    if answer == "back_off":
        solidq.rate_limiter.back_off(KEY, seconds=PAUSE)


#: A named budget of one call a minute, which :func:`acquiring` takes from inside its run.
OUTSIDE = solidq.rate_limiter.register("pause_test.outside", to=1, per=60)


@solidq.job(name="pause_test.acquiring")
@limits_rate(to=20, per=1, burst=5, key="global")
def acquiring(note: str) -> None:
    """Take an admission of :data:`OUTSIDE` without waiting: refused, ``acquire`` raises
    ``RateLimited`` with the budget's key, which no API said."""
    with solidq.rate_limiter.acquire(OUTSIDE, timeout=0):
        PERFORMED.append(("pause_test.acquiring", note))


def performed(notes: t.Iterable[str] | None = None) -> list[str]:
    """The notes of the runs performed (of ``notes`` only, when given), in order."""
    wanted = None if notes is None else set(notes)
    return [note for _name, note in PERFORMED if wanted is None or note in wanted]

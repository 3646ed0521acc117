"""Jobs for the debounce and ``max_wait`` tests
(:mod:`tests.controls.coalesce.test_coalesce_debounce`): the seed's "Debouncing", "Scheduling
timelines" and "Collecting jobs and scheduling" recipes. Each notes what it ran in
:data:`PERFORMED`.

Every name starts with ``coalesce_debounce_test.`` (job names are process-wide).
"""

from __future__ import annotations

import typing as t

from flask_solidq import coalesce
from flask_solidq import limits_concurrency
from flask_solidq import retry_on
from tests.support import solidq

#: The debounce window of most jobs here, and the cap of :func:`capped`, in seconds.
WINDOW = 30.0
CAP = 40.0

#: The window of :func:`sync_contact` (the seed's "Sync the latest state" recipe).
SYNC_WINDOW = 10.0

#: The wait of :func:`retried`'s ``retry_on``.
RETRY_WAIT = 5.0

#: (job name, what it ran) of every job performed in this process.
PERFORMED: list[tuple[str, t.Any]] = []


class Flaky(Exception):
    """Raised by :func:`retried` on its first attempt."""


@solidq.job(name="coalesce_debounce_test.fixed")
@coalesce(key=lambda key, *_: key)
def fixed(key: object, note: object = None) -> None:
    """No debounce: a job takes its time from its first call."""
    PERFORMED.append(("coalesce_debounce_test.fixed", (key, note)))


@solidq.job(name="coalesce_debounce_test.debounced")
@coalesce(key=lambda key, *_: key, debounce=WINDOW)
def debounced(key: object, note: object = None) -> None:
    """``debounce=30``, no cap."""
    PERFORMED.append(("coalesce_debounce_test.debounced", (key, note)))


@solidq.job(name="coalesce_debounce_test.capped")
@coalesce(key=lambda key, *_: key, debounce=WINDOW, max_wait=CAP)
def capped(key: object, note: object = None) -> None:
    """``debounce=30, max_wait=40``: the seed's timeline with a limit."""
    PERFORMED.append(("coalesce_debounce_test.capped", (key, note)))


@solidq.job(name="coalesce_debounce_test.sync_contact")
@coalesce(key=lambda user_id, *_: user_id, on_conflict="replace", debounce=SYNC_WINDOW)
@limits_concurrency(key=lambda user_id, *_: user_id, duration=120)
def sync_contact(user_id: object, attributes: object = None) -> None:
    """The seed's "Sync the latest state one at a time" recipe (without the rate limit)."""
    PERFORMED.append(("coalesce_debounce_test.sync_contact", (user_id, attributes)))


@solidq.job(name="coalesce_debounce_test.blocked")
@coalesce(key=lambda key, *_: key, debounce=WINDOW)
@limits_concurrency(to=1, key="global", duration=120, on_conflict="block")
def blocked(key: object, note: object = None) -> None:
    """Debounced per key, one run at a time across keys."""
    PERFORMED.append(("coalesce_debounce_test.blocked", (key, note)))


@solidq.job(name="coalesce_debounce_test.collect_dispatch")
@coalesce(key=lambda key, *_: key, on_conflict="collect", max_calls=2, on_full="dispatch")
def collect_dispatch(calls: list[t.Any]) -> None:
    """The seed's "Collect until N calls or T seconds" timeline (the wait is the caller's)."""
    PERFORMED.append(("coalesce_debounce_test.collect_dispatch", [call.args for call in calls]))


@solidq.job(name="coalesce_debounce_test.collect_wait_debounced")
@coalesce(
    key=lambda key, *_: key,
    on_conflict="collect",
    max_calls=2,
    on_full="wait",
    debounce=WINDOW,
    max_wait=CAP,
)
def collect_wait_debounced(calls: list[t.Any]) -> None:
    """Collecting and debounced; a full job waits for its time."""
    PERFORMED.append(("coalesce_debounce_test.collect_wait_debounced", [c.args for c in calls]))


@solidq.job(name="coalesce_debounce_test.collect_dispatch_debounced")
@coalesce(
    key=lambda key, *_: key,
    on_conflict="collect",
    max_calls=2,
    on_full="dispatch",
    debounce=WINDOW,
    max_wait=CAP,
)
def collect_dispatch_debounced(calls: list[t.Any]) -> None:
    """The seed's "Collect until calls stop": quiet, full or at the cap, whichever first."""
    PERFORMED.append(("coalesce_debounce_test.collect_dispatch_debounced", [c.args for c in calls]))


@solidq.job(name="coalesce_debounce_test.retried")
@coalesce(key=lambda key, *_: key, debounce=WINDOW, max_wait=CAP)
@retry_on(Flaky, wait=RETRY_WAIT, attempts=2, jitter=0)
def retried(key: object, note: object = None) -> None:
    """Debounced, and raises :class:`Flaky` on its first attempt only."""
    PERFORMED.append(("coalesce_debounce_test.retried", (key, note)))
    if len([name for name, _ in PERFORMED if name == "coalesce_debounce_test.retried"]) == 1:
        raise Flaky("first attempt")

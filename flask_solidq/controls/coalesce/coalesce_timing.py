"""When a coalesced call wants its job to come due: three rules, in order.

1. ``set(wait=)`` or ``set(wait_until=)`` replaces the window for that call;
2. otherwise the call's time is now plus ``debounce`` (on a debounced definition a plain
   ``perform_later`` waits for the window instead of running at once);
3. ``max_wait`` caps both: a call that creates a job can't ask for more than ``max_wait`` from
   now, and a call that joins can't move the job past ``max_wait`` from when it opened.

Then a job only moves later, by more than :data:`MIN_MOVE`, and only while it is scheduled
(the admission checks that). Without ``debounce``, calls that join never move their job, and
the call that creates one keeps its own schedule. Pure functions, so the rules are tested on
their own (tests/controls/coalesce/test_coalesce_timing.py).
"""

from __future__ import annotations

import datetime as dt
import typing as t

if t.TYPE_CHECKING:
    from flask_solidq.definitions.coalescing import Coalesce

#: The least a call moves a job: a hot key then doesn't write on every call, and the
#: dispatcher polls every second by default anyway.
MIN_MOVE = dt.timedelta(seconds=1)


def wanted(
    declaration: Coalesce, requested: dt.datetime | None, explicit: bool, now: dt.datetime
) -> dt.datetime | None:
    """Rules 1 and 2: when this call wants its job to come due, before the cap; None for
    "now, and no opinion" (a plain call on a definition without ``debounce``).

    :param requested: the call's own schedule (``set(wait=)``/``set(wait_until=)``), if any.
    :param explicit: whether the call set a wait at all (``set(wait=0)`` is explicit).
    """
    if explicit:
        return requested or now
    if declaration.debounce is not None:
        return now + dt.timedelta(seconds=declaration.debounce)
    return None


def for_new_job(
    declaration: Coalesce, wanted_at: dt.datetime | None, now: dt.datetime
) -> dt.datetime | None:
    """Rule 3 for a call that creates a job: its scheduled time (None: due now)."""
    if wanted_at is None or declaration.max_wait is None:
        return wanted_at
    return min(wanted_at, now + dt.timedelta(seconds=declaration.max_wait))


def for_joined_job(
    declaration: Coalesce, wanted_at: dt.datetime | None, opened_at: dt.datetime
) -> dt.datetime | None:
    """Rule 3 for calls that join a job opened at ``opened_at``: the time they move it to,
    or None when they don't move it (no ``debounce``, or no time asked for)."""
    if declaration.debounce is None or wanted_at is None:
        return None
    if declaration.max_wait is None:
        return wanted_at
    return min(wanted_at, opened_at + dt.timedelta(seconds=declaration.max_wait))


def moves(current: dt.datetime, target: dt.datetime | None) -> bool:
    """Whether a scheduled job due at ``current`` moves to ``target``: only later, and by
    more than :data:`MIN_MOVE`."""
    return target is not None and target > current + MIN_MOVE


def latest(times: t.Iterable[dt.datetime | None]) -> dt.datetime | None:
    """The latest of ``times`` (one admission of several calls moves its job once, to the
    latest time among them); None when none is given."""
    given = [time for time in times if time is not None]
    return max(given) if given else None

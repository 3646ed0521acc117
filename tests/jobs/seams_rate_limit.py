"""Jobs for the rate limit's seams with the other controls and the tools
(:mod:`tests.controls.rate_limit.test_seams_rate_limit`, issue 19), claimed by the tests in-process
except where a worker process is the point. They note what they ran in :data:`PERFORMED`.

Every name starts with ``seams_rate.`` (job names are process-wide). Unless said otherwise a
limit is ``to=1, per=60``: one claim a minute, so a second claim of a budget is always
deferred, to a slot a whole minute on.
"""

from __future__ import annotations

import typing as t

from flask_solidq import coalesce
from flask_solidq import current_job
from flask_solidq import limits_rate
from flask_solidq import retry_on
from tests.support import solidq

#: (job name, what it ran) of every job performed in this process: the arguments, or for a
#: collecting job the list of its calls as ``(id, args)``.
PERFORMED: list[tuple[str, t.Any]] = []

#: What each run of :func:`attempted` saw of its attempt counters:
#: ``(executions, exception_executions)``.
ATTEMPTS: list[tuple[int, dict[str, int]]] = []

#: The arguments each call of :func:`counted`'s key callable got: a key callable must run
#: only when the database queue enqueues.
KEY_CALLS: list[tuple[t.Any, ...]] = []

#: The group :func:`strict` and :func:`loose` share one budget through, with different limits.
MIXED = "seams_rate.Mixed"

#: :func:`debounced`'s window, in seconds.
WINDOW = 10.0

#: How many calls fill a :func:`collect_dispatch` job.
MAX_CALLS = 3


class Flaky(Exception):
    """Raised by :func:`attempted` on its first run."""


def _calls(calls: list[t.Any]) -> list[tuple[t.Any, tuple[t.Any, ...]]]:
    return [(call.id, tuple(call.args)) for call in calls]


@solidq.job(name="seams_rate.collect")
@coalesce(key=lambda shop, *_: shop, on_conflict="collect")
@limits_rate(to=1, per=60, key="global")
def collect(calls: list[t.Any]) -> None:
    """The seed's bulk recipe: calls collect per shop, one claim a minute across shops."""
    PERFORMED.append(("seams_rate.collect", _calls(calls)))


@solidq.job(name="seams_rate.replace")
@coalesce(key=lambda user, *_: user, on_conflict="replace")
@limits_rate(to=1, per=60, key="global")
def replace(user: str, attributes: object = None) -> None:
    """The seed's "Sync the latest state" recipe, without the concurrency limit: the job runs
    the latest call's arguments."""
    PERFORMED.append(("seams_rate.replace", (user, attributes)))


@solidq.job(name="seams_rate.collect_dispatch")
@coalesce(key=lambda shop, *_: shop, on_conflict="collect", max_calls=MAX_CALLS, on_full="dispatch")
@limits_rate(to=1, per=60, key="global")
def collect_dispatch(calls: list[t.Any]) -> None:
    """A job full at :data:`MAX_CALLS` calls is dispatched at once, wherever it waits."""
    PERFORMED.append(("seams_rate.collect_dispatch", _calls(calls)))


@solidq.job(name="seams_rate.debounced")
@coalesce(key=lambda shop, *_: shop, on_conflict="collect", debounce=WINDOW)
@limits_rate(to=1, per=60, key="global")
def debounced(calls: list[t.Any]) -> None:
    """Each call pushes its shop's job back to :data:`WINDOW` seconds after it."""
    PERFORMED.append(("seams_rate.debounced", _calls(calls)))


@solidq.job(name="seams_rate.debounced_capped")
@coalesce(key=lambda shop, *_: shop, on_conflict="collect", debounce=WINDOW, max_wait=3 * WINDOW)
@limits_rate(to=1, per=60, key="global")
def debounced_capped(calls: list[t.Any]) -> None:
    """As :func:`debounced`, and never moved past 30 s after its job opened."""
    PERFORMED.append(("seams_rate.debounced_capped", _calls(calls)))


@solidq.job(name="seams_rate.attempted")
@limits_rate(to=1, per=60, key="global")
@retry_on(Flaky, wait=0, attempts=2)
def attempted(note: object = None) -> None:
    """Notes its attempt counters; raises :class:`Flaky` on its first run when ``note`` is
    ``"flaky"`` (retried at once, two attempts in all)."""
    ATTEMPTS.append((current_job.executions, dict(current_job.exception_executions)))
    PERFORMED.append(("seams_rate.attempted", (note,)))
    if note == "flaky" and current_job.executions == 1:
        raise Flaky("the first run fails")


@solidq.job(name="seams_rate.strict")
@limits_rate(to=1, per=60, key="global", group=MIXED)
def strict(note: object = None) -> None:
    """One a minute (T = 60 s, no burst), in :data:`MIXED`."""
    PERFORMED.append(("seams_rate.strict", (note,)))


@solidq.job(name="seams_rate.loose")
@limits_rate(to=4, per=60, burst=2, key="global", group=MIXED)
def loose(note: object = None) -> None:
    """Four a minute, two at once (T = 60 / 3 = 20 s, tolerance 20 s), in :data:`MIXED`."""
    PERFORMED.append(("seams_rate.loose", (note,)))


def _counted_key(account: str, *_: t.Any) -> str:
    KEY_CALLS.append((account, *_))
    return account


@solidq.job(name="seams_rate.counted")
@limits_rate(to=1, per=60, key=_counted_key)
def counted(account: str, note: object = None) -> None:
    """A budget per account, from a key callable that notes each call in :data:`KEY_CALLS`."""
    PERFORMED.append(("seams_rate.counted", (account, note)))


@solidq.job(name="seams_rate.hourly")
@limits_rate(to=1, per=3600, key="global")
def hourly(note: object = None) -> None:
    """One an hour: a spent budget sends every claim of it to look again in five minutes
    (no slot that near), so a deferral's time tells the claim's clock."""
    PERFORMED.append(("seams_rate.hourly", (note,)))


@solidq.job(name="seams_rate.unlimited")
def unlimited(note: object = None) -> None:
    PERFORMED.append(("seams_rate.unlimited", (note,)))

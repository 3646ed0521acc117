"""Jobs for the database-level rate-limit tests (``limits_rate``), claimed by the tests
directly (:mod:`tests.controls.rate_limit.test_rate_limit_claims`). They do nothing but note their
call in :data:`PERFORMED`.

Every name starts with ``rate_test.`` (job names are process-wide). Unless said otherwise a
limit is ``to=1, per=60``: one claim a minute, so a second claim of a budget is always
deferred, to a slot a whole minute on.
"""

from __future__ import annotations

import typing as t

from flask_solidq import RateLimited
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import retry_on
from tests.support import solidq

#: (job name, arguments) of every job performed in this process.
PERFORMED: list[tuple[str, tuple[t.Any, ...]]] = []

#: What :func:`versioned`'s and :func:`retried`'s keys end with; a test changes it to show
#: that a job keeps the key it was enqueued with.
KEY_VERSION = {"version": "v1"}

#: The group :func:`sync_orders` and :func:`refund_orders` share a budget through.
SHARED = "rate_test.Shared"

#: The ``duration`` of :func:`serial`'s concurrency limit, in seconds.
DURATION = 120.0


class Flaky(Exception):
    """Raised by :func:`retried`, which retries on it."""


class KeyUnavailable(LookupError):
    """Raised by :func:`raising_key`'s key callable."""


@solidq.job(name="rate_test.global")
@limits_rate(to=1, per=60, key="global")
def global_job(note: object = None) -> None:
    """One budget for every call: ``rate_test.global/global``."""
    PERFORMED.append(("rate_test.global", (note,)))


@solidq.job(name="rate_test.staggered")
@limits_rate(to=10, per=10, burst=2, key="global")
def staggered(note: object = None) -> None:
    """Two at once, then one every 10 / 9 s (1.111112 s, rounded up)."""
    PERFORMED.append(("rate_test.staggered", (note,)))


@solidq.job(name="rate_test.slow")
@limits_rate(to=1, per=100, key="global")
def slow(note: object = None) -> None:
    """One every 100 s: three slots fit in the five minutes ahead."""
    PERFORMED.append(("rate_test.slow", (note,)))


@solidq.job(name="rate_test.per_account")
@limits_rate(to=1, per=60, key=lambda account, *_: account)
def per_account(account: str, note: object = None) -> None:
    """A budget per account: ``rate_test.per_account/<account>``."""
    PERFORMED.append(("rate_test.per_account", (account, note)))


@solidq.job(name="rate_test.bare")
@limits_rate(to=1, per=60, key=lambda *_: None)
def bare(note: object = None) -> None:
    """A key callable that returns None: the bare budget ``rate_test.bare``."""
    PERFORMED.append(("rate_test.bare", (note,)))


@solidq.job(name="rate_test.blank")
@limits_rate(to=1, per=60, key=lambda *_: None, group=lambda *_: None)
def blank(note: object = None) -> None:
    """A key that comes out blank: stored as "", and the job isn't limited."""
    PERFORMED.append(("rate_test.blank", (note,)))


@solidq.job(name="rate_test.sync_orders")
@limits_rate(to=1, per=60, key="global", group=SHARED)
def sync_orders(note: object = None) -> None:
    """Shares ``rate_test.Shared/global`` with :func:`refund_orders`."""
    PERFORMED.append(("rate_test.sync_orders", (note,)))


@solidq.job(name="rate_test.refund_orders")
@limits_rate(to=1, per=60, key="global", group=SHARED)
def refund_orders(note: object = None) -> None:
    """Shares ``rate_test.Shared/global`` with :func:`sync_orders`."""
    PERFORMED.append(("rate_test.refund_orders", (note,)))


@limits_rate(to=1, per=60, key=lambda account: account)
class AccountSync(solidq.Job, name="rate_test.account_sync"):
    """The class form: ``rate_test.account_sync/<account>``."""

    def perform(self, account: str) -> None:
        PERFORMED.append(("rate_test.account_sync", (account,)))


@solidq.job(name="rate_test.serial")
@limits_concurrency(key=lambda account, *_: account, to=1, duration=DURATION)
@limits_rate(to=1, per=60, key="global")
def serial(account: str, note: object = None) -> None:
    """One at a time per account (``rate_test.serial/<account>``), one claim a minute across
    all accounts (``rate_test.serial/global``)."""
    PERFORMED.append(("rate_test.serial", (account, note)))


@solidq.job(name="rate_test.by_value")
@limits_rate(to=1, per=60, key=lambda value: value)
def by_value(value: str) -> None:
    """The key is the argument as given: long keys, keys that differ only in case."""
    PERFORMED.append(("rate_test.by_value", (value,)))


def _unavailable_key(account: str) -> str:
    raise KeyUnavailable(f"no budget key for {account}")


@solidq.job(name="rate_test.raising_key")
@limits_rate(to=1, per=60, key=_unavailable_key)
def raising_key(account: str) -> None:
    PERFORMED.append(("rate_test.raising_key", (account,)))


@solidq.job(name="rate_test.versioned")
@limits_rate(to=1, per=60, key=lambda account: [account, KEY_VERSION["version"]])
def versioned(account: str) -> None:
    """The key ends with :data:`KEY_VERSION` as it was at enqueue."""
    PERFORMED.append(("rate_test.versioned", (account,)))


@solidq.job(name="rate_test.retried")
@limits_rate(to=1, per=60, key=lambda account: [account, KEY_VERSION["version"]])
@retry_on(Flaky, wait=0, attempts=3)
def retried(account: str) -> None:
    """Always raises :class:`Flaky`, retried at once."""
    PERFORMED.append(("rate_test.retried", (account,)))
    raise Flaky(f"flaky for {account}")


@solidq.job(name="rate_test.unlimited")
def unlimited(note: object = None) -> None:
    PERFORMED.append(("rate_test.unlimited", (note,)))


#: How many times each call of the throttled jobs below ran, by its note.
THROTTLED_CALLS: dict[str, int] = {}

#: The ``retry_after`` the throttled jobs raise, in seconds.
PAUSE = 0.5


def _answer(note: str, fail_times: int) -> None:
    """Fake an API that answers 429 to the first ``fail_times`` calls of ``note``."""
    THROTTLED_CALLS[note] = THROTTLED_CALLS.get(note, 0) + 1
    if THROTTLED_CALLS[note] <= fail_times:
        raise RateLimited(retry_after=PAUSE)


@solidq.job(name="rate_test.throttled")
@limits_rate(to=4, per=1, burst=2, key="global")
def throttled(note: str, fail_times: int = 0) -> None:
    """Two at once, then one every 1/3 s; the API says 429 to its first ``fail_times`` calls."""
    _answer(note, fail_times)
    PERFORMED.append(("rate_test.throttled", (note, fail_times)))


@solidq.job(name="rate_test.throttled_serial")
@limits_concurrency(key=lambda account, *_: account, to=1, duration=DURATION)
@limits_rate(to=10, per=1, key="global")
def throttled_serial(account: str, note: str, fail_times: int = 0) -> None:
    """One at a time per account; the API says 429 to its first ``fail_times`` calls."""
    _answer(note, fail_times)
    PERFORMED.append(("rate_test.throttled_serial", (account, note)))


@solidq.job(name="rate_test.throttled_unlimited")
def throttled_unlimited(note: str, fail_times: int = 0) -> None:
    """No rate limit (no budget to pause); the API says 429 to its first ``fail_times``."""
    _answer(note, fail_times)
    PERFORMED.append(("rate_test.throttled_unlimited", (note,)))


@solidq.job(name="rate_test.throttled_retrying")
@retry_on(Exception, wait=0, attempts=3)
@limits_rate(to=10, per=1, key="global")
def throttled_retrying(note: str, fail_times: int = 0) -> None:
    """Retries on any error, yet a 429 is no error it counts."""
    _answer(note, fail_times)

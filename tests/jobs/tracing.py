"""Jobs for the tracing tests (tests/tracing/): what their spans record when they finish, fail,
are retried, wait on a rate limit or coalesce. Every name starts with ``tracing_test.``."""

from __future__ import annotations

from flask_solidq import RateLimited
from flask_solidq import coalesce
from flask_solidq import limits_rate
from flask_solidq import retry_on
from tests.support import solidq


class Flaky(Exception):
    """Raised by :func:`flaky`, which retries on it."""


@solidq.job(name="tracing_test.noop")
def noop(value: object) -> None:
    """Nothing."""


@solidq.job(name="tracing_test.boom")
def boom(value: object) -> None:
    """Fails at once."""
    raise ValueError(f"boom {value}")


@solidq.job(name="tracing_test.flaky")
@retry_on(Flaky, attempts=2, wait=0)
def flaky(value: object) -> None:
    """Raises :class:`Flaky`: retried once, then failed."""
    raise Flaky(f"flaky {value}")


@solidq.job(name="tracing_test.limited")
@limits_rate(to=1, per=3600)
def limited(value: object) -> None:
    """One run an hour: a second job waits, deferred by its claim."""


@solidq.job(name="tracing_test.merged")
@coalesce(key=lambda value: "one")
def merged(value: object) -> None:
    """Every call while one is waiting joins it (the later ones discarded)."""


@solidq.job(name="tracing_test.told_to_wait")
@limits_rate(to=100, per=1, key="tracing_test_api")
def told_to_wait(value: object) -> None:
    """The API it calls says 429: waits 30 seconds, deferred."""
    raise RateLimited(retry_after=30)

"""Jobs for the ``flask solidq work --once`` tests, beside those of :mod:`tests.jobs.worker`
(whose run table they write to): one that enqueues another, one whose rate limit admits one
run an hour, one that holds a concurrency key alone. Kept out of ``worker_app``: a
rate-limited definition changes how every claim of its workers reads the candidates.

Every name starts with ``once_test.`` (job names are process-wide).
"""

from __future__ import annotations

from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from tests.jobs import worker
from tests.support import solidq


@solidq.job(name="once_test.enqueue_record")
def enqueue_record(value: object) -> None:
    """A run row, then a ``worker_test.record`` job of ``<value>-child``, due at once."""
    worker.record_run("once_test.enqueue_record", value)
    worker.record.perform_later(f"{value}-child")


@solidq.job(name="once_test.hourly")
@limits_rate(to=1, per=3600, burst=1, key="all")
def hourly(value: object) -> None:
    """A run row; its budget admits one run an hour, so the rest wait (deferred)."""
    worker.record_run("once_test.hourly", value)


@solidq.job(name="once_test.exclusive")
@limits_concurrency(to=1, key="one")
def exclusive(value: object) -> None:
    """A run row; one at a time (the concurrency key ``one``)."""
    worker.record_run("once_test.exclusive", value)

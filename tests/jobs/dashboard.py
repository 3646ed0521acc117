"""Jobs for the dashboard's view tests (tests/dashboard/test_dashboard.py).

A job raises while its note is in :data:`FAILURES` (with the exception class given there), so a
test decides which runs fail, and a retried job can then run and finish. :func:`hostile` always
fails, with its text as the error message and as its concurrency key, to show that the
dashboard escapes arguments, keys and errors.

Every name starts with ``dashboard_test.`` (job names are process-wide).
"""

from __future__ import annotations

from flask_solidq import limits_concurrency
from tests.support import solidq

#: note -> the exception class a run of a job with that note raises.
FAILURES: dict[str, type[Exception]] = {}

#: A concurrency-limited job's slot lasts this long (longer than any test).
DURATION = 120.0


def run(job_name: str, note: str) -> None:
    """Raise the exception :data:`FAILURES` gives ``note``, if any."""
    failure = FAILURES.get(note)
    if failure is not None:
        raise failure(f"{job_name} failed on purpose for {note}")


@solidq.job(name="dashboard_test.task")
def task(note: str) -> None:
    run("dashboard_test.task", note)


@solidq.job(name="dashboard_test.other")
def other(note: str) -> None:
    run("dashboard_test.other", note)


@solidq.job(name="dashboard_test.hostile")
@limits_concurrency(key=lambda text: text, to=1, duration=DURATION)
def hostile(text: str) -> None:
    """Fail with ``text`` as the message: markup in arguments, key and error at once."""
    raise ValueError(text)

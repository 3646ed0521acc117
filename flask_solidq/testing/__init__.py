"""Helpers for testing an app that enqueues jobs (API.md section 9).

With ``SOLIDQ_ADAPTER = "test"``, ``perform_later`` only records jobs; these helpers read,
check and perform what was recorded. Jobs still go through argument serialization, so an
argument the database queue couldn't store fails here too. Controls don't act. Each helper
needs an application context (pytest-flask pushes one for tests that use ``app``)::

    def test_signup_enqueues_welcome_mail(app, client):
        with assert_enqueued_with(job=send_welcome_mail, args=(1,)):
            client.post("/signup", data={...})
        perform_enqueued_jobs()

``solidq.batch()`` works too: the batch is kept in memory, and its callbacks are recorded
once its last job is performed (:mod:`.batches`). The pytest plugin (:mod:`.pytest_plugin`)
adds a ``solidq_jobs`` fixture that switches the app to the test adapter for one test.

On the database queue instead (``SOLIDQ_ADAPTER = "solidq"``), where the controls act,
:func:`frozen_clock` holds the time still and :func:`work_off` runs the due jobs in process
through the real dispatch and claim, so a test steps through a rate limit, a debounce window or
a retry's wait in milliseconds (:mod:`.clock`, :mod:`.in_process`)::

    def test_two_calls_a_minute(app):
        with app.app_context(), frozen_clock() as clock:
            for n in range(10):
                call_api.perform_later(n)        # limits_rate(to=2, per=60, burst=2)
            assert len(work_off()) == 2
            clock.advance(60)
            assert len(work_off()) == 1          # then one a minute
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import typing as t

from flask_solidq.config import Adapter
from flask_solidq.state import SolidQState
from flask_solidq.state import get_state
from flask_solidq.testing import batches as testing_batches
from flask_solidq.testing.clock import FrozenClock as FrozenClock
from flask_solidq.testing.clock import frozen_clock as frozen_clock
from flask_solidq.testing.in_process import work_off as work_off
from flask_solidq.values import JobArgument

if t.TYPE_CHECKING:
    from flask_solidq.definitions.job import Job


class _Unset(enum.Enum):
    """The default of a criterion that ``None`` also is a value of: not asked about."""

    UNSET = enum.auto()


_UNSET = _Unset.UNSET


class _HasId(t.Protocol):
    id: int


def enqueued_jobs() -> list[Job]:
    """The jobs recorded and not performed yet, oldest first."""
    return list(testing_batches.records_of(_test_state()).jobs)


def clear_enqueued_jobs() -> None:
    """Forget every recorded job, and the batches they were in."""
    state = _test_state()
    testing_batches.records_of(state).jobs.clear()
    testing_batches.clear(state)


@contextlib.contextmanager
def assert_enqueued_with(
    *,
    job: type[Job] | None = None,
    args: t.Sequence[JobArgument] | None = None,
    kwargs: t.Mapping[str, JobArgument] | None = None,
    queue: str | None = None,
    priority: int | None = None,
    at: dt.datetime | None | _Unset = _UNSET,
    batch: int | _HasId | None | _Unset = _UNSET,
) -> t.Iterator[None]:
    """Assert that the block enqueues a job matching every criterion given.

    :param job: the job definition (class, or what ``@solidq.job`` returned).
    :param args: the positional arguments, compared as a tuple.
    :param kwargs: the keyword arguments.
    :param at: when it is due (``None`` for now).
    :param batch: the batch it is in (the one ``solidq.batch()`` yields, a found one, or its
        id; ``None`` for none).
    :raises AssertionError: no job enqueued in the block matches; the message lists them.
    """
    state = _test_state()
    before = len(testing_batches.records_of(state).jobs)
    yield
    new_jobs = testing_batches.records_of(state).jobs[before:]
    criteria = {
        "job": job,
        "args": None if args is None else tuple(args),
        "kwargs": None if kwargs is None else dict(kwargs),
        "queue": queue,
        "priority": priority,
    }
    wanted: dict[str, object] = {
        name: value for name, value in criteria.items() if value is not None
    }
    if at is not _UNSET:
        wanted["at"] = at
    if batch is not _UNSET:
        wanted["batch"] = batch if batch is None or isinstance(batch, int) else batch.id
    if not any(_matches(candidate, wanted) for candidate in new_jobs):
        enqueued = "\n".join(f"  {_describe(candidate)}" for candidate in new_jobs) or "  nothing"
        raise AssertionError(f"No job enqueued with {wanted}. Enqueued in the block:\n{enqueued}")


def perform_enqueued_jobs(*, only: t.Collection[type[Job]] | None = None) -> int:
    """Perform the recorded jobs in the order they were enqueued, including the jobs those
    enqueue, until none (of ``only``'s definitions, when given) is left; return how many ran.

    Exceptions from a job propagate, as with ``perform_now`` (``retry_on`` and
    ``discard_on`` don't act). A job of a batch counts there as completed, or as failed when
    it raised; the batch's last job records its callbacks, which the next call performs.
    """
    state = _test_state()
    performed = 0
    while True:
        job = _next_job(state, only)
        if job is None:
            return performed
        try:
            job.perform_now()
        except Exception:
            testing_batches.job_ended(state, job, failed=True)
            raise
        testing_batches.job_ended(state, job, failed=False)
        performed += 1


def _next_job(state: SolidQState, only: t.Collection[type[Job]] | None) -> Job | None:
    for index, job in enumerate(testing_batches.records_of(state).jobs):
        if only is None or type(job) in only:
            return testing_batches.records_of(state).jobs.pop(index)
    return None


def _matches(job: Job, wanted: dict[str, object]) -> bool:
    actual = {
        "job": type(job),
        "args": tuple(job.arguments),
        "kwargs": job.kwargs,
        "queue": job.queue_name,
        "priority": job.priority,
        "at": job.scheduled_at,
        "batch": job.batch_id,
    }
    return all(actual[name] == value for name, value in wanted.items())


def _describe(job: Job) -> str:
    return (
        f"{type(job).job_name}(args={job.arguments!r}, kwargs={job.kwargs!r},"
        f" queue={job.queue_name!r}, priority={job.priority}"
        + (f", batch={job.batch_id})" if job.batch_id is not None else ")")
    )


def _test_state() -> SolidQState:
    state = get_state()
    if state.adapter is not Adapter.TEST:
        raise RuntimeError(
            "flask_solidq.testing needs the test adapter: set SOLIDQ_ADAPTER = 'test' in the"
            " test config, or use the `solidq_jobs` pytest fixture."
        )
    return state

"""pytest fixtures for apps that use flask-solidq (loaded automatically once installed).

``solidq_jobs`` switches the app of pytest-flask's ``app`` fixture to the test adapter for one
test and gives a small recorder::

    def test_order_enqueues_receipt(app, client, solidq_jobs):
        client.post("/orders", json={...})
        assert [type(job) for job in solidq_jobs.enqueued] == [send_receipt]
        solidq_jobs.perform_all()

Every test also starts with no back-off noted in the process (a job that raised
``RateLimited`` under :func:`flask_solidq.testing.work_off` in one test pauses its budgets in
the database, where each test's own data lives, and in the process, which outlives the test).
"""

from __future__ import annotations

import typing as t

import pytest

from flask_solidq import testing
from flask_solidq.config import Adapter
from flask_solidq.controls.rate_limit import local_pauses
from flask_solidq.testing import batches as testing_batches

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.definitions.job import Job


class JobRecorder:
    """What the ``solidq_jobs`` fixture yields: the test adapter's record of one test."""

    #: See :func:`flask_solidq.testing.assert_enqueued_with`.
    assert_enqueued_with = staticmethod(testing.assert_enqueued_with)

    @property
    def enqueued(self) -> list[Job]:
        """The jobs enqueued and not performed yet, oldest first."""
        return testing.enqueued_jobs()

    def perform_all(self, *, only: t.Collection[type[Job]] | None = None) -> int:
        """Perform the enqueued jobs (and those they enqueue); return how many ran."""
        return testing.perform_enqueued_jobs(only=only)

    def clear(self) -> None:
        """Forget the enqueued jobs."""
        testing.clear_enqueued_jobs()


@pytest.fixture(autouse=True)
def _solidq_no_noted_pauses() -> t.Iterator[None]:
    """Forget the back-offs a test noted in the process (see the module's docstring)."""
    local_pauses.BOARD.forget()
    yield
    local_pauses.BOARD.forget()


@pytest.fixture
def solidq_jobs(app: Flask) -> t.Iterator[JobRecorder]:
    """Record the jobs the test enqueues instead of storing them (the test adapter)."""
    state = app.extensions["solidq"]
    adapter, state.adapter = state.adapter, Adapter.TEST
    testing_batches.records_of(state).clear()
    with app.app_context():
        try:
            yield JobRecorder()
        finally:
            state.adapter = adapter
            testing_batches.records_of(state).clear()

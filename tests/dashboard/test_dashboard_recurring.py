"""The recurring tasks' "Run now" (:mod:`flask_solidq.dashboard.recurring_views`), with the
test client on every backend: a CSRF-protected POST that enqueues the task's job once, as its
scheduler would, and says which job on the page it returns to (once)."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from tests import support
from tests.dashboard.test_dashboard import PREFIX
from tests.dashboard.test_dashboard import done_message
from tests.dashboard.test_dashboard import page
from tests.dashboard.test_dashboard import post

if t.TYPE_CHECKING:
    from flask import Flask
    from flask.testing import FlaskClient

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
RECURRING_RUNS = t.cast(sa.Table, models.RecurringExecution.__table__)
RECURRING_TASKS = t.cast(sa.Table, models.RecurringTask.__table__)

#: Two tasks: one a key with a slash (a path of its own all the same).
RECURRING = {
    "nightly/cleanup": {
        "job": "tests.jobs.rate_limit:unlimited",
        "schedule": "every day at 3am",
        "args": ["swept"],
        "queue": "maintenance",
        "priority": 7,
    },
}


@pytest.fixture
def app(database_url: str) -> t.Iterator[Flask]:
    with support.app_emptied_after(
        database_url, SOLIDQ_DASHBOARD=True, SOLIDQ_RECURRING=RECURRING
    ) as app:
        yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def store_tasks(app: Flask, engine: sa.Engine) -> None:
    """Store the configured tasks, as a scheduler does when it starts, and one more that this
    app doesn't configure (another app's, or one added at runtime)."""
    from flask_solidq.recurring import tasks

    with app.app_context():
        tasks.persist_all(engine, tasks.load_all(app.extensions["solidq"].settings.recurring))
        with engine.begin() as connection:
            connection.execute(
                RECURRING_TASKS.insert().values(
                    key="elsewhere",
                    schedule="every minute",
                    class_name="rate_test.unlimited",
                    static=False,
                    created_at=sa.func.now(),
                    updated_at=sa.func.now(),
                )
            )


def test_run_now_enqueues_the_tasks_job_once_as_its_scheduler_would(app, engine, client):
    store_tasks(app, engine)
    listed = client.get(f"{PREFIX}/recurring").text
    assert f'action="{PREFIX}/recurring/nightly/cleanup/run"' in listed
    assert "/recurring/elsewhere/run" not in listed  # not configured here: no button

    response = post(client, "/recurring/nightly/cleanup/run")

    (job,) = support.rows(engine, JOBS)
    assert done_message(response) == (
        f"Recurring task nightly/cleanup: enqueued job {job.id} (rate_test.unlimited)."
    )
    assert response.headers["Location"] == f"{PREFIX}/recurring"
    assert (job.class_name, job.queue_name, job.priority) == (
        "rate_test.unlimited",
        "maintenance",
        7,
    )
    assert '"swept"' in job.arguments
    assert [row.job_id for row in support.rows(engine, READY)] == [job.id]
    (run,) = support.rows(engine, RECURRING_RUNS)
    assert (run.task_key, run.job_id) == ("nightly/cleanup", job.id)
    shown = page(client.get(response.headers["Location"])).text
    assert f"enqueued job {job.id}" in shown
    assert shown.count("never") == 1  # elsewhere never ran; nightly/cleanup ran now
    assert f"enqueued job {job.id}" not in page(client.get(f"{PREFIX}/recurring")).text


def test_run_now_of_a_task_this_app_does_not_configure_enqueues_nothing(app, engine, client):
    store_tasks(app, engine)

    response = post(client, "/recurring/elsewhere/run")

    assert done_message(response) == (
        "Recurring task 'elsewhere' is not in this app's SOLIDQ_RECURRING: nothing enqueued."
    )
    assert support.rows(engine, JOBS) == []


def test_run_now_needs_the_csrf_token(app, engine, client):
    store_tasks(app, engine)
    client.get(f"{PREFIX}/recurring")

    response = client.post(f"{PREFIX}/recurring/nightly/cleanup/run")

    assert response.status_code == 400
    assert support.rows(engine, JOBS) == []

"""The housekeeping jobs (flask_solidq.housekeeping) check the arguments SOLIDQ_RECURRING's
``kwargs`` give them, and ``flask solidq work`` says when none of its workers serves their
queue (issue 19, items 6 and 8)."""

from __future__ import annotations

import json
import logging
import time

import pytest

from flask_solidq.controls.rate_limit import limiter as rate_limiter
from flask_solidq.housekeeping import ClearFinishedJobs
from flask_solidq.housekeeping import ClearIdleBudgets
from flask_solidq.operations import claim
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.processes import launcher
from tests import support
from tests.support.runtime import FAILED

PROCESS_ID = 4646
CLAIMERS = (PROCESS_ID,)


def no_second_batch(seconds: float) -> None:
    """time.sleep between batches: a batch_size of 0 selects nothing, forever; fail instead
    of hanging."""
    raise AssertionError(f"a second batch came (sleeping {seconds}s): the loop never ends")


@pytest.mark.parametrize("job", [ClearIdleBudgets, ClearFinishedJobs])
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be 1 or more, not 0."),
        ({"batch_size": -5}, "batch_size must be 1 or more, not -5."),
        ({"batch_size": "500"}, "batch_size must be 1 or more, not '500'."),
        ({"sleep_between_batches": -1}, "sleep_between_batches must be 0 or more seconds"),
    ],
)
def test_a_housekeeping_job_refuses_batches_that_never_end(
    app, engine, monkeypatch, job, kwargs, message
):
    monkeypatch.setattr(time, "sleep", no_second_batch)
    with app.app_context(), pytest.raises(ValueError) as raised:
        job.perform_now(**kwargs)
    assert str(raised.value).startswith(message)


def test_the_housekeeping_job_and_the_rate_limiter_give_the_same_error(app, engine):
    with app.app_context():
        with pytest.raises(ValueError) as from_job:
            ClearIdleBudgets.perform_now(batch_size=0)
        with pytest.raises(ValueError) as from_limiter:
            rate_limiter.RateLimiter().clear_idle_in_batches(batch_size=0)
    assert str(from_job.value) == str(from_limiter.value)


def test_clear_idle_budgets_with_batch_size_0_from_its_kwargs_fails_keeping_its_job(
    app, engine, monkeypatch
):
    """A worker claims the task's job and runs it: it fails, retryable, with the message."""
    monkeypatch.setattr(time, "sleep", no_second_batch)
    with app.app_context():
        job_id = ClearIdleBudgets.perform_later(batch_size=0).provider_job_id
    (claimed,) = claim.claim(engine, claim.QueueSelector(("*",)), 1, PROCESS_ID)
    with app.app_context():
        outcome = execute.perform(claimed)
    finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=False)

    (failed,) = support.rows(engine, FAILED)
    assert failed.job_id == job_id
    assert json.loads(failed.error)["message"] == "batch_size must be 1 or more, not 0."


HOUSEKEEPING = {
    "clear_finished_jobs": {
        "job": "flask_solidq.housekeeping:ClearFinishedJobs",
        "schedule": "every hour at minute 12",
    },
    "clear_idle_budgets": {
        "job": "flask_solidq.housekeeping:ClearIdleBudgets",
        "schedule": "every hour at minute 27",
    },
}


def unserved_warnings(database_url, caplog, queues, only=None, **config):
    """The ``unserved_queue`` records of building a supervisor whose one worker serves
    ``queues``, with the housekeeping tasks configured."""
    app = support.create_app(
        database_url,
        SOLIDQ_WORKERS=[{"queues": queues}],
        SOLIDQ_RECURRING={**HOUSEKEEPING, **config.pop("recurring", {})},
        **config,
    )
    with app.app_context(), caplog.at_level(logging.WARNING, logger="flask_solidq"):
        launcher.supervisor(app, mode="thread", only=only)
        app.extensions["solidq"].dispose()
    return [record for record in caplog.records if getattr(record, "event", "") == "unserved_queue"]


def test_work_warns_once_when_no_worker_serves_the_housekeeping_queue(database_url, caplog):
    (warning,) = unserved_warnings(database_url, caplog, ["default", "mailers"])

    assert warning.levelno == logging.WARNING
    assert warning.tasks == {
        "clear_finished_jobs": "solidq_maintenance",
        "clear_idle_budgets": "solidq_maintenance",
    }
    message = warning.getMessage()
    assert '"solidq_maintenance"' in message
    assert "clear_idle_budgets" in message


def test_a_task_given_a_queue_is_judged_by_that_queue(database_url, caplog):
    reports = {
        "reports": {"job": "tests.jobs.basic:store_result", "schedule": "every day", "queue": "rep"}
    }
    (warning,) = unserved_warnings(
        database_url, caplog, ["solidq_maintenance", "default"], recurring=reports
    )

    assert warning.tasks == {"reports": "rep"}


@pytest.mark.parametrize("queues", [["*"], ["default", "solidq_maintenance"], ["solidq_*"]])
def test_no_warning_when_a_worker_serves_the_housekeeping_queue(database_url, caplog, queues):
    assert unserved_warnings(database_url, caplog, queues) == []


def test_no_warning_from_a_supervisor_that_runs_no_worker(database_url, caplog):
    assert unserved_warnings(database_url, caplog, ["default"], only="scheduler") == []

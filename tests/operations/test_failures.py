"""What becomes of a job in a `flask solidq work` worker when it raises, retries, is discarded
or can't be loaded; and what ``current_job`` says inside it. One worker serves the module."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import orm

from flask_solidq import models
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import JOBS
from tests.support.runtime import READY
from tests.support.runtime import SCHEDULED

pytestmark = pytest.mark.processes

shared_worker = runtime_support.shared_worker_fixture("--threads", "3")
shared_queue = runtime_support.shared_queue


def settled(engine) -> bool:
    """Nothing is left to run: no ready, scheduled or claimed job."""
    return not any(support.count(engine, table) for table in (READY, SCHEDULED, CLAIMED))


def test_a_job_that_raises_is_kept_as_a_failed_execution_with_class_message_and_backtrace(
    shared_queue,
):
    engine = shared_queue.engine
    job_id = shared_queue.enqueue(worker_jobs.fail, "x")

    errors = support.wait_until(lambda: runtime_support.failures(engine))

    assert list(errors) == [job_id]
    error = errors[job_id]
    assert error["exception_class"] == "builtins.ValueError"
    assert error["message"] == "failing on purpose with x"
    backtrace = error["backtrace"]
    assert isinstance(backtrace, list)
    assert all(isinstance(line, str) for line in backtrace)
    assert any("jobs/worker.py" in line for line in backtrace)
    assert backtrace[-1] == "ValueError: failing on purpose with x"
    assert settled(engine)
    assert runtime_support.finished_ids(engine) == set()
    assert len(runtime_support.runs(engine, "worker_test.fail")) == 1


def test_a_job_that_calls_sys_exit_fails_and_its_worker_carries_on(shared_queue):
    engine = shared_queue.engine
    (worker,) = runtime_support.processes(engine, "Worker")
    job_id = shared_queue.enqueue(worker_jobs.exit_process, "bye")

    errors = support.wait_until(lambda: runtime_support.failures(engine))

    assert list(errors) == [job_id]
    assert errors[job_id]["exception_class"] == "builtins.SystemExit"
    assert errors[job_id]["message"] == "3"
    after = shared_queue.enqueue(worker_jobs.record, "still here")
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {after})
    assert [row.id for row in runtime_support.processes(engine, "Worker")] == [worker.id]
    assert {run.pid for run in runtime_support.runs(engine)} == {worker.pid}
    assert settled(engine)


def test_retry_on_runs_the_job_three_times_then_keeps_it_as_failed(shared_queue):
    engine = shared_queue.engine
    job_id = shared_queue.enqueue(worker_jobs.flaky, "f")

    errors = support.wait_until(lambda: runtime_support.failures(engine))

    assert list(errors) == [job_id]
    assert errors[job_id]["exception_class"] == "tests.jobs.worker.Flaky"
    assert errors[job_id]["message"] == "flaky run 3"
    runs = runtime_support.runs(engine, "worker_test.flaky")
    assert [json.loads(run.data)["executions"] for run in runs] == [1, 2, 3]
    # Every attempt is the same job row.
    assert [row.id for row in support.rows(engine, JOBS)] == [job_id]
    assert settled(engine)


def test_retry_on_with_a_fallback_finishes_the_job_when_the_attempts_run_out(shared_queue):
    engine = shared_queue.engine
    job_id = shared_queue.enqueue(worker_jobs.flaky_with_fallback, "g")

    support.wait_until(lambda: runtime_support.finished_ids(engine) == {job_id})

    assert [run.job_name for run in runtime_support.runs(engine)] == [
        "worker_test.flaky_with_fallback",
        "worker_test.flaky_with_fallback",
        "worker_test.flaky_with_fallback",
        "worker_test.flaky_with_fallback.fallback",
    ]
    assert json.loads(runtime_support.runs(engine)[-1].data) == "flaky run 3"
    assert runtime_support.failures(engine) == {}
    assert settled(engine)


def test_discard_on_finishes_the_job_without_a_failure(shared_queue):
    engine = shared_queue.engine
    job_id = shared_queue.enqueue(worker_jobs.unwanted, "u")

    support.wait_until(lambda: runtime_support.finished_ids(engine) == {job_id})

    assert runtime_support.failures(engine) == {}
    assert len(runtime_support.runs(engine, "worker_test.unwanted")) == 1
    assert settled(engine)


def test_current_job_in_a_worker_has_the_job_id_the_row_id_and_the_executions(shared_queue):
    engine = shared_queue.engine
    with shared_queue.app.app_context():
        job = worker_jobs.introspect.perform_later("who")

    (run,) = support.wait_until(lambda: runtime_support.runs(engine, "worker_test.introspect"))

    assert json.loads(run.data) == {
        "job_id": job.job_id,
        "provider_job_id": job.provider_job_id,
        "executions": 1,
        "arguments": ["who"],
    }
    assert run.pid != shared_queue.worker.pid  # a forked worker, not the supervisor
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {job.provider_job_id})


@pytest.mark.parametrize(
    ("class_name", "path"),
    [
        ("worker_test.gone", "tests.no_such_module:gone"),
        ("worker_test.renamed", "tests.jobs.worker:renamed"),
    ],
)
def test_a_job_whose_definition_cant_be_loaded_fails_with_job_not_found(
    shared_queue, class_name, path
):
    engine = shared_queue.engine
    with orm.Session(engine) as session, session.begin():
        job = models.JobRecord(
            queue_name="default",
            class_name=class_name,
            arguments=json.dumps({"job": path, "args": [1]}),
            priority=0,
            active_job_id="00000000-0000-4000-8000-000000000001",
        )
        session.add(job)
        session.flush()
        session.add(models.ReadyExecution(job_id=job.id, queue_name="default", priority=0))
        job_id = job.id

    errors = support.wait_until(lambda: runtime_support.failures(engine))

    assert list(errors) == [job_id]
    assert errors[job_id]["exception_class"] == "flask_solidq.errors.JobNotFound"
    assert class_name in errors[job_id]["message"]
    assert path in errors[job_id]["message"]
    assert settled(engine)

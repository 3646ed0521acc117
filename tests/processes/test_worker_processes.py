"""`flask solidq work` in fork mode, with two worker processes of three threads and a
dispatcher, shared by this module's tests: bulk work done exactly once, paused queues,
scheduled jobs, and `flask solidq status`."""

from __future__ import annotations

import datetime as dt

import pytest

from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import JOBS
from tests.support.runtime import READY
from tests.support.runtime import SCHEDULED

pytestmark = pytest.mark.processes

shared_worker = runtime_support.shared_worker_fixture("--processes", "2", "--threads", "3")
shared_queue = runtime_support.shared_queue

JOB_COUNT = 1000


def test_two_worker_processes_of_three_threads_run_a_thousand_jobs_each_exactly_once(
    shared_queue,
):
    engine = shared_queue.engine
    with shared_queue.app.app_context():
        support.solidq.perform_all_later(
            [worker_jobs.record.new(index) for index in range(JOB_COUNT)]
        )

    support.wait_until(
        lambda: len(runtime_support.finished_ids(engine)) == JOB_COUNT, timeout=90, interval=0.2
    )

    runs = runtime_support.runs(engine, "worker_test.record")
    assert len(runs) == JOB_COUNT
    assert sorted(int(run.value) for run in runs) == list(range(JOB_COUNT))
    assert support.count(engine, JOBS) == JOB_COUNT
    assert support.count(engine, READY) == 0
    assert support.count(engine, CLAIMED) == 0
    assert runtime_support.failures(engine) == {}
    worker_pids = {row.pid for row in runtime_support.processes(engine, "Worker")}
    assert len(worker_pids) == 2
    assert {run.pid for run in runs} == worker_pids
    assert len({(run.pid, run.thread) for run in runs}) > 2


def test_a_paused_queue_is_not_worked_until_it_is_resumed(shared_queue):
    engine = shared_queue.engine
    cli = shared_queue.app.test_cli_runner()
    result = cli.invoke(args=["solidq", "pause", "held"])
    assert result.exit_code == 0, result.output
    held = shared_queue.enqueue(worker_jobs.record, "held", queue="held")
    # Workers claim in (priority, job id) order across every queue: had the held job been
    # claimable, it would have been claimed before these later ones.
    for value in ("after-1", "after-2"):
        shared_queue.enqueue(worker_jobs.record, value)
        support.wait_until(
            lambda value=value: [run.value for run in runtime_support.runs(engine)].count(value)
        )

    assert [row.job_id for row in support.rows(engine, READY)] == [held]
    assert "held" not in [run.value for run in runtime_support.runs(engine)]

    result = cli.invoke(args=["solidq", "resume", "held"])
    assert result.exit_code == 0, result.output
    support.wait_until(lambda: held in runtime_support.finished_ids(engine))
    assert [run.value for run in runtime_support.runs(engine)].count("held") == 1


def test_a_job_scheduled_two_seconds_ahead_runs_at_its_time_not_before(shared_queue):
    engine = shared_queue.engine
    job_id = shared_queue.enqueue(worker_jobs.record, "later", wait=2)
    (job,) = support.rows(engine, JOBS)
    assert [row.job_id for row in support.rows(engine, SCHEDULED)] == [job_id]

    (run,) = support.wait_until(lambda: runtime_support.runs(engine), timeout=10)

    assert run.started_at >= job.scheduled_at
    assert run.started_at - job.scheduled_at < dt.timedelta(seconds=1.5)
    support.wait_until(lambda: job_id in runtime_support.finished_ids(engine))
    assert support.count(engine, SCHEDULED) == 0


def test_status_lists_the_supervisor_its_workers_and_its_dispatcher(shared_queue):
    registered = runtime_support.processes(shared_queue.engine)

    result = shared_queue.app.test_cli_runner().invoke(args=["solidq", "status"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for row in registered:
        (line,) = [line for line in lines if row.name in line]
        assert row.kind in line
        assert str(row.pid) in line
    assert sorted(row.kind for row in registered) == [
        "Dispatcher",
        "Supervisor(fork)",
        "Worker",
        "Worker",
    ]
    assert str(shared_queue.worker.pid) in result.output

"""Stopping and losing workers: SIGTERM's graceful stop (a job finishing in time, a job
outliving the shutdown timeout, and one draining while another supervisor prunes), a worker
child killed mid-job, and a whole `flask solidq work` killed with nobody left to clean up,
which the next one's pruning handles (with a claim whose process row vanished)."""

from __future__ import annotations

import os
import signal

import pytest

from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import FAILED
from tests.support.runtime import READY

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

ALL_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker"]


def enqueue_sleep(app, value: str, seconds: float, queue: str = "default", **options) -> int:
    with app.app_context():
        job = worker_jobs.sleep.set(queue=queue).perform_later(value, seconds, **options)
        return job.provider_job_id


def running(engine, value: str):
    """The run of the sleep job ``value`` once it started, still running."""
    started = [
        run
        for run in runtime_support.runs(engine, "worker_test.sleep")
        if run.value == value and run.finished_at is None
    ]
    return started[0] if started else None


def test_sigterm_lets_jobs_finish_for_the_shutdown_timeout_then_releases_the_rest_and_exits(
    app, engine, launcher
):
    quick = enqueue_sleep(app, "quick", 1.5)
    slow = enqueue_sleep(app, "slow", 30)
    work = launcher.start(config={"SOLIDQ_SHUTDOWN_TIMEOUT": 3})
    support.wait_until(
        lambda: {run.value for run in runtime_support.runs(engine)} == {"quick", "slow"},
        timeout=30,
    )
    runtime_support.wait_for_kinds(engine, ALL_KINDS)

    signalled_at = utcnow()
    work.signal(signal.SIGTERM)

    assert work.wait(15) == 0, work.output()
    # The quick job finished within the timeout; the slow one went back to ready, not lost.
    quick_run, slow_run = sorted(runtime_support.runs(engine), key=lambda run: run.value)
    assert quick_run.finished_at > signalled_at
    assert slow_run.finished_at is None
    assert runtime_support.finished_ids(engine) == {quick}
    assert [row.job_id for row in support.rows(engine, READY)] == [slow]
    assert support.count(engine, CLAIMED) == 0
    assert support.count(engine, FAILED) == 0
    assert runtime_support.processes(engine) == []


def test_a_job_finishing_within_the_shutdown_timeout_finishes_though_another_supervisor_prunes(
    app, engine, launcher
):
    config = {"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 2, "SOLIDQ_SHUTDOWN_TIMEOUT": 8}
    job_id = enqueue_sleep(app, "draining", 5)
    launcher.start("--only", "dispatcher", config=config)  # another supervisor, which prunes
    stopping = launcher.start("--only", "worker", config=config)
    support.wait_until(lambda: running(engine, "draining"), timeout=30)
    runtime_support.wait_for_kinds(
        engine, ["Dispatcher", "Supervisor(fork)", "Supervisor(fork)", "Worker"]
    )

    stopping.signal(signal.SIGTERM)

    assert stopping.wait(20) == 0, stopping.output()
    (run,) = runtime_support.runs(engine)
    assert run.finished_at is not None
    assert runtime_support.failures(engine) == {}
    assert runtime_support.finished_ids(engine) == {job_id}


def test_a_worker_killed_mid_job_is_replaced_and_its_job_fails_or_with_release_runs_again(
    app, engine, launcher
):
    # Two `flask solidq work`, one per policy, each on a queue of its own.
    failing = enqueue_sleep(app, "doomed", 30, queue="fail")
    released = enqueue_sleep(app, "again", 30, queue="release", rerun_seconds=0)
    launcher.start("--queues", "fail")
    launcher.start("--queues", "release", config={"SOLIDQ_ON_WORKER_DEATH": "release"})
    doomed = support.wait_until(lambda: running(engine, "doomed"), timeout=30)
    again = support.wait_until(lambda: running(engine, "again"), timeout=30)
    workers = runtime_support.processes(engine, "Worker")
    assert {doomed.pid, again.pid} == {row.pid for row in workers}

    os.kill(doomed.pid, signal.SIGKILL)
    os.kill(again.pid, signal.SIGKILL)

    # "fail" (the default): the job is kept as failed, naming the process and the signal.
    errors = support.wait_until(lambda: runtime_support.failures(engine), timeout=10)
    assert list(errors) == [failing]
    assert errors[failing]["exception_class"] == "flask_solidq.ProcessExitError"
    assert "SIGKILL" in errors[failing]["message"]
    assert f"pid {doomed.pid}" in errors[failing]["message"]
    # "release": the job runs again, in the replacement worker, and finishes.
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {released}, timeout=15)
    again_runs = [run for run in runtime_support.runs(engine) if run.value == "again"]
    assert [(run.pid == again.pid, run.finished_at is None) for run in again_runs] == [
        (True, True),
        (False, False),
    ]
    # Each supervisor replaced its worker; no claim is left behind.
    # Compared by pid, not row id: SQLite gives a new row the id of a deleted last one.
    killed = {row.pid for row in workers}
    support.wait_until(
        lambda: (
            [row.pid in killed for row in runtime_support.processes(engine, "Worker")]
            == [False, False]
        ),
        timeout=20,
    )
    replacements = runtime_support.processes(engine, "Worker")
    assert {row.pid for row in replacements}.isdisjoint({doomed.pid, again.pid})
    assert support.count(engine, CLAIMED) == 0
    assert support.count(engine, READY) == 0
    assert [run.finished_at for run in runtime_support.runs(engine) if run.value == "doomed"] == [
        None
    ]


def test_the_next_supervisor_fails_the_claims_of_a_killed_supervisor_and_of_a_vanished_process(
    app, engine, launcher
):
    config = {"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 2}
    job_id = enqueue_sleep(app, "orphaned", 30)
    first = launcher.start(config=config)
    support.wait_until(lambda: running(engine, "orphaned"), timeout=30)
    runtime_support.wait_for_kinds(engine, ALL_KINDS)
    dead = runtime_support.processes(engine)

    first.kill()  # the whole process group: nobody deregisters or releases anything
    assert [row.id for row in runtime_support.processes(engine)] == [row.id for row in dead]
    # And a claim whose process row is gone altogether (deleted by hand, say).
    vanished = claim_for_a_missing_process(app, engine)
    second = launcher.start(config=config)

    support.wait_until(lambda: len(runtime_support.failures(engine)) == 2, timeout=20)
    errors = runtime_support.failures(engine)
    assert errors[vanished]["exception_class"] == "flask_solidq.ProcessMissingError"
    assert errors[job_id]["exception_class"] == "flask_solidq.ProcessPrunedError"
    assert "pruned" in errors[job_id]["message"]
    (dead_worker,) = [row for row in dead if row.kind == "Worker"]
    assert dead_worker.name in errors[job_id]["message"]
    runtime_support.wait_for_kinds(engine, ALL_KINDS)
    assert {row.id for row in dead}.isdisjoint(row.id for row in runtime_support.processes(engine))
    assert support.count(engine, CLAIMED) == 0
    assert support.count(engine, READY) == 0
    assert runtime_support.finished_ids(engine) == set()

    second.signal(signal.SIGTERM)
    assert second.wait(15) == 0, second.output()
    assert runtime_support.processes(engine) == []


def claim_for_a_missing_process(app, engine) -> int:
    """A job claimed by a process id no row has; return the job's id."""
    with app.app_context():
        job_id = worker_jobs.record.set(queue="nobody").perform_later("lost").provider_job_id
    with engine.begin() as connection:
        connection.execute(READY.delete().where(READY.c.job_id == job_id))
        connection.execute(
            CLAIMED.insert().values(job_id=job_id, process_id=10**9, created_at=utcnow())
        )
    return job_id

"""Steps that resume in real `flask solidq work` processes: SIGTERM interrupts a job at its next
checkpoint, it goes back to ready at once with its cursor (no failure, no attempt spent) and
another worker resumes it from there, even while the first still waits for its other jobs; a
job that checkpoints more often than the shutdown timeout is interrupted, never released by
the timeout; a thread-mode worker its supervisor stops interrupts its job the same way; a
worker killed outright loses only the progress since its last save
(``SOLIDQ_STEP_SAVE_INTERVAL``), and its job resumes whatever ``SOLIDQ_ON_WORKER_DEATH`` says,
until ``max_resumptions`` is spent."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from flask_solidq.processes import launcher as process_launcher
from tests import support
from tests.jobs import steps as steps_jobs
from tests.jobs import worker as worker_jobs
from tests.processes.test_thread_mode import supervise
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import FAILED
from tests.support.runtime import JOBS
from tests.support.runtime import READY

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher


def enqueue_count_up(app, total: int, delay: float) -> int:
    with app.app_context():
        return steps_jobs.count_up.perform_later(total, delay).provider_job_id


def counted(engine) -> list[tuple[int, int]]:
    """(n, pid) of each unit the job counted, in order."""
    return [(int(run.value), run.pid) for run in runtime_support.runs(engine, "steps_test.count")]


def stored_payload(engine, job_id: int) -> dict:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return json.loads(row.arguments)


def test_sigterm_interrupts_a_job_at_its_checkpoint_and_another_worker_resumes_it(
    app, engine, launcher
):
    job_id = enqueue_count_up(app, 40, 0.05)
    first = launcher.start(config={"SOLIDQ_SHUTDOWN_TIMEOUT": 10})
    support.wait_until(lambda: len(counted(engine)) >= 5, timeout=30)

    signalled = time.monotonic()
    first.signal(signal.SIGTERM)

    assert first.wait(20) == 0, first.output()
    # Interrupted at its next advance, well within the shutdown timeout.
    assert time.monotonic() - signalled < 8
    assert [row.job_id for row in support.rows(engine, READY)] == [job_id]
    assert support.count(engine, CLAIMED) == support.count(engine, FAILED) == 0
    before = counted(engine)
    stored = stored_payload(engine, job_id)
    assert stored["steps"] == {"done": ["prepare"], "current": ["count", len(before)]}
    assert stored["executions"] == 1
    assert "exception_executions" not in stored
    assert "Job interrupted at step 'count' job_name" in first.output()
    assert "unfinished after SOLIDQ_SHUTDOWN_TIMEOUT" not in first.output()

    second = launcher.start()
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {job_id}, timeout=30)

    after = counted(engine)
    assert [n for n, _pid in after] == list(range(40))  # each unit once, none lost
    assert {pid for _n, pid in after[: len(before)]} != {pid for _n, pid in after[len(before) :]}
    assert len(runtime_support.runs(engine, "steps_test.prepare")) == 1
    assert runtime_support.failures(engine) == {}
    second.signal(signal.SIGTERM)
    assert second.wait(20) == 0, second.output()


def test_a_job_checkpointing_within_the_shutdown_timeout_is_interrupted_not_released(
    app, engine, launcher
):
    job_id = enqueue_count_up(app, 200, 0.3)  # a minute of work, a checkpoint every 0.3 s
    work = launcher.start(config={"SOLIDQ_SHUTDOWN_TIMEOUT": 1})
    support.wait_until(lambda: len(counted(engine)) >= 2, timeout=30)

    work.signal(signal.SIGTERM)

    assert work.wait(20) == 0, work.output()
    output = work.output()
    assert "Job interrupted at step 'count'" in output
    assert "unfinished after SOLIDQ_SHUTDOWN_TIMEOUT" not in output
    assert [row.job_id for row in support.rows(engine, READY)] == [job_id]
    assert runtime_support.failures(engine) == {}
    cursor = stored_payload(engine, job_id)["steps"]["current"]
    assert cursor == ["count", len(counted(engine))]


def test_a_supervisor_stopping_its_thread_mode_worker_interrupts_the_job(database_url, runs_table):
    app = support.create_app(database_url, **runtime_support.FAST_CONFIG)
    with app.app_context():
        engine = app.extensions["solidq"].engine
    try:
        job_id = enqueue_count_up(app, 200, 0.05)
        supervisor = process_launcher.supervisor(app, mode="thread")

        supervise(supervisor, lambda: support.wait_until(lambda: len(counted(engine)) >= 3))

        assert [row.job_id for row in support.rows(engine, READY)] == [job_id]
        assert support.count(engine, CLAIMED) == support.count(engine, FAILED) == 0
        cursor = stored_payload(engine, job_id)["steps"]["current"]
        assert cursor == ["count", len(counted(engine))]
    finally:
        support.delete_all_rows(engine)
        runtime_support.dispose_engines(app)


def test_a_worker_killed_mid_job_loses_only_the_progress_since_its_last_save(app, engine, launcher):
    job_id = enqueue_count_up(app, 60, 0.05)
    config = {"SOLIDQ_STEP_SAVE_INTERVAL": 0, "SOLIDQ_ON_WORKER_DEATH": "release"}
    launcher.start(config=config)
    support.wait_until(lambda: len(counted(engine)) >= 10, timeout=30)
    (victim,) = {pid for _n, pid in counted(engine)}

    os.kill(victim, signal.SIGKILL)

    # Its supervisor puts the job back to ready; the new worker resumes from the last save.
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {job_id}, timeout=30)
    units = counted(engine)
    before = [n for n, pid in units if pid == victim]
    after = [n for n, pid in units if pid != victim]
    assert before == list(range(len(before)))
    # At most the unit in flight when it died runs again (saved at each advance).
    assert after == list(range(after[0], 60))
    assert len(before) - 1 <= after[0] <= len(before)
    assert len(runtime_support.runs(engine, "steps_test.prepare")) == 1
    assert runtime_support.failures(engine) == {}


def test_another_worker_takes_the_interrupted_job_while_its_own_still_shuts_down(
    app, engine, launcher
):
    job_id = enqueue_count_up(app, 40, 0.05)
    first = launcher.start(config={"SOLIDQ_SHUTDOWN_TIMEOUT": 30})
    support.wait_until(lambda: len(counted(engine)) >= 3, timeout=30)
    (first_pid,) = {pid for _n, pid in counted(engine)}
    with app.app_context():  # a job without steps, which holds the first worker's stop
        sleeper = worker_jobs.sleep.perform_later("holds the stop", 15).provider_job_id
    support.wait_until(lambda: runtime_support.runs(engine, "worker_test.sleep"), timeout=30)
    second = launcher.start()
    support.wait_until(lambda: len(runtime_support.processes(engine, "Worker")) == 2, timeout=30)

    first.signal(signal.SIGTERM)

    # Stored while the first worker waits for its sleeping job: the second resumes it then.
    support.wait_until(lambda: any(pid != first_pid for _n, pid in counted(engine)), timeout=10)
    assert runtime_support.worker_alive(first)
    (sleep_run,) = runtime_support.runs(engine, "worker_test.sleep")
    assert sleep_run.finished_at is None
    support.wait_until(
        lambda: runtime_support.finished_ids(engine) == {job_id, sleeper}, timeout=30
    )
    assert [n for n, _pid in counted(engine)] == list(range(40))
    assert first.wait(30) == 0, first.output()
    second.signal(signal.SIGTERM)
    assert second.wait(20) == 0, second.output()


def ended(engine) -> bool:
    """Whether a job finished or failed."""
    return bool(runtime_support.finished_ids(engine) or runtime_support.failures(engine))


def test_a_steps_job_whose_worker_is_killed_resumes_even_when_dead_workers_jobs_fail(
    app, engine, launcher
):
    job_id = enqueue_count_up(app, 40, 0.05)
    config = {"SOLIDQ_STEP_SAVE_INTERVAL": 0, "SOLIDQ_ON_WORKER_DEATH": "fail"}
    work = launcher.start(config=config)
    support.wait_until(lambda: len(counted(engine)) >= 5, timeout=30)
    (victim,) = {pid for _n, pid in counted(engine)}

    os.kill(victim, signal.SIGKILL)

    support.wait_until(lambda: ended(engine), timeout=30)
    assert runtime_support.failures(engine) == {}
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {job_id}, timeout=30)
    after = [n for n, pid in counted(engine) if pid != victim]
    assert after == list(range(after[0], 40)) and after[0] >= 4
    assert stored_payload(engine, job_id)["resumptions"] == 1
    work.signal(signal.SIGTERM)
    assert work.wait(20) == 0, work.output()


def test_a_killed_steps_job_past_max_resumptions_fails_naming_its_step_and_cursor(
    app, engine, launcher
):
    job_id = enqueue_count_up(app, 400, 0.05)
    config = {"SOLIDQ_STEP_SAVE_INTERVAL": 0, "SOLIDQ_MAX_RESUMPTIONS": 0}
    work = launcher.start(config=config)
    support.wait_until(lambda: len(counted(engine)) >= 3, timeout=30)
    (victim,) = {pid for _n, pid in counted(engine)}

    os.kill(victim, signal.SIGKILL)

    support.wait_until(lambda: support.count(engine, FAILED) == 1, timeout=30)
    (failure,) = support.rows(engine, FAILED)
    error = json.loads(failure.error)
    cursor = stored_payload(engine, job_id)["steps"]["current"][1]
    assert error["exception_class"] == "flask_solidq.ResumptionLimitReached"
    assert f"It stopped at step 'count' (cursor {cursor}) after 0 resumptions" in error["message"]
    assert "(SOLIDQ_MAX_RESUMPTIONS=0)" in error["message"]
    assert support.count(engine, READY) == support.count(engine, CLAIMED) == 0
    work.signal(signal.SIGTERM)
    assert work.wait(20) == 0, work.output()

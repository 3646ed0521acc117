"""`flask solidq work --once` in real processes: it works off the ready and due jobs (retries,
and jobs enqueued by jobs, included), leaves the rest and says why, exits 0; TERM lets the
running job finish and exits 143; a worker that dies makes it exit 1; a killed run's claims
are handled by the next run."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.controls.rate_limit.budgets import IS_DEFERRED
from flask_solidq.operations import claim as claim_operation
from flask_solidq.operations import dispatch
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import once as once_jobs
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import JOBS
from tests.support.runtime import READY
from tests.support.runtime import SCHEDULED

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

APP = "tests.apps.once_app"
BLOCKED = models.BlockedExecution.__table__
#: How long a `work --once` that has a few jobs to run may take, start-up included.
RUN_TIMEOUT = 60


def enqueue(app, job, *args, **options) -> int:
    with app.app_context():
        target = job.set(**options) if options else job
        return target.perform_later(*args).provider_job_id


def run_values(engine, job_name: str | None = None) -> list[str]:
    return sorted(run.value for run in runtime_support.runs(engine, job_name))


def running(engine, value: str):
    """The run of the sleep job ``value`` once it started, still running."""
    for run in runtime_support.runs(engine, "worker_test.sleep"):
        if run.value == value and run.finished_at is None:
            return run
    return None


def scheduled_ids(engine, *where) -> set[int]:
    query = (
        sa.select(SCHEDULED.c.job_id)
        .select_from(SCHEDULED.join(JOBS, JOBS.c.id == SCHEDULED.c.job_id))
        .where(*where)
    )
    with engine.connect() as connection:
        return set(connection.scalars(query))


def test_once_works_off_ready_due_retried_and_enqueued_jobs_then_says_what_it_left(
    app, engine, launcher
):
    for value in ("ready-1", "ready-2"):
        enqueue(app, worker_jobs.record, value)
    due = enqueue(app, worker_jobs.record, "due", wait=1)
    later = enqueue(app, worker_jobs.record, "later", wait=3600)
    boom = enqueue(app, worker_jobs.fail, "boom")
    flaky = enqueue(app, worker_jobs.flaky, "flaky")  # retried at once twice, then fails
    enqueue(app, once_jobs.enqueue_record, "parent")
    hourly = [enqueue(app, once_jobs.hourly, f"hourly-{index}") for index in range(3)]
    # The scheduled job has come due (by the database's clock) before the run starts.
    support.wait_until(lambda: dispatch.next_due_in(engine) == 0.0, timeout=10)
    assert due in scheduled_ids(engine)

    work = launcher.start("--once", app_module=APP)

    assert work.wait(RUN_TIMEOUT) == 0, work.output()
    output = work.output()
    assert run_values(engine, "worker_test.record") == [
        "due",
        "parent-child",
        "ready-1",
        "ready-2",
    ]
    assert run_values(engine, "once_test.enqueue_record") == ["parent"]
    assert run_values(engine, "worker_test.fail") == ["boom"]
    assert run_values(engine, "worker_test.flaky") == ["flaky"] * 3
    (admitted,) = runtime_support.runs(engine, "once_test.hourly")
    # Left: the later job scheduled, the two hourly jobs deferred by their rate limit.
    assert scheduled_ids(engine, sa.not_(IS_DEFERRED)) == {later}
    deferred = scheduled_ids(engine, IS_DEFERRED)
    assert len(deferred) == 2 and deferred < set(hourly)
    assert set(runtime_support.failures(engine)) == {boom, flaky}
    assert support.count(engine, READY) == 0
    assert support.count(engine, CLAIMED) == 0
    assert runtime_support.processes(engine) == []
    assert (
        "Worked off 10 jobs: 6 finished, 2 retried, 2 failed (flask solidq jobs --state failed)."
        in output
    )
    assert "Left 3 jobs waiting:\n" in output
    # A deferred job is looked at again at most 5 minutes ahead (gcra.MAX_AHEAD).
    assert re.search(
        r"\n  2 wait for their rate limit, the next due at \S+ \S+ UTC"
        r" \(in [45]m\d\ds\): flask solidq jobs --state deferred\n",
        output,
    ), output
    assert re.search(
        r"\n  1 is scheduled later, the next due at \S+ \S+ UTC \(in (59m\d\ds|1h00m)\):"
        r" flask solidq jobs --state scheduled\n",
        output,
    ), output


def test_once_says_which_jobs_it_left_to_other_processes_paused_queues_and_other_queues(
    app, engine, launcher
):
    # A concurrency slot held by a job another (live) process claimed: the next one blocks.
    holder = enqueue(app, once_jobs.exclusive, "holder")
    support.register_claimers(engine, [10**6])
    with app.app_context():
        claimed = claim_operation.claim(engine, claim_operation.QueueSelector(("*",)), 5, 10**6)
    assert [job.id for job in claimed] == [holder]
    blocked = enqueue(app, once_jobs.exclusive, "waiter")
    paused = enqueue(app, worker_jobs.record, "paused", queue="held")
    with app.app_context():
        assert app.test_cli_runner().invoke(args=["solidq", "pause", "held"]).exit_code == 0
    elsewhere = enqueue(app, worker_jobs.record, "elsewhere", queue="elsewhere")
    enqueue(app, worker_jobs.record, "mine")

    work = launcher.start(
        "--once",
        "--queues",
        "default,held",
        app_module=APP,
        config={"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 120},
    )

    assert work.wait(RUN_TIMEOUT) == 0, work.output()
    output = work.output()
    assert run_values(engine) == ["mine"]
    assert [row.job_id for row in support.rows(engine, BLOCKED)] == [blocked]
    assert {row.job_id for row in support.rows(engine, READY)} == {paused, elsewhere}
    assert [row.job_id for row in support.rows(engine, CLAIMED)] == [holder]
    assert "Worked off 1 job: 1 finished." in output
    assert "Left 3 jobs waiting:\n" in output
    assert "  1 waits for a concurrency slot held elsewhere: flask solidq jobs --state blocked" in (
        output
    )
    assert "  1 is ready in a paused queue: flask solidq status lists the pauses" in output
    assert "  1 runs in another process: flask solidq jobs --state claimed" in output
    assert "Not its queues (default, held): 1 job ready, scheduled or blocked in others." in (
        output
    )
    assert [row.id for row in runtime_support.processes(engine)] == [10**6]


def test_once_in_thread_mode_works_off_a_job_and_the_job_it_enqueues(app, engine, launcher):
    enqueue(app, once_jobs.enqueue_record, "threaded")

    work = launcher.start("--once", "--mode", "thread", app_module=APP)

    assert work.wait(RUN_TIMEOUT) == 0, work.output()
    assert run_values(engine) == ["threaded", "threaded-child"]
    assert "Worked off 2 jobs: 2 finished." in work.output()
    assert "Left no job waiting." in work.output()
    assert runtime_support.processes(engine) == []


def test_once_with_nothing_due_exits_0_at_once_and_says_so(app, engine, launcher):
    enqueue(app, worker_jobs.record, "tomorrow", wait=86_400)

    work = launcher.start("--once", app_module=APP)

    assert work.wait(RUN_TIMEOUT) == 0, work.output()
    assert "Worked off no job: none was ready or due." in work.output()
    assert "  1 is scheduled later, the next due at " in work.output()
    assert runtime_support.runs(engine) == []


def test_sigterm_stops_claiming_lets_the_running_job_finish_and_exits_143(app, engine, launcher):
    long = enqueue(app, worker_jobs.sleep, "long", 2)
    waiting = [enqueue(app, worker_jobs.record, f"after-{index}") for index in range(2)]
    work = launcher.start("--once", "--threads", "1", app_module=APP)
    support.wait_until(lambda: running(engine, "long"), timeout=30)
    # It is on the process roll while it runs: the supervisor and its worker, both --once.
    rows = runtime_support.processes(engine)
    assert sorted(row.kind for row in rows) == ["Supervisor(fork)", "Worker"]
    assert all(json.loads(row.metadata)["once"] is True for row in rows)

    signalled_at = utcnow()
    work.signal(signal.SIGTERM)

    assert work.wait(20) == 128 + signal.SIGTERM, work.output()
    (run,) = runtime_support.runs(engine)
    assert run.finished_at > signalled_at
    assert runtime_support.finished_ids(engine) == {long}
    assert {row.job_id for row in support.rows(engine, READY)} == set(waiting)
    assert support.count(engine, CLAIMED) == 0
    assert runtime_support.processes(engine) == []
    output = work.output()
    assert "Stopped by SIGTERM before the due jobs were all worked off." in output
    assert "Worked off 1 job: 1 finished." in output
    assert "  2 are ready (the stop came first)" in output


def test_a_once_worker_that_dies_is_not_replaced_its_job_fails_and_the_run_exits_1(
    app, engine, launcher
):
    doomed = enqueue(app, worker_jobs.sleep, "doomed", 30)
    work = launcher.start("--once", app_module=APP)
    run = support.wait_until(lambda: running(engine, "doomed"), timeout=30)

    os.kill(run.pid, signal.SIGKILL)

    assert work.wait(20) == 1, work.output()
    assert list(runtime_support.failures(engine)) == [doomed]
    assert runtime_support.processes(engine) == []
    assert "A worker died before finding the work done: worker-0.0 (pid " in work.output()
    assert "was killed by SIGKILL" in work.output()


def test_the_next_once_run_prunes_a_killed_run_and_works_off_its_released_job(
    app, engine, launcher
):
    config = {"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 2, "SOLIDQ_ON_WORKER_DEATH": "release"}
    job_id = enqueue(app, worker_jobs.sleep, "orphaned", 30, 0)  # no sleep when run again
    first = launcher.start("--once", app_module=APP, config=config)
    support.wait_until(lambda: running(engine, "orphaned"), timeout=30)
    first.kill()  # the whole group: nobody deregisters or releases anything
    dead = runtime_support.processes(engine)
    assert len(dead) == 2
    # Silent past the threshold by the time the next run looks.
    support.wait_until(
        lambda: all((utcnow() - row.last_heartbeat_at).total_seconds() > 2.5 for row in dead),
        timeout=10,
    )

    second = launcher.start("--once", app_module=APP, config=config)

    assert second.wait(RUN_TIMEOUT) == 0, second.output()
    assert runtime_support.finished_ids(engine) == {job_id}
    assert [run.finished_at is None for run in runtime_support.runs(engine)] == [True, False]
    assert runtime_support.processes(engine) == []
    assert "Worked off 1 job: 1 finished." in second.output()


def test_once_refuses_only_before_starting_anything(app, engine):
    result = app.test_cli_runner().invoke(args=["solidq", "work", "--once", "--only", "worker"])

    assert result.exit_code == 1
    assert "--once runs workers only (each dispatches the due jobs itself): leave out --only." in (
        result.output
    )
    assert runtime_support.processes(engine) == []

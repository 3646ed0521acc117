"""Recurring tasks run by `flask solidq work --only scheduler`: two schedulers at once (one in
fork mode, one in thread mode) enqueue each tick exactly once; an invalid schedule stops
`flask solidq work` before it starts."""

from __future__ import annotations

import signal

import pytest

from flask_solidq import models
from tests import support
from tests.support import runtime as runtime_support
from tests.support.runtime import JOBS
from tests.support.runtime import READY

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

RECURRING_EXECUTIONS = models.RecurringExecution.__table__

EVERY_SECOND = {
    "SOLIDQ_RECURRING": {
        "worker_test.tick": {
            "job": "tests.jobs.worker:record",
            "args": ["tick"],
            "schedule": "every second",
        }
    }
}


def test_two_schedulers_at_once_enqueue_each_tick_of_a_recurring_task_exactly_once(
    app, engine, launcher
):
    # One in fork mode, one in thread mode: both race for every tick.
    schedulers = [
        launcher.start("--only", "scheduler", config=EVERY_SECOND),
        launcher.start("--only", "scheduler", "--mode", "thread", config=EVERY_SECOND),
    ]
    runtime_support.wait_for_kinds(
        engine, ["Scheduler", "Scheduler", "Supervisor(fork)", "Supervisor(thread)"]
    )
    support.wait_until(lambda: support.count(engine, RECURRING_EXECUTIONS) >= 4, timeout=20)
    for scheduler in schedulers:
        scheduler.signal(signal.SIGTERM)
    for scheduler in schedulers:
        assert scheduler.wait(15) == 0, scheduler.output()

    executions = support.rows(engine, RECURRING_EXECUTIONS)
    run_ats = [execution.run_at for execution in executions]
    assert len(set(run_ats)) == len(run_ats)
    assert all(run_at.microsecond == 0 for run_at in run_ats)
    assert {execution.task_key for execution in executions} == {"worker_test.tick"}
    # One job a tick, and no job without its tick: the losing scheduler rolled its job back.
    job_ids = [execution.job_id for execution in executions]
    assert len(set(job_ids)) == len(job_ids)
    assert sorted(row.id for row in support.rows(engine, JOBS)) == sorted(job_ids)
    assert sorted(row.job_id for row in support.rows(engine, READY)) == sorted(job_ids)
    # Both schedulers went for the same ticks; the ledger let one of them have each.
    output = "".join(scheduler.output() for scheduler in schedulers)
    assert "already enqueued" in output
    assert runtime_support.processes(engine) == []


def test_an_invalid_schedule_makes_work_exit_non_zero_naming_the_task(app, engine, launcher):
    config = {
        "SOLIDQ_RECURRING": {
            "worker_test.broken": {"job": "tests.jobs.worker:record", "schedule": "every 7 minutes"}
        }
    }
    work = launcher.start(config=config)

    assert work.wait(30) != 0
    assert "worker_test.broken" in work.output()
    assert "every 7 minutes" in work.output()
    assert runtime_support.processes(engine) == []
    assert support.count(engine, JOBS) == 0

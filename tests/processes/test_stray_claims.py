"""Stray claims: a claim that committed on the server while its worker saw an error (the reply
was lost) must not stay claimed under a live worker. ``release_strays`` puts back to ready the
claims of a process that none of its threads holds; a running worker calls it every heartbeat
interval and after a failed claim. (The lost reply itself is produced in
tests/processes/test_faults.py, through a proxy that resets connections.)"""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.operations import release
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import READY
from tests.support.runtime import SCHEDULED

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher


def enqueue_records(app, *values: str, **options: t.Any) -> list[int]:
    with app.app_context():
        job = worker_jobs.record.set(**options) if options else worker_jobs.record
        return [job.perform_later(value).provider_job_id for value in values]


def make_claimed(engine: sa.Engine, job_ids: t.Sequence[int], process_id: int) -> None:
    """Move ready (or scheduled) jobs to claimed executions of ``process_id``, as a claim
    would."""
    with engine.begin() as connection:
        connection.execute(READY.delete().where(READY.c.job_id.in_(job_ids)))
        connection.execute(SCHEDULED.delete().where(SCHEDULED.c.job_id.in_(job_ids)))
        connection.execute(
            CLAIMED.insert(),
            [
                {"job_id": job_id, "process_id": process_id, "created_at": utcnow()}
                for job_id in job_ids
            ],
        )


def claims(engine: sa.Engine) -> dict[int, int | None]:
    """job id -> the process id of its claim."""
    return {row.job_id: row.process_id for row in support.rows(engine, CLAIMED)}


def ready_ids(engine: sa.Engine) -> set[int]:
    return {row.job_id for row in support.rows(engine, READY)}


def test_release_strays_puts_back_the_claims_of_the_process_that_are_not_held(
    app, engine, runs_table
):
    held, stray, other = enqueue_records(app, "held", "stray", "other")
    make_claimed(engine, [held, stray], process_id=7001)
    make_claimed(engine, [other], process_id=7002)

    assert release.release_strays(engine, 7001, {held}) == 1

    assert claims(engine) == {held: 7001, other: 7002}
    assert ready_ids(engine) == {stray}
    # Nothing more is stray; a process with no claims has none.
    assert release.release_strays(engine, 7001, {held}) == 0
    assert release.release_strays(engine, 7003, set()) == 0
    assert release.release_strays(engine, 7002, {other}) == 0
    assert claims(engine) == {held: 7001, other: 7002}


def test_release_strays_with_nothing_held_releases_every_claim_of_the_process(
    app, engine, runs_table
):
    job_ids = enqueue_records(app, "a", "b", "c")
    make_claimed(engine, job_ids, process_id=7001)

    assert release.release_strays(engine, 7001, []) == 3

    assert claims(engine) == {}
    assert ready_ids(engine) == set(job_ids)


@pytest.mark.processes
def test_a_running_worker_releases_a_claim_of_its_own_that_no_thread_holds_and_runs_it_once(
    app, engine, launcher
):
    work = launcher.start()
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
    (worker,) = runtime_support.processes(engine, "Worker")
    # A claim the worker's own process made, as if its reply had been lost. (Scheduled for
    # later first, so the worker can't claim it before the test does.)
    (job_id,) = enqueue_records(app, "lost reply", wait=3600)
    make_claimed(engine, [job_id], process_id=worker.id)

    # Within a heartbeat interval (0.5 s here) the worker releases it and runs it, once.
    support.wait_until(lambda: runtime_support.finished_ids(engine) == {job_id}, timeout=10)
    assert [run.value for run in runtime_support.runs(engine)] == ["lost reply"]
    assert claims(engine) == {}
    support.wait_until(lambda: "released 1 claims none of its threads held" in work.output())

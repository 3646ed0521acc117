"""Attempt history and run durations, on every backend (issue 22, items 5 and 8).

Each failed run of a job (a ``retry_on`` retry, a failure for good, a worker that died) is
kept in ``solidq_job_failures``, across a retry by hand, until the job goes; a finished job
keeps when its run started (``started_at``, its claim's ``created_at``), and the finished
list is in finish order, newest first. Jobs run and fail for real, in this process (the
helpers of tests/operations/test_job_actions.py).
"""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.cli.job_rendering import render_job
from flask_solidq.models.failures import KEPT_PER_JOB
from flask_solidq.operations import attempts
from flask_solidq.operations import maintenance
from flask_solidq.operations import release
from flask_solidq.operations.outcomes import error_json
from flask_solidq.operations.outcomes import failure_json
from flask_solidq.reads import browse
from flask_solidq.reads.attempts import duration_text
from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import PROCESS_ID
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import job_action as jobs
from tests.operations.test_job_actions import clean_job_module  # noqa: F401 - autouse
from tests.operations.test_job_actions import detail
from tests.operations.test_job_actions import discard
from tests.operations.test_job_actions import enqueue
from tests.operations.test_job_actions import failed_job
from tests.operations.test_job_actions import finished_job
from tests.operations.test_job_actions import retry
from tests.operations.test_job_actions import run_ready
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
FAILURES = t.cast(sa.Table, models.JobFailure.__table__)

FLAKY = "tests.jobs.job_action.Flaky"
MESSAGE = "job_action_test.retried failed on purpose for {}"


def attempt_rows(engine: sa.Engine, job_id: int) -> list[sa.Row[t.Any]]:
    return support.rows(engine, FAILURES, FAILURES.c.job_id == job_id)


def flaky_job(app: Flask, engine: sa.Engine, note: str) -> int:
    """A job whose ``retry_on(Flaky, attempts=2)`` ran out: one retry, then a failure."""
    return failed_job(app, engine, note, definition=jobs.retried, error=jobs.Flaky)


def test_a_retry_on_retry_and_the_final_failure_are_each_kept_as_an_attempt(app, engine):
    job_id = flaky_job(app, engine, "twice")

    found = detail(engine, job_id)
    assert [(a.executions, a.exception_class, a.message) for a in found.attempts] == [
        (2, FLAKY, MESSAGE.format("twice")),
        (1, FLAKY, MESSAGE.format("twice")),
    ]
    (failed,) = support.rows(engine, FAILED, FAILED.c.job_id == job_id)
    # The final failure's attempt is written with its failed execution, at the same moment.
    assert found.attempts[0].failed_at == failed.created_at == found.summary.failed_at
    assert found.attempts[1].failed_at <= found.attempts[0].failed_at
    # Each attempt keeps its own backtrace, as a failed execution's error does.
    (first, _second) = sorted(attempt_rows(engine, job_id), key=lambda row: row.id)
    assert json.loads(first.error)["backtrace"][-1] == f"{FLAKY}: {MESSAGE.format('twice')}"
    with engine.connect() as connection:
        (listed,) = browse.list_jobs(connection, browse.State.FAILED)
    assert (listed.id, listed.failed_at) == (job_id, failed.created_at)


def test_attempts_are_kept_across_a_retry_by_hand_until_the_job_finishes(app, engine):
    job_id = flaky_job(app, engine, "again")

    assert retry(app, job_id) == 1
    # The failed execution is gone; its error is still in view.
    assert [a.executions for a in detail(engine, job_id).attempts] == [2, 1]
    run_ready(app, engine)  # the rule's attempts were given back: two more failed runs
    assert job_state(engine, job_id) == "failed"
    assert [a.executions for a in detail(engine, job_id).attempts] == [4, 3, 2, 1]

    del jobs.FAILURES["again"]
    assert retry(app, job_id) == 1
    run_ready(app, engine)

    assert job_state(engine, job_id) == "finished"
    found = detail(engine, job_id)
    assert [a.executions for a in found.attempts] == [4, 3, 2, 1]
    assert found.summary.failed_at is None
    assert "Failed attempts (newest first, the last 25 kept):" in render_job(found, utcnow())


def test_a_job_that_succeeds_writes_no_attempt(app, engine):
    job_id = finished_job(app, engine, "fine")

    assert attempt_rows(engine, job_id) == []
    assert detail(engine, job_id).attempts == []
    assert "Failed attempts" not in render_job(detail(engine, job_id), utcnow())


def test_attempts_go_with_their_job_when_it_is_discarded_or_cleared(app, engine):
    discarded = flaky_job(app, engine, "discarded")
    cleared = flaky_job(app, engine, "cleared")
    del jobs.FAILURES["cleared"]
    retry(app, cleared)
    run_ready(app, engine)
    assert len(attempt_rows(engine, discarded)) == len(attempt_rows(engine, cleared)) == 2

    assert discard(app, discarded) == 1
    assert attempt_rows(engine, discarded) == []
    assert len(attempt_rows(engine, cleared)) == 2

    later = utcnow() + dt.timedelta(seconds=1)
    assert maintenance.clear_finished_in_batches(engine, finished_before=later) == 1
    assert support.count(engine, FAILURES) == 0


def test_a_job_whose_worker_died_gets_an_attempt_without_a_run_number(app, engine):
    job_id = enqueue(app, jobs.task, "orphan")
    claim(engine)
    error = failure_json("flask_solidq.errors.ProcessExitError", "its worker died")

    with db.write(engine) as connection:
        release.fail_claims(connection, [PROCESS_ID], error)

    assert job_state(engine, job_id) == "failed"
    (attempt,) = detail(engine, job_id).attempts
    assert (attempt.executions, attempt.exception_class, attempt.message) == (
        None,
        "flask_solidq.errors.ProcessExitError",
        "its worker died",
    )


def test_a_job_keeps_only_its_newest_attempts(app, engine):
    job_id = enqueue(app, jobs.task, "endless")
    now = utcnow()

    with engine.begin() as connection:
        for run in range(1, KEPT_PER_JOB + 6):
            error = error_json(ValueError(f"run {run}"), executions=run)
            attempts.record(connection, [(job_id, error)], now)

    runs = list(range(KEPT_PER_JOB + 5, 5, -1))
    assert sorted(row.executions for row in attempt_rows(engine, job_id)) == sorted(runs)
    found = detail(engine, job_id)
    assert [a.executions for a in found.attempts] == runs
    assert [a.message for a in found.attempts][:2] == ["run 30", "run 29"]
    assert found.attempts_kept == KEPT_PER_JOB == 25


def test_a_finished_job_keeps_when_its_run_started(app, engine):
    before = utcnow()
    job_id = enqueue(app, jobs.task, "timed")
    (claimed,) = claim(engine)
    (claim_row,) = support.rows(engine, CLAIMED, CLAIMED.c.job_id == job_id)
    finish(engine, perform(app, [claimed]))

    (job,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    assert job.started_at == claim_row.created_at
    assert before <= job.created_at <= job.started_at <= job.finished_at
    summary = detail(engine, job_id).summary
    assert summary.duration == duration_text(job.started_at, job.finished_at)
    assert summary.duration.endswith("s")
    assert "ran for" in render_job(detail(engine, job_id), utcnow())


def test_jobs_finished_together_each_keep_their_own_claims_start(app, engine):
    """One finisher group holds jobs of several claims: each keeps its own claim's time
    (one statement, an arm per distinct start)."""
    first_claim = [enqueue(app, jobs.task, f"first {n}") for n in range(2)]
    claimed = claim(engine, limit=2)
    second_claim = enqueue(app, jobs.task, "second")
    claimed += claim(engine)
    third_claim = enqueue(app, jobs.task, "third")
    claimed += claim(engine)
    claim_times = {row.job_id: row.created_at for row in support.rows(engine, CLAIMED)}
    assert len(set(claim_times.values())) >= 3  # a claim's rows may each take their own

    finish(engine, perform(app, claimed))

    finished = {row.id: row.started_at for row in support.rows(engine, JOBS)}
    assert finished == claim_times
    assert set(finished) == {*first_claim, second_claim, third_claim}


def test_a_job_finished_before_start_times_were_kept_shows_no_duration(app, engine):
    job_id = finished_job(app, engine, "old")
    with engine.begin() as connection:
        connection.execute(JOBS.update().where(JOBS.c.id == job_id).values(started_at=None))

    summary = detail(engine, job_id).summary
    assert summary.duration == ""
    assert "ran for" not in render_job(detail(engine, job_id), utcnow())


def test_the_finished_list_is_in_finish_order_newest_first_a_page_at_a_time(app, engine):
    ids = [finished_job(app, engine, f"f{n}") for n in range(5)]
    start = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    # Finish times out of id order, two of them equal (then the higher id comes first).
    minutes = {ids[0]: 3, ids[1]: 1, ids[2]: 4, ids[3]: 1, ids[4]: 0}
    with engine.begin() as connection:
        for job_id, minute in minutes.items():
            finished_at = start + dt.timedelta(minutes=minute)
            connection.execute(
                JOBS.update()
                .where(JOBS.c.id == job_id)
                .values(finished_at=finished_at, started_at=finished_at - dt.timedelta(seconds=2))
            )

    pages = []
    before = None
    with engine.connect() as connection:
        while page := browse.list_jobs(connection, browse.State.FINISHED, before=before, limit=2):
            pages.append([job.id for job in page])
            before = page[-1].id
        first = browse.list_jobs(connection, browse.State.FINISHED, limit=1)

    assert pages == [[ids[2], ids[0]], [ids[3], ids[1]], [ids[4]]]
    assert first[0].duration == "2.000s"


def test_durations_read_as_seconds_minutes_or_hours() -> None:
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def took(**delta: float) -> str:
        return duration_text(start, start + dt.timedelta(**delta))

    assert took(milliseconds=42) == "0.042s"
    assert took(seconds=59.5) == "59.500s"
    assert took(minutes=3, seconds=5) == "3m 05s"
    assert took(hours=2, minutes=1, seconds=30) == "2h 01m"
    assert duration_text(None, start) == ""

"""Where the controls meet retries, manual actions and signal receivers (issue 19): a retry
is never lost to a concurrency key, a manual retry takes the keys a job has today, and a
coalesce receiver's error never turns a committed call into a failed enqueue. On every
backend, with the operations called directly."""

from __future__ import annotations

import json
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import errors
from flask_solidq import signals
from flask_solidq.operations import claim as claim_operation
from flask_solidq.operations import dispatch
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import OutcomeKind
from tests import support
from tests.jobs import controls_meet as jobs
from tests.support.concurrency import FAILED
from tests.support.concurrency import JOBS
from tests.support.concurrency import READY
from tests.support.concurrency import SEMAPHORES
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask

PROCESS_ID = 4343
CLAIMERS = (PROCESS_ID,)


def claim_one(engine: sa.Engine) -> claim_operation.ClaimedJob:
    (claimed,) = claim_operation.claim(engine, claim_operation.QueueSelector(("*",)), 1, PROCESS_ID)
    return claimed


def run(app: Flask, engine: sa.Engine, claimed: claim_operation.ClaimedJob) -> t.Any:
    """Perform a claimed job and store its outcome; return the outcome."""
    with app.app_context():
        outcome = execute.perform(claimed)
    finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=False)
    return outcome


def enqueue(app: Flask, definition: t.Any, *args: t.Any, **kwargs: t.Any) -> int:
    with app.app_context():
        job = definition.perform_later(*args, **kwargs)
    assert job.successfully_enqueued
    return t.cast(int, job.provider_job_id)


def error_of(engine: sa.Engine, job_id: int) -> dict[str, t.Any]:
    (row,) = support.rows(engine, FAILED, FAILED.c.job_id == job_id)
    return t.cast("dict[str, t.Any]", json.loads(row.error))


# Item 2: a coalesced job's retry is never discarded by its concurrency key.


def test_a_coalesced_jobs_manual_retry_to_a_taken_slot_fails_with_its_work_kept(app, engine):
    failed = enqueue(app, jobs.dedupe_discard, "a", fail="boom")
    assert run(app, engine, claim_one(engine)).kind is OutcomeKind.FAILED
    holder = enqueue(app, jobs.dedupe_discard, "b")
    assert claim_one(engine).id == holder  # running: it holds the only slot

    with app.app_context():
        assert support.solidq.retry(failed) == 1

    assert job_state(engine, failed) == "failed"
    error = error_of(engine, failed)
    assert error["exception_class"] == "flask_solidq.errors.EnqueueError"
    assert "on_conflict='discard'" in error["message"]
    (row,) = support.rows(engine, JOBS, JOBS.c.id == failed)
    assert '"a"' in row.arguments  # its work is kept


def test_a_coalesced_jobs_retry_after_a_wait_to_a_taken_slot_fails_with_its_work_kept(app, engine):
    retried = enqueue(app, jobs.dedupe_discard, "a", fail="flaky")
    assert run(app, engine, claim_one(engine)).kind is OutcomeKind.RETRIED
    assert job_state(engine, retried) == "scheduled"
    holder = enqueue(app, jobs.dedupe_discard, "b")
    assert claim_one(engine).id == holder

    support.make_due(engine, retried)
    dispatch.dispatch_due(engine, 10)

    assert job_state(engine, retried) == "failed"
    assert error_of(engine, retried)["exception_class"] == "flask_solidq.errors.EnqueueError"


def test_a_fresh_coalesced_job_to_a_taken_slot_is_still_discarded(app, engine):
    holder = enqueue(app, jobs.dedupe_discard, "a")
    assert claim_one(engine).id == holder
    with app.app_context():
        job = jobs.dedupe_discard.perform_later("b")
    # Destroyed by the conflict on its way to ready: no status, no job (seed 003).
    assert (job.coalesce_status, job.provider_job_id) == (None, None)
    assert [row.id for row in support.rows(engine, JOBS)] == [holder]


def test_a_plain_jobs_retry_to_a_taken_slot_is_discarded_as_on_solid_queue(app, engine):
    failed = enqueue(app, jobs.plain_discard, "a", fail=True)
    assert run(app, engine, claim_one(engine)).kind is OutcomeKind.FAILED
    holder = enqueue(app, jobs.plain_discard, "b")
    assert claim_one(engine).id == holder
    with app.app_context():
        assert support.solidq.retry(failed) == 1
    assert [row.id for row in support.rows(engine, JOBS)] == [holder]


# Item 3: a coalesce receiver's error is its own.


def test_a_coalesce_receiver_that_raises_a_database_error_leaves_the_call_reported_stored(
    app, engine
):
    def receiver(sender: t.Any, **payload: t.Any) -> None:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT * FROM meet_test_no_such_table"))

    with app.app_context(), signals.coalesce.connected_to(receiver):
        job = jobs.dedupe_discard.new("a")
        with pytest.raises(sa.exc.SQLAlchemyError) as raised:
            job.perform_later()
    assert not isinstance(raised.value, errors.EnqueueError)
    assert job.successfully_enqueued is True
    assert job.coalesce_status == "created"
    assert [row.id for row in support.rows(engine, JOBS)] == [job.provider_job_id]


# Item 4: a manual retry takes the keys a job has today.


def test_a_manual_retry_gives_a_job_stored_without_keys_the_keys_it_has_today(app, engine):
    today = (jobs.late_keys.rate_limit_key_for("acct"), jobs.late_keys.concurrency_key_for("acct"))
    assert all(today)
    old = enqueue(app, jobs.late_keys, "acct", fail=True)
    with engine.begin() as connection:  # enqueued before a deploy declared the limits
        connection.execute(
            JOBS.update().where(JOBS.c.id == old).values(rate_limit_key=None, concurrency_key=None)
        )
        connection.execute(SEMAPHORES.delete())  # and so took no slot
    assert run(app, engine, claim_one(engine)).kind is OutcomeKind.FAILED

    with app.app_context():
        assert support.solidq.retry(old) == 1

    (retried,) = support.rows(engine, JOBS, JOBS.c.id == old)
    assert (retried.rate_limit_key, retried.concurrency_key) == today
    assert job_state(engine, old) == "ready"  # it took the key's one slot on the way
    assert support.count(engine, READY) == 1

"""Every way a batch job ends, fails, is discarded or comes back is counted once, in its
batch, in the same transaction (:mod:`flask_solidq.operations.job_ends`).

Two halves: the package's source writes those changes only through ``job_ends`` (so a new
path can't forget the batch; ``tests/transitions/test_only_writers.py`` reads the source for
it), and each transition, driven with a batch job on every backend,
leaves the batch's counters equal to what its jobs' rows say."""

from __future__ import annotations

import inspect
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.operations import dispatch
from flask_solidq.operations import finalize
from flask_solidq.operations import job_ends
from flask_solidq.operations import release
from flask_solidq.operations.outcomes import OutcomeKind
from tests import support
from tests.batches.test_batches import batch_counts
from tests.batches.test_batches import callbacks_run
from tests.batches.test_batches import run_all
from tests.controls.concurrency.test_concurrency_controls import PROCESS_ID
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import batch as batch_jobs
from tests.jobs import controls_meet as meet_jobs
from tests.support import solidq
from tests.support.concurrency import job_state

JOBS = models.JobRecord.__table__
FAILED = models.FailedExecution.__table__
BATCHES = models.BatchRecord.__table__


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    batch_jobs.PERFORMED.clear()
    yield batch_jobs.PERFORMED
    batch_jobs.PERFORMED.clear()


def assert_counts_match_jobs(engine: sa.Engine, batch_id: int) -> None:
    """The batch's counters say what its jobs' rows say: pending are the jobs neither
    finished nor failed; failed at least the ones with a failed execution (a failed job
    discarded stays counted failed); completed the rest of its total (finished, or discarded
    and gone); it is finished exactly when nothing is pending."""
    failed = sa.exists().where(FAILED.c.job_id == JOBS.c.id)
    with engine.connect() as connection:
        batch = connection.execute(sa.select(BATCHES).where(BATCHES.c.id == batch_id)).one()
        jobs = connection.execute(
            sa.select(JOBS.c.finished_at, failed.label("failed")).where(JOBS.c.batch_id == batch_id)
        ).all()
    failures = sum(1 for job in jobs if job.failed)
    pending = sum(1 for job in jobs if job.finished_at is None and not job.failed)
    assert batch.pending_jobs == pending
    assert batch.failed_jobs >= failures
    assert batch.completed_jobs == batch.total_jobs - pending - batch.failed_jobs >= 0
    assert (batch.finished_at is not None) == (pending == 0)
    assert (batch.failed_at is not None) == (pending == 0 and batch.failed_jobs > 0)


# The source: job_ends is the only caller of the end writers (tests/transitions).


def test_every_writer_of_job_ends_counts_in_the_batch_and_has_a_test_here():
    writers = {
        name
        for name, function in inspect.getmembers(job_ends, inspect.isfunction)
        if function.__module__ == job_ends.__name__ and not name.startswith("_")
    }
    assert writers == {
        "store_outcomes",
        "fail",
        "discard",
        "hold_back",
        "reopen",
        "batch_ids",
        "let_go",
        "finish_held",
    }
    assert "_count(" in inspect.getsource(job_ends.store_outcomes)
    for name in writers - {"store_outcomes", "batch_ids", "let_go", "finish_held"}:
        assert "_count(" in inspect.getsource(getattr(job_ends, name)), name


# The transitions, each with a batch job.


def test_a_finisher_counts_finished_discarded_and_failed_jobs_and_keeps_retried_ones_pending(
    app, engine
):
    with app.app_context():
        with solidq.batch() as batch:
            batch_jobs.work.perform_later(1)
            batch_jobs.dropped.perform_later(2)  # discard_on
            batch_jobs.fail.perform_later(3)
            batch_jobs.retried.perform_later(4)  # a retry first, then a failure
    outcomes = finalize.finalize_all(
        engine, PROCESS_ID, perform(app, claim(engine, 10)), preserve_finished=True
    )
    assert sorted(o.kind.value for o in outcomes) == ["discarded", "failed", "finished", "retried"]
    assert batch_counts(app, batch.id) == ("pending", 4, 2, 1, 1)
    assert_counts_match_jobs(engine, batch.id)
    run_all(app, engine, preserve_finished=True)
    assert batch_counts(app, batch.id) == ("failed", 4, 2, 2, 0)
    assert_counts_match_jobs(engine, batch.id)


@pytest.mark.parametrize("state", ["scheduled", "ready", "blocked", "failed"])
def test_a_person_discarding_a_job_counts_it_done_unless_it_had_failed(app, engine, state):
    with app.app_context():
        with solidq.batch() as batch:
            holder = batch_jobs.one_at_a_time.perform_later("acme")
            if state == "scheduled":
                job = batch_jobs.work.set(wait=3600).perform_later(1)
            elif state == "ready":
                job = batch_jobs.work.perform_later(1)
            elif state == "blocked":
                job = batch_jobs.one_at_a_time.perform_later("acme")
            else:
                job = batch_jobs.fail.perform_later(1)
    if state == "failed":
        run_all(app, engine)
    assert job_state(engine, job.provider_job_id) == state
    with app.app_context():
        assert solidq.discard(job.provider_job_id) == 1
    assert_counts_match_jobs(engine, batch.id)
    # The holder ran with the failing job, or is still pending.
    counts = (2, 1, 1, 0) if state == "failed" else (2, 1, 0, 1)
    assert batch_counts(app, batch.id)[1:] == counts
    assert holder.provider_job_id is not None


def test_a_concurrency_limit_discarding_a_due_job_counts_it_done(app, engine):
    with app.app_context():
        with solidq.batch() as batch:
            batch_jobs.only_one.perform_later("acme")
            later = batch_jobs.only_one.set(wait=3600).perform_later("acme")
    support.make_due(engine, later.provider_job_id)
    assert dispatch.dispatch_due(engine, 10) == 1
    assert batch_counts(app, batch.id) == ("pending", 2, 1, 0, 1)
    assert_counts_match_jobs(engine, batch.id)


def test_a_job_discarded_at_its_enqueue_in_a_running_jobs_block_is_added_and_done(
    app, engine, performed
):
    """Reproduced: the discarded job was counted done without being added, so the batch
    finished while its adder ran, before the job it added."""
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("end")) as batch:
            batch_jobs.adds_two_to_one_slot.perform_later("acme")
    (adder,) = claim(engine, 1)
    outcomes = perform(app, [adder])
    assert batch_counts(app, batch.id) == ("pending", 3, 1, 0, 2)
    assert_counts_match_jobs(engine, batch.id)
    finalize.finalize_all(engine, PROCESS_ID, outcomes, preserve_finished=True)
    assert batch_counts(app, batch.id) == ("pending", 3, 2, 0, 1)
    assert callbacks_run(performed) == []
    run_all(app, engine, preserve_finished=True)
    assert batch_counts(app, batch.id) == ("completed", 3, 3, 0, 0)
    assert callbacks_run(performed) == [("end", batch.id, "completed", 3, 3, 0, 0)]
    assert_counts_match_jobs(engine, batch.id)


@pytest.mark.parametrize("how", ["by hand", "after a wait"])
def test_a_coalesced_retry_a_concurrency_limit_fails_counts_as_failed(app, engine, how):
    """Reproduced: the failure a concurrency conflict stored for a coalesced job's retry was
    never counted, and the batch stayed pending for good."""
    with app.app_context():
        with solidq.batch() as batch:
            retried = meet_jobs.dedupe_discard.perform_later(
                "a", fail="boom" if how == "by hand" else "flaky"
            )
    run_all(app, engine)
    with app.app_context():
        holder = meet_jobs.dedupe_discard.perform_later("b")  # outside the batch
    (claimed,) = claim(engine, 1)
    assert claimed.id == holder.provider_job_id  # running: it holds the only slot
    if how == "by hand":
        with app.app_context():
            assert solidq.retry(retried.provider_job_id) == 1
    else:
        support.make_due(engine, retried.provider_job_id)
        dispatch.dispatch_due(engine, 10)
    assert job_state(engine, retried.provider_job_id) == "failed"
    assert batch_counts(app, batch.id) == ("failed", 1, 0, 1, 0)
    assert_counts_match_jobs(engine, batch.id)
    # Retrying it again by hand doesn't count it twice.
    with app.app_context():
        assert solidq.retry(retried.provider_job_id) == 1
    assert batch_counts(app, batch.id) == ("failed", 1, 0, 1, 0)
    assert_counts_match_jobs(engine, batch.id)


@pytest.mark.parametrize("policy", ["fail", "release"])
def test_a_dead_workers_claims_fail_or_stay_pending_in_their_batch(app, engine, policy):
    with app.app_context():
        with solidq.batch() as batch:
            batch_jobs.work.perform_later(1)
            batch_jobs.work.perform_later(2)
    claim(engine, 2)
    if policy == "fail":
        assert release.fail_all(engine, [PROCESS_ID], "died") == 2
        assert batch_counts(app, batch.id) == ("failed", 2, 0, 2, 0)
    else:
        assert release.release_all(engine, [PROCESS_ID]) == 2
        assert batch_counts(app, batch.id) == ("pending", 2, 0, 0, 2)
    assert_counts_match_jobs(engine, batch.id)


def test_a_job_retried_by_hand_after_its_batch_finished_can_add_to_it(app, engine, performed):
    """Reproduced: the retried job's batch stayed finished, so its add raised
    BatchAlreadyFinished and the job failed again."""
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("success"),
            on_failure=batch_jobs.callback.new("failure"),
        ) as batch:
            failing = batch_jobs.adds_on_its_retry.perform_later(1)
    run_all(app, engine, preserve_finished=True)
    assert callbacks_run(performed) == [("failure", batch.id, "failed", 1, 0, 1, 0)]
    with app.app_context():
        assert solidq.retry(failing.provider_job_id) == 1
    assert_counts_match_jobs(engine, batch.id)
    (claimed,) = claim(engine, 1)
    (outcome,) = finalize.finalize_all(
        engine, PROCESS_ID, perform(app, [claimed]), preserve_finished=True
    )
    assert outcome.kind is OutcomeKind.FINISHED
    assert batch_counts(app, batch.id) == ("pending", 2, 1, 0, 1)
    run_all(app, engine, preserve_finished=True)
    assert batch_counts(app, batch.id) == ("completed", 2, 2, 0, 0)
    assert callbacks_run(performed)[1:] == [("success", batch.id, "completed", 2, 2, 0, 0)]
    assert_counts_match_jobs(engine, batch.id)


def test_running_a_scheduled_batch_job_now_keeps_it_pending(app, engine):
    with app.app_context():
        with solidq.batch() as batch:
            later = batch_jobs.work.set(wait=3600).perform_later(1)
        assert solidq.run_now(later.provider_job_id) == 1
    assert job_state(engine, later.provider_job_id) == "ready"
    assert batch_counts(app, batch.id) == ("pending", 1, 0, 0, 1)
    assert_counts_match_jobs(engine, batch.id)

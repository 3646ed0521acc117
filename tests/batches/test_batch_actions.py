"""Retrying and discarding a batch with its children: ``solidq.retry_all(batch=ID)``,
``solidq.discard_all(batch=ID)`` and ``flask solidq retry|discard --batch ID``, on every
backend. Another batch's jobs, and jobs in no batch, are never touched."""

from __future__ import annotations

import typing as t

import pytest

from tests.batches.test_batches import batch_counts
from tests.batches.test_batches import callbacks_run
from tests.batches.test_batches import run_all
from tests.cli.test_job_commands import run
from tests.jobs import batch as batch_jobs
from tests.operations.test_job_ends import assert_counts_match_jobs
from tests.support import solidq
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    batch_jobs.PERFORMED.clear()
    yield batch_jobs.PERFORMED
    batch_jobs.PERFORMED.clear()


def failed_family(app: Flask, engine: t.Any) -> tuple[int, int, int, list[int]]:
    """A parent batch with one failed job, a child with two failed jobs, and another batch
    and a job of no batch that failed too: (parent, child, other batch, their failed ids)."""
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("success"),
            on_failure=batch_jobs.callback.new("failure"),
        ) as parent:
            mine = batch_jobs.adds_on_its_retry.perform_later(1)
        with solidq.batch(parent=parent.id) as child:
            ours = [batch_jobs.fail.perform_later(value) for value in (2, 3)]
        with solidq.batch() as other:
            theirs = batch_jobs.fail.perform_later(4)
        loose = batch_jobs.fail.perform_later(5)
    run_all(app, engine, preserve_finished=True)
    failed = [mine.provider_job_id, *(job.provider_job_id for job in ours)]
    assert all(job_state(engine, job_id) == "failed" for job_id in failed)
    assert job_state(engine, theirs.provider_job_id) == "failed"
    assert job_state(engine, loose.provider_job_id) == "failed"
    return parent.id, child.id, other.id, failed


def test_retry_all_of_a_batch_retries_its_and_its_childrens_failed_jobs_and_reopens_them(
    app, engine
):
    parent, child, other, failed = failed_family(app, engine)
    with app.app_context():
        assert solidq.retry_all(batch=parent) == 3
    assert all(job_state(engine, job_id) == "ready" for job_id in failed)
    assert batch_counts(app, parent)[0] == "pending"
    assert batch_counts(app, child) == ("pending", 2, 0, 0, 2)
    assert batch_counts(app, other) == ("failed", 1, 0, 1, 0)
    assert_counts_match_jobs(engine, child)


def test_retry_all_of_a_child_leaves_its_parents_own_jobs(app, engine):
    parent, child, _other, failed = failed_family(app, engine)
    with app.app_context():
        assert solidq.retry_all(batch=child) == 2
    assert job_state(engine, failed[0]) == "failed"
    assert batch_counts(app, child)[0] == "pending"


def test_discard_all_of_a_batch_discards_its_pending_jobs_and_it_finishes(app, engine, performed):
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("end")) as parent:
            batch_jobs.work.set(wait=3600).perform_later(1)
            batch_jobs.work.perform_later(2)
            batch_jobs.one_at_a_time.perform_later("acme")
            batch_jobs.one_at_a_time.perform_later("acme")  # blocked
        with solidq.batch(parent=parent.id) as child:
            batch_jobs.work.set(wait=3600).perform_later(3)
        outside = batch_jobs.work.perform_later(4)
        assert solidq.discard_all(batch=parent.id) == 5
    assert job_state(engine, outside.provider_job_id) == "ready"
    assert batch_counts(app, child.id) == ("completed", 1, 1, 0, 0)
    # Its four jobs and its child, which finished; the child's callback-less finish left
    # the parent finished too, and its callback is the only job of it left to run.
    assert batch_counts(app, parent.id) == ("completed", 5, 5, 0, 0)
    run_all(app, engine)
    assert callbacks_run(performed) == [("end", parent.id, "completed", 5, 5, 0, 0)]


def test_discard_all_of_a_batch_with_a_state_takes_that_state_only(app, engine):
    parent, child, _other, failed = failed_family(app, engine)
    with app.app_context():
        assert solidq.discard_all(batch=parent) == 0  # nothing pending
        assert solidq.discard_all("failed", batch=child) == 2
    assert [job_state(engine, job_id) for job_id in failed[1:]] == ["gone", "gone"]
    assert batch_counts(app, child) == ("failed", 2, 0, 2, 0)


def test_a_batch_filter_must_be_an_id(app):
    with app.app_context(), pytest.raises(TypeError, match="batch= is a batch id"):
        solidq.retry_all(batch="7")


def test_flask_solidq_retry_and_discard_take_a_batch(app, engine):
    parent, child, other, failed = failed_family(app, engine)

    result = run(app, "retry", "--batch", parent, input="y\n")
    assert result.exit_code == 0, result.output
    assert "Retry 3 jobs?" in result.output and "Retried 3 jobs." in result.output
    assert batch_counts(app, other)[0] == "failed"

    result = run(app, "discard", "--batch", child, "--yes")
    assert result.exit_code == 0, result.output
    assert "Discarded 2 jobs." in result.output
    assert batch_counts(app, child) == ("completed", 2, 2, 0, 0)

    result = run(app, "discard", "--batch", other, "--state", "failed", "--yes")
    assert result.exit_code == 0, result.output
    assert "Discarded 1 job." in result.output

    result = run(app, "retry", "--batch", parent, "7")
    assert result.exit_code == 2
    assert "Name the jobs or pass --all, not both." in result.output

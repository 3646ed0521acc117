"""Batches and steps under the test adapter (issue 34, item 5): ``solidq.batch()`` records its
jobs in an in-memory batch, ``perform_enqueued_jobs()`` counts their ends and records the
callbacks once as the last one ends, a running job adds to its own batch, and
``solidq.batches.find`` answers from memory. The app has no tables: nothing here touches a
database. Jobs are :mod:`tests.jobs.batch`'s and :mod:`tests.jobs.steps`'.
"""

from __future__ import annotations

import typing as t

import pytest

from flask_solidq import BatchAlreadyFinished
from flask_solidq import SerializationError
from flask_solidq import current_job
from flask_solidq import signals
from flask_solidq import testing
from tests import support
from tests.jobs import batch as batch_jobs
from tests.jobs import steps as steps_jobs
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask

    from flask_solidq.testing.pytest_plugin import JobRecorder


@pytest.fixture
def app(tmp_path: t.Any) -> Flask:
    """An app on the database queue (the default) with no tables; ``solidq_jobs`` switches it
    to the test adapter."""
    return support.create_app(f"sqlite:///{tmp_path}/no_tables.db")


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    batch_jobs.PERFORMED.clear()
    steps_jobs.DONE.clear()
    yield batch_jobs.PERFORMED
    batch_jobs.PERFORMED.clear()
    steps_jobs.DONE.clear()


@pytest.fixture
def finished_batches() -> t.Iterator[list[tuple[int, str]]]:
    heard: list[tuple[int, str]] = []

    def receiver(sender: t.Any, batch: t.Any, status: t.Any) -> None:
        heard.append((batch.id, status.value))

    signals.batch_finish.connect(receiver)
    yield heard
    signals.batch_finish.disconnect(receiver)


def callbacks_run(performed: list[tuple[str, t.Any]]) -> list[t.Any]:
    return [ran for name, ran in performed if name == "batch_test.callback"]


def counts(batch_id: int) -> tuple[str, int, int, int, int]:
    found = solidq.batches.find(batch_id)
    assert found is not None
    return (
        found.status.value,
        found.total_jobs,
        found.completed_jobs,
        found.failed_jobs,
        found.pending_jobs,
    )


def all_callbacks() -> dict[str, t.Any]:
    return {
        "on_success": batch_jobs.callback.new("success"),
        "on_failure": batch_jobs.callback.new("failure"),
        "on_finish": batch_jobs.callback.new("finish"),
    }


def test_the_blocks_jobs_are_recorded_in_the_batch_and_its_callbacks_run_once_after_them(
    solidq_jobs: JobRecorder,
    performed: list[tuple[str, t.Any]],
    finished_batches: list[tuple[int, str]],
) -> None:
    with solidq.batch(**all_callbacks(), label="catalog") as batch:
        single = batch_jobs.work.perform_later(1)
        solidq.perform_all_later([batch_jobs.work.new(2)])
        assert solidq.batches.find(batch.id) is None  # the block hasn't ended
    outside = batch_jobs.work.perform_later(3)

    assert [job.batch_id for job in solidq_jobs.enqueued] == [batch.id, batch.id, None]
    assert single.batch is not None and single.batch.id == batch.id
    assert outside.batch is None
    opened = solidq.batches.find(batch.id)
    assert opened is not None and opened.metadata == {"label": "catalog"}
    assert opened.callbacks == dict.fromkeys(
        ("on_success", "on_failure", "on_finish"), "batch_test.callback"
    )
    assert counts(batch.id) == ("pending", 2, 0, 0, 2)

    assert solidq_jobs.perform_all() == 5  # three jobs, then the two callbacks they recorded

    assert counts(batch.id) == ("completed", 2, 2, 0, 0)
    assert callbacks_run(performed) == [
        ("success", batch.id, "completed", 2, 2, 0, 0),
        ("finish", batch.id, "completed", 2, 2, 0, 0),
    ]
    assert finished_batches == [(batch.id, "completed")]
    assert testing.perform_enqueued_jobs() == 0 and testing.enqueued_jobs() == []


def test_the_callbacks_are_recorded_outside_the_batch_as_its_last_job_ends(
    solidq_jobs: JobRecorder, performed: list[tuple[str, t.Any]]
) -> None:
    with solidq.batch(on_finish=batch_jobs.callback) as batch:  # a definition: the batch alone
        batch_jobs.work.perform_later(1)
        batch_jobs.work.perform_later(2)

    assert solidq_jobs.perform_all(only=[batch_jobs.work]) == 2

    (recorded,) = solidq_jobs.enqueued
    assert type(recorded) is batch_jobs.callback and recorded.batch_id is None
    assert recorded.arguments[0].id == batch.id
    assert callbacks_run(performed) == []
    assert solidq_jobs.perform_all() == 1
    assert callbacks_run(performed) == [(None, batch.id, "completed", 2, 2, 0, 0)]


def test_a_job_that_raises_counts_as_failed_and_its_batch_runs_on_failure_next_call(
    solidq_jobs: JobRecorder, performed: list[tuple[str, t.Any]]
) -> None:
    with solidq.batch(**all_callbacks()) as batch:
        batch_jobs.fail.perform_later(1)
        batch_jobs.work.perform_later(2)
        batch_jobs.retried.perform_later(3)  # retry_on doesn't act under perform_now

    with pytest.raises(batch_jobs.Boom, match="failing 1"):
        solidq_jobs.perform_all()
    assert counts(batch.id) == ("pending", 3, 0, 1, 2)
    with pytest.raises(batch_jobs.Boom, match="failing 3"):
        solidq_jobs.perform_all()  # work(2), then retried(3): the batch's last job
    assert counts(batch.id) == ("failed", 3, 1, 2, 0)
    assert callbacks_run(performed) == []

    assert solidq_jobs.perform_all() == 2

    assert callbacks_run(performed) == [
        ("failure", batch.id, "failed", 3, 1, 2, 0),
        ("finish", batch.id, "failed", 3, 1, 2, 0),
    ]
    found = solidq.batches.find(batch.id)
    assert found is not None and found.failed_at == found.finished_at is not None


def test_an_empty_batch_finishes_as_its_block_ends(
    solidq_jobs: JobRecorder,
    performed: list[tuple[str, t.Any]],
    finished_batches: list[tuple[int, str]],
) -> None:
    with solidq.batch(on_success=batch_jobs.callback.new("empty")) as batch:
        pass
    assert counts(batch.id) == ("completed", 0, 0, 0, 0)
    assert finished_batches == [(batch.id, "completed")]
    assert solidq_jobs.perform_all() == 1
    assert callbacks_run(performed) == [("empty", batch.id, "completed", 0, 0, 0, 0)]


def test_an_exception_in_the_block_takes_back_the_batch_and_its_jobs(
    solidq_jobs: JobRecorder,
) -> None:
    before = batch_jobs.work.perform_later(0)
    with pytest.raises(RuntimeError, match="changed my mind"):
        with solidq.batch(on_finish=batch_jobs.callback) as batch:
            batch_jobs.work.perform_later(1)
            solidq.perform_all_later([batch_jobs.work.new(2)])
            raise RuntimeError("changed my mind")
    assert solidq_jobs.enqueued == [before]
    assert solidq.batches.find(batch.id) is None


def test_callbacks_and_metadata_are_checked_as_on_the_database_queue(
    solidq_jobs: JobRecorder,
) -> None:
    with pytest.raises(TypeError, match="takes a job definition or an unenqueued job"):
        with solidq.batch(on_success=batch_jobs.takes_no_batch):
            pass
    with pytest.raises(TypeError, match="batch_test.work"):
        with solidq.batch(on_finish=batch_jobs.work.new(1)):  # no room for the batch
            pass
    with pytest.raises(SerializationError):
        with solidq.batch(on_finish=batch_jobs.callback.new(object())):
            pass
    with pytest.raises(SerializationError, match="metadata must be plain JSON"):
        with solidq.batch(label=object()):
            pass
    assert solidq_jobs.enqueued == []


def test_batch_blocks_do_not_nest(solidq_jobs: JobRecorder) -> None:
    with solidq.batch() as outer:
        with pytest.raises(RuntimeError, match=f"inside the block of batch {outer.id}"):
            with solidq.batch():
                pass


def test_a_running_job_adds_to_its_own_batch_which_it_keeps_open(
    solidq_jobs: JobRecorder, performed: list[tuple[str, t.Any]]
) -> None:
    with solidq.batch(on_success=batch_jobs.callback.new("published")) as batch:
        batch_jobs.importer.perform_later(1, [1, 2])
        batch_jobs.importer.perform_later(2, [2, 3])

    assert solidq_jobs.perform_all(only=[batch_jobs.importer]) == 2

    # Both importers ended; their reindexes (coalescing doesn't act here) keep it open.
    assert counts(batch.id) == ("pending", 6, 2, 0, 4)
    assert [job.batch_id for job in solidq_jobs.enqueued] == [batch.id] * 4
    assert solidq_jobs.perform_all() == 5
    assert [ran for name, ran in performed if name == "batch_test.reindex"] == [1, 2, 2, 3]
    assert callbacks_run(performed) == [("published", batch.id, "completed", 6, 6, 0, 0)]


def test_adding_to_a_finished_batch_raises_and_records_nothing(
    solidq_jobs: JobRecorder,
) -> None:
    with solidq.batch() as batch:
        batch_jobs.work.perform_later(1)
    found = solidq.batches.find(batch.id)
    assert found is not None
    with found.enqueue():  # open: from the test, as from anywhere
        batch_jobs.work.perform_later(2)
    assert counts(batch.id) == ("pending", 2, 0, 0, 2)
    solidq_jobs.perform_all()

    with pytest.raises(BatchAlreadyFinished, match=f"Batch {batch.id} has finished"):
        with found.enqueue():
            batch_jobs.work.perform_later(3)
    assert solidq_jobs.enqueued == []
    assert counts(batch.id) == ("completed", 2, 2, 0, 0)


def test_assert_enqueued_with_matches_a_jobs_batch(solidq_jobs: JobRecorder) -> None:
    with solidq.batch() as batch:
        with solidq_jobs.assert_enqueued_with(job=batch_jobs.work, batch=batch):
            batch_jobs.work.perform_later(1)
        with pytest.raises(AssertionError, match=f"batch={batch.id}"):
            with solidq_jobs.assert_enqueued_with(job=batch_jobs.work, batch=None):
                batch_jobs.work.perform_later(2)
    with solidq_jobs.assert_enqueued_with(batch=None):
        batch_jobs.work.perform_later(3)
    with solidq_jobs.assert_enqueued_with(batch=batch.id):
        with solidq.batches.find(batch.id).enqueue():  # type: ignore[union-attr]
            batch_jobs.work.perform_later(4)


def test_clearing_the_recorded_jobs_forgets_their_batches(solidq_jobs: JobRecorder) -> None:
    with solidq.batch() as batch:
        batch_jobs.work.perform_later(1)
    solidq_jobs.clear()
    assert solidq.batches.find(batch.id) is None


def test_a_steps_job_runs_every_step_under_perform_enqueued_jobs_and_in_a_batch(
    solidq_jobs: JobRecorder, performed: list[tuple[str, t.Any]]
) -> None:
    with solidq.batch(on_success=batch_jobs.callback.new("walked")) as batch:
        job = steps_jobs.Walk.perform_later(3)

    assert solidq_jobs.perform_all() == 2

    assert steps_jobs.DONE == [
        ("prepare", None),
        ("walk", 0),
        ("walk", 1),
        ("walk", 2),
        ("wrap_up", None),
    ]
    assert job.step_progress["done"] == ["prepare", "walk", "wrap_up"]
    assert callbacks_run(performed) == [("walked", batch.id, "completed", 1, 1, 0, 0)]


def test_a_function_steps_job_that_raises_keeps_its_progress_in_memory(
    solidq_jobs: JobRecorder,
) -> None:
    job = steps_jobs.failing_walk.perform_later(4, 2)
    with pytest.raises(ValueError, match="failing at 2"):
        solidq_jobs.perform_all()
    assert steps_jobs.DONE == [("walk", 0), ("walk", 1)]
    assert job.step_progress["current"] == ["walk", 2]

    job.perform_now()  # its second run: from the cursor, without raising

    assert steps_jobs.DONE == [("walk", 0), ("walk", 1), ("walk", 2), ("walk", 3)]


def test_perform_now_runs_a_steps_job_and_current_job_sees_its_progress(
    solidq_jobs: JobRecorder,
) -> None:
    seen: list[t.Any] = []

    @solidq.job(name="batches_test_adapter.two_steps")
    def two_steps() -> None:
        current_job.step("a", lambda step: step.advance(1))
        current_job.step("b", lambda step: seen.append(current_job.step_progress))

    two_steps.perform_now()

    assert seen == [{"done": ["a"], "current": ["b", None], "resumptions": 0}]


def test_a_batch_opened_in_a_running_batch_job_is_a_child_its_parent_waits_for(
    solidq_jobs: JobRecorder, performed: list[tuple[str, t.Any]]
) -> None:
    with solidq.batch(on_finish=batch_jobs.callback.new("parent-end")) as parent:
        batch_jobs.opens_child.perform_later([1], [2])

    with pytest.raises(batch_jobs.Boom):  # the child's failing job propagates
        solidq_jobs.perform_all()
    solidq_jobs.perform_all()

    child = parent.id + 1  # the next batch the adapter opened
    found = solidq.batches.find(child)
    assert found is not None and found.parent_id == parent.id
    assert counts(child) == ("failed", 2, 1, 1, 0)
    # The opener, the child (failed) and the child's two callbacks.
    assert counts(parent.id) == ("failed", 4, 3, 1, 0)
    labels = [ran[0] for ran in callbacks_run(performed)]
    assert sorted(labels[:2]) == ["child-1-end", "child-1-failure"]
    assert labels[2:] == ["parent-end"]


def test_a_child_of_a_finished_batch_is_refused(solidq_jobs: JobRecorder) -> None:
    with solidq.batch() as parent:
        pass
    with pytest.raises(BatchAlreadyFinished, match=f"Batch {parent.id} has finished"):
        with solidq.batch(parent=parent):
            batch_jobs.work.perform_later(1)
    assert solidq_jobs.enqueued == []

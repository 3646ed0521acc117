"""Nested batches: a batch opened inside a running job of a batch, or with ``parent=``, is a
child of it. The child counts as one job of its parent; its callbacks are added to the parent
as jobs of it; so the parent finishes only after the child and the child's callbacks, and a
child that failed fails its parent. On every backend, in this process."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import BatchAlreadyFinished
from flask_solidq import models
from tests.batches.test_batches import batch_counts
from tests.batches.test_batches import callbacks_run
from tests.batches.test_batches import run_all
from tests.jobs import batch as batch_jobs
from tests.operations.test_job_ends import assert_counts_match_jobs
from tests.support import solidq

BATCHES = models.BatchRecord.__table__
JOBS = models.JobRecord.__table__


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    batch_jobs.PERFORMED.clear()
    yield batch_jobs.PERFORMED
    batch_jobs.PERFORMED.clear()


def children_of(engine: sa.Engine, batch_id: int) -> list[int]:
    with engine.connect() as connection:
        query = sa.select(BATCHES.c.id).where(BATCHES.c.parent_id == batch_id)
        return sorted(connection.scalars(query))


def labels(performed: list[tuple[str, t.Any]]) -> list[str]:
    """The labels of the callbacks run, in the order they ran."""
    return [ran[0] for ran in callbacks_run(performed)]


def test_a_batch_opened_in_a_running_batch_job_is_a_child_that_the_parent_waits_for(
    app, engine, performed
):
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("parent-success"),
            on_finish=batch_jobs.callback.new("parent-end"),
        ) as parent:
            batch_jobs.opens_child.perform_later([1, 2], [])
    run_all(app, engine, preserve_finished=True)

    (child_id,) = children_of(engine, parent.id)
    with app.app_context():
        child = solidq.batches.find(child_id)
    assert child.parent_id == parent.id and child.metadata == {"depth": 1}
    assert batch_counts(app, child_id) == ("completed", 2, 2, 0, 0)
    # The opener, the child, and the child's callback (run as a job of the parent).
    assert batch_counts(app, parent.id) == ("completed", 3, 3, 0, 0)
    assert labels(performed) == ["child-1-end", "parent-end", "parent-success"] or labels(
        performed
    ) == ["child-1-end", "parent-success", "parent-end"]
    assert_counts_match_jobs_and_children(engine, parent.id)
    assert_counts_match_jobs(engine, child_id)


def assert_counts_match_jobs_and_children(engine: sa.Engine, batch_id: int) -> None:
    """:func:`assert_counts_match_jobs` for a parent: each child counts as one of its jobs,
    pending until it finishes."""
    with engine.connect() as connection:
        batch = connection.execute(sa.select(BATCHES).where(BATCHES.c.id == batch_id)).one()
        children = connection.execute(
            sa.select(BATCHES.c.finished_at).where(BATCHES.c.parent_id == batch_id)
        ).all()
        jobs = connection.scalar(
            sa.select(sa.func.count()).select_from(JOBS).where(JOBS.c.batch_id == batch_id)
        )
    assert batch.total_jobs == jobs + len(children)
    unfinished = sum(1 for child in children if child.finished_at is None)
    assert batch.pending_jobs >= unfinished
    assert (batch.finished_at is None) == (batch.pending_jobs > 0)


def test_a_child_that_failed_fails_its_parent_after_its_own_callbacks(app, engine, performed):
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("parent-success"),
            on_failure=batch_jobs.callback.new("parent-failure"),
        ) as parent:
            batch_jobs.opens_child.perform_later([1], [2])
    run_all(app, engine, preserve_finished=True)

    (child_id,) = children_of(engine, parent.id)
    assert batch_counts(app, child_id) == ("failed", 2, 1, 1, 0)
    # The opener and the child's two callbacks completed; the child counts failed.
    assert batch_counts(app, parent.id) == ("failed", 4, 3, 1, 0)
    assert labels(performed)[-1] == "parent-failure"
    assert sorted(labels(performed)[:2]) == ["child-1-end", "child-1-failure"]


def test_three_levels_finish_from_the_bottom_up(app, engine, performed):
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("top-end")) as top:
            batch_jobs.opens_child.perform_later([1], [], 2)
    run_all(app, engine, preserve_finished=True)

    (middle,) = children_of(engine, top.id)
    (bottom,) = children_of(engine, middle)
    assert labels(performed) == ["child-1-end", "child-2-end", "top-end"]
    assert batch_counts(app, bottom) == ("completed", 0, 0, 0, 0)
    # Its work, the inner opener, the bottom batch and its callback.
    assert batch_counts(app, middle) == ("completed", 4, 4, 0, 0)
    assert batch_counts(app, top.id) == ("completed", 3, 3, 0, 0)


def test_an_empty_child_finishes_at_once_and_counts_done_in_its_parent(app, engine, performed):
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("parent-end")) as parent:
            batch_jobs.work.set(wait=3600).perform_later(1)
        with solidq.batch(parent=parent.id) as child:
            pass
    assert batch_counts(app, child.id) == ("completed", 0, 0, 0, 0)
    assert batch_counts(app, parent.id) == ("pending", 2, 1, 0, 1)
    assert_counts_match_jobs_and_children(engine, parent.id)


def test_a_child_opened_from_outside_races_its_parent_finishing(app, engine, performed):
    with app.app_context():
        with solidq.batch() as parent:
            batch_jobs.work.perform_later(1)
        found = solidq.batches.find(parent.id)
        with solidq.batch(parent=found) as child:
            batch_jobs.work.perform_later(2)
    run_all(app, engine)
    assert batch_counts(app, parent.id) == ("completed", 2, 2, 0, 0)
    assert batch_counts(app, child.id) == ("completed", 1, 1, 0, 0)

    with app.app_context():
        with pytest.raises(BatchAlreadyFinished, match=f"Batch {parent.id} finished at"):
            with solidq.batch(parent=parent.id):
                batch_jobs.work.perform_later(3)
        with pytest.raises(BatchAlreadyFinished, match="is gone"):
            with solidq.batch(parent=10_000):
                pass
    assert children_of(engine, parent.id) == [child.id]
    assert batch_counts(app, parent.id) == ("completed", 2, 2, 0, 0)


def test_parent_must_be_a_batch_or_an_id(app):
    with app.app_context(), pytest.raises(TypeError, match="a batch or a batch id"):
        with solidq.batch(parent="7"):
            pass


def test_a_failed_job_of_a_finished_child_retried_reopens_it_and_its_parent(app, engine, performed):
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("parent-success"),
            on_failure=batch_jobs.callback.new("parent-failure"),
        ) as parent:
            batch_jobs.opens_child.perform_later([], [])
        with solidq.batch(parent=parent.id) as child:
            failing = batch_jobs.adds_on_its_retry.perform_later(1)
    run_all(app, engine, preserve_finished=True)
    assert batch_counts(app, child.id) == ("failed", 1, 0, 1, 0)
    assert batch_counts(app, parent.id)[0] == "failed"

    with app.app_context():
        assert solidq.retry(failing.provider_job_id) == 1
    assert batch_counts(app, child.id) == ("pending", 1, 0, 0, 1)
    assert batch_counts(app, parent.id)[0] == "pending"
    run_all(app, engine, preserve_finished=True)

    # The retried job added one more to the child; both finish again, successfully.
    assert batch_counts(app, child.id) == ("completed", 2, 2, 0, 0)
    assert batch_counts(app, parent.id)[0] == "completed"
    assert labels(performed)[-1] == "parent-success"
    assert_counts_match_jobs(engine, child.id)
    assert_counts_match_jobs_and_children(engine, parent.id)

"""Batches (seed 003's Solid Queue batches), in this process on every backend: the block's
jobs belong to the batch, its counters follow their outcomes, and its callbacks are stored
once, in the transaction that finishes it. Several processes finishing one batch at once are
tests/processes/test_batch_processes.py's."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import BatchAlreadyFinished
from flask_solidq import SerializationError
from flask_solidq import models
from flask_solidq import signals
from flask_solidq.operations import dispatch
from flask_solidq.operations import finalize
from flask_solidq.operations import maintenance
from flask_solidq.operations import release
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import PROCESS_ID
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import batch as batch_jobs
from tests.support import solidq

JOBS = models.JobRecord.__table__
HOUR = dt.timedelta(hours=1)
BATCHES = models.BatchRecord.__table__
KEYS = models.CoalesceKey.__table__


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    batch_jobs.PERFORMED.clear()
    yield batch_jobs.PERFORMED
    batch_jobs.PERFORMED.clear()


@pytest.fixture
def finished_batches() -> t.Iterator[list[tuple[t.Any, str]]]:
    heard: list[tuple[t.Any, str]] = []

    def receiver(sender: t.Any, batch: t.Any, status: t.Any) -> None:
        heard.append((batch, status.value))

    signals.batch_finish.connect(receiver)
    yield heard
    signals.batch_finish.disconnect(receiver)


def run_all(app, engine, *, preserve_finished: bool = False) -> None:
    """Claim, perform and store every ready job, a few at a time."""
    while claimed := claim(engine, 3):
        finalize.finalize_all(
            engine, PROCESS_ID, perform(app, claimed), preserve_finished=preserve_finished
        )


def callbacks_run(performed) -> list[tuple[t.Any, ...]]:
    return [ran for name, ran in performed if name == "batch_test.callback"]


def batch_of_jobs(engine) -> dict[int, int | None]:
    with engine.connect() as connection:
        return dict(connection.execute(sa.select(JOBS.c.id, JOBS.c.batch_id)).all())


@pytest.mark.parametrize("preserve_finished", [False, True])
def test_the_blocks_jobs_belong_to_the_batch_and_on_success_and_on_finish_run_once_when_done(
    app, engine, performed, finished_batches, preserve_finished
):
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("success"),
            on_failure=batch_jobs.callback.new("failure"),
            on_finish=batch_jobs.callback.new("finish"),
            label="catalog",
        ) as batch:
            single = batch_jobs.work.perform_later(1)
            solidq.perform_all_later([batch_jobs.work.new(2), batch_jobs.work.new(3)])
        outside = batch_jobs.work.perform_later(4)
        opened = solidq.batches.find(batch.id)
    assert batch_of_jobs(engine)[single.provider_job_id] == batch.id
    assert sorted(batch_of_jobs(engine).values(), key=str) == [batch.id] * 3 + [None]
    assert batch_of_jobs(engine)[outside.provider_job_id] is None
    assert (opened.total_jobs, opened.pending_jobs, opened.completed_jobs) == (3, 3, 0)
    assert opened.status.value == "pending" and opened.enqueued_at is not None
    assert opened.metadata == {"label": "catalog"}
    assert opened.callbacks == {
        "on_success": "batch_test.callback",
        "on_failure": "batch_test.callback",
        "on_finish": "batch_test.callback",
    }

    run_all(app, engine, preserve_finished=preserve_finished)

    assert sorted(callbacks_run(performed)) == [
        ("finish", batch.id, "completed", 3, 3, 0, 0),
        ("success", batch.id, "completed", 3, 3, 0, 0),
    ]
    with app.app_context():
        done = solidq.batches.find(batch.id)
    assert done.status.value == "completed"
    assert (done.total_jobs, done.completed_jobs, done.failed_jobs, done.pending_jobs) == (
        3,
        3,
        0,
        0,
    )
    assert done.finished_at is not None and done.failed_at is None
    assert [(heard.id, status) for heard, status in finished_batches] == [(batch.id, "completed")]


def test_a_job_that_fails_for_good_runs_on_failure_and_a_discarded_one_counts_as_done(
    app, engine, performed
):
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("success"),
            on_failure=batch_jobs.callback.new("failure"),
            on_finish=batch_jobs.callback.new("finish"),
        ) as batch:
            batch_jobs.work.perform_later(1)
            batch_jobs.fail.perform_later(2)
            batch_jobs.dropped.perform_later(3)
            batch_jobs.retried.perform_later(4)  # fails twice: its first failure is a retry

    run_all(app, engine)

    assert sorted(callbacks_run(performed)) == [
        ("failure", batch.id, "failed", 4, 2, 2, 0),
        ("finish", batch.id, "failed", 4, 2, 2, 0),
    ]
    assert [ran for name, ran in performed if name == "batch_test.retried"] == [4, 4]
    with app.app_context():
        done = solidq.batches.find(batch.id)
    assert done.failed_at == done.finished_at and done.finished_at is not None


def test_the_callbacks_are_not_part_of_the_batch_and_run_once_with_a_definition_as_callback(
    app, engine, performed
):
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback) as batch:
            batch_jobs.work.perform_later(1)
    run_all(app, engine)
    assert callbacks_run(performed) == [(None, batch.id, "completed", 1, 1, 0, 0)]
    assert batch_of_jobs(engine) == {}  # finished jobs are deleted; so is the callback


def test_an_empty_batch_finishes_as_its_block_commits(app, engine, performed, finished_batches):
    with app.app_context():
        with solidq.batch(on_success=batch_jobs.callback.new("empty")) as batch:
            assert finished_batches == []
        found = solidq.batches.find(batch.id)
    assert found.status.value == "completed" and found.total_jobs == 0
    assert [heard.id for heard, _status in finished_batches] == [batch.id]
    run_all(app, engine)
    assert callbacks_run(performed) == [("empty", batch.id, "completed", 0, 0, 0, 0)]


def test_an_exception_in_the_block_rolls_back_the_batch_and_its_jobs(app, engine):
    with app.app_context(), pytest.raises(RuntimeError, match="changed my mind"):
        with solidq.batch(on_finish=batch_jobs.callback):
            batch_jobs.work.perform_later(1)
            solidq.perform_all_later([batch_jobs.work.new(2)])
            raise RuntimeError("changed my mind")
    assert support.count(engine, BATCHES) == 0
    assert support.count(engine, JOBS) == 0


def test_a_callback_is_checked_before_anything_is_written(app, engine):
    with app.app_context():
        with pytest.raises(TypeError, match="takes a job definition or an unenqueued job"):
            with solidq.batch(on_success=batch_jobs.takes_no_batch):
                pass
        with pytest.raises(TypeError, match="batch_test.work"):
            with solidq.batch(on_finish=batch_jobs.work.new(1)):  # no room for the batch
                pass
    assert support.count(engine, BATCHES) == 0


def test_batches_do_not_nest(app, engine):
    with app.app_context(), solidq.batch() as outer:
        with pytest.raises(RuntimeError, match=f"inside the block of batch {outer.id}"):
            with solidq.batch():
                pass


def test_coalesce_keys_inside_a_batch_are_scoped_to_it_and_count_jobs_not_calls(
    app, engine, performed
):
    with app.app_context():
        with solidq.batch() as batch:
            first = batch_jobs.reindex.perform_later(42)
            batch_jobs.reindex.perform_later(42)
            batch_jobs.collect.perform_later("a")
            batch_jobs.collect.perform_later("b")
            batch_jobs.collect.perform_later("c")  # the first collecting job is full
        outside = batch_jobs.reindex.perform_later(42)
        with engine.connect() as connection:
            keys = set(connection.scalars(sa.select(KEYS.c.key)))
        found = solidq.batches.find(batch.id)
    assert outside.provider_job_id != first.provider_job_id
    assert f"Batch/{batch.id}/batch_test.reindex/42" in keys
    assert "batch_test.reindex/42" in keys
    assert found.total_jobs == 3  # one reindex, two collecting jobs

    run_all(app, engine)
    with app.app_context():
        assert solidq.batches.find(batch.id).completed_jobs == 3
    assert sorted(ran for name, ran in performed if name == "batch_test.collect") == [
        [("a",), ("b",)],
        [("c",)],
    ]


def test_a_coalesce_key_too_long_with_its_batch_prefix_is_refused(app, engine):
    with app.app_context(), solidq.batch() as batch:
        long_id = "x" * (255 - len("batch_test.reindex/"))
        with pytest.raises(ValueError, match=f"prefix Batch/{batch.id}/"):
            batch_jobs.reindex.perform_later(long_id)


def batch_counts(app, batch_id) -> tuple[str, int, int, int, int]:
    with app.app_context():
        found = solidq.batches.find(batch_id)
    return (
        found.status.value,
        found.total_jobs,
        found.completed_jobs,
        found.failed_jobs,
        found.pending_jobs,
    )


def test_discarding_a_waiting_job_counts_it_done_and_finishes_the_batch_at_once(
    app, engine, performed
):
    with app.app_context():
        with solidq.batch(on_success=batch_jobs.callback.new("success")) as batch:
            batch_jobs.work.perform_later(1)
            later = batch_jobs.work.set(wait=3600).perform_later(2)
    run_all(app, engine)
    assert batch_counts(app, batch.id) == ("pending", 2, 1, 0, 1)

    with app.app_context():
        assert solidq.discard(later.provider_job_id) == 1
    assert batch_counts(app, batch.id) == ("completed", 2, 2, 0, 0)
    run_all(app, engine)
    assert callbacks_run(performed) == [("success", batch.id, "completed", 2, 2, 0, 0)]


def test_a_failed_job_retried_while_its_batch_is_open_is_pending_again(app, engine, performed):
    with app.app_context():
        with solidq.batch(
            on_failure=batch_jobs.callback.new("failure"), on_finish=batch_jobs.callback.new("end")
        ) as batch:
            failing = batch_jobs.fail.perform_later(1)
            later = batch_jobs.work.set(wait=3600).perform_later(2)
    run_all(app, engine)
    assert batch_counts(app, batch.id) == ("pending", 2, 0, 1, 1)

    with app.app_context():
        assert solidq.retry(failing.provider_job_id) == 1
    assert batch_counts(app, batch.id) == ("pending", 2, 0, 0, 2)
    run_all(app, engine)  # it fails again
    assert batch_counts(app, batch.id) == ("pending", 2, 0, 1, 1)
    with app.app_context():
        solidq.discard(later.provider_job_id)
    assert batch_counts(app, batch.id) == ("failed", 2, 1, 1, 0)
    run_all(app, engine)
    assert sorted(callbacks_run(performed)) == [
        ("end", batch.id, "failed", 2, 1, 1, 0),
        ("failure", batch.id, "failed", 2, 1, 1, 0),
    ]
    # Discarding the failed job after the finish changes nothing of the batch.
    with app.app_context():
        solidq.discard(failing.provider_job_id)
    assert batch_counts(app, batch.id) == ("failed", 2, 1, 1, 0)


def test_a_failed_job_retried_after_its_batch_finished_reopens_it_and_it_finishes_again(
    app, engine, performed, finished_batches
):
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("end")) as batch:
            failing = batch_jobs.fail.perform_later(1)
    run_all(app, engine)
    assert batch_counts(app, batch.id) == ("failed", 1, 0, 1, 0)
    with app.app_context():
        assert solidq.retry(failing.provider_job_id) == 1
        reopened = solidq.batches.find(batch.id)
    assert batch_counts(app, batch.id) == ("pending", 1, 0, 0, 1)
    assert reopened.finished_at is None and reopened.failed_at is None
    run_all(app, engine)
    assert [ran for name, ran in performed if name == "batch_test.fail"] == [1, 1]
    assert batch_counts(app, batch.id) == ("failed", 1, 0, 1, 0)
    # Each finish runs the callbacks, and says so.
    assert callbacks_run(performed) == [("end", batch.id, "failed", 1, 0, 1, 0)] * 2
    assert [status for _batch, status in finished_batches] == ["failed", "failed"]


def test_a_job_whose_worker_died_fails_in_its_batch(app, engine, performed):
    with app.app_context():
        with solidq.batch(on_failure=batch_jobs.callback.new("failure")) as batch:
            batch_jobs.work.perform_later(1)
    assert len(claim(engine, 5)) == 1
    release.fail_all(engine, [PROCESS_ID], '{"exception_class": "ProcessPrunedError"}')
    assert batch_counts(app, batch.id) == ("failed", 1, 0, 1, 0)
    run_all(app, engine)
    assert callbacks_run(performed) == [("failure", batch.id, "failed", 1, 0, 1, 0)]


def test_a_running_job_adds_to_its_own_batch_which_it_keeps_open(app, engine, performed):
    with app.app_context():
        with solidq.batch(on_success=batch_jobs.callback.new("published")) as batch:
            batch_jobs.importer.perform_later(1, [1, 2])
            batch_jobs.importer.perform_later(2, [2, 3])
    (first, second) = claim(engine, 2)
    finalize.finalize_all(engine, PROCESS_ID, perform(app, [first]), preserve_finished=False)
    # The first importer is done, the second still running: its reindexes are pending.
    assert batch_counts(app, batch.id) == ("pending", 4, 1, 0, 3)
    finalize.finalize_all(engine, PROCESS_ID, perform(app, [second]), preserve_finished=False)
    # Two importers shared the pending reindex of product 2 (a coalesced call joins it).
    assert batch_counts(app, batch.id) == ("pending", 5, 2, 0, 3)

    run_all(app, engine)

    assert sorted(ran for name, ran in performed if name == "batch_test.reindex") == [1, 2, 3]
    assert callbacks_run(performed) == [("published", batch.id, "completed", 5, 5, 0, 0)]


def test_adding_to_a_finished_batch_raises_and_stores_nothing(app, engine):
    with app.app_context():
        with solidq.batch() as batch:
            batch_jobs.work.perform_later(1)
    run_all(app, engine)
    with app.app_context():
        found = solidq.batches.find(batch.id)
        with pytest.raises(BatchAlreadyFinished, match=f"Batch {batch.id} finished at"):
            with found.enqueue():
                batch_jobs.work.perform_later(2)
    assert support.count(engine, JOBS) == 0
    assert batch_counts(app, batch.id) == ("completed", 1, 1, 0, 0)


def test_an_open_batch_can_be_added_to_from_outside_its_jobs(app, engine, performed):
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("end")) as batch:
            batch_jobs.work.set(wait=3600).perform_later(1)
        with solidq.batches.find(batch.id).enqueue() as added:
            assert added.id == batch.id
            solidq.perform_all_later([batch_jobs.work.new(2), batch_jobs.work.new(3)])
    assert batch_counts(app, batch.id) == ("pending", 3, 0, 0, 3)
    assert sorted(batch_of_jobs(engine).values()) == [batch.id] * 3


def test_a_job_outside_a_batch_has_none_and_its_enqueues_join_none(app, engine):
    with app.app_context():
        job = batch_jobs.work.perform_later(1)
    (claimed,) = claim(engine)
    assert claimed.batch_id is None
    assert job.batch is None


def test_clear_finished_removes_finished_batches_without_jobs_after_the_retention(app, engine):
    with app.app_context():
        with solidq.batch() as done:
            batch_jobs.work.perform_later(1)
        with solidq.batch() as failed:
            batch_jobs.fail.perform_later(2)
        with solidq.batch() as open_batch:
            batch_jobs.work.set(wait=3600).perform_later(3)
    run_all(app, engine)
    assert batch_counts(app, done.id)[0] == "completed"
    assert batch_counts(app, failed.id)[0] == "failed"

    later = utcnow() + dt.timedelta(seconds=1)
    assert maintenance.clear_finished_batches(engine, finished_before=utcnow() - HOUR) == 0
    assert maintenance.clear_finished_batches(engine, finished_before=later, batch_size=1) == 1
    with app.app_context():
        assert solidq.batches.find(done.id) is None
        # Its failed job is still kept: the batch stays while it does.
        assert solidq.batches.find(failed.id) is not None
        assert solidq.batches.find(open_batch.id) is not None
        solidq.discard_all("failed")
    assert maintenance.clear_finished_batches(engine, finished_before=later) == 1
    with app.app_context():
        assert solidq.batches.find(failed.id) is None


def test_the_same_coalesce_key_in_another_batch_or_in_none_runs_separately(app, engine):
    with app.app_context():
        with solidq.batch() as first:
            in_first = batch_jobs.reindex.perform_later(7)
        with solidq.batch() as second:
            in_second = batch_jobs.reindex.perform_later(7)
        alone = batch_jobs.reindex.perform_later(7)
    ids = {in_first.provider_job_id, in_second.provider_job_id, alone.provider_job_id}
    assert len(ids) == 3
    assert batch_of_jobs(engine) == {
        in_first.provider_job_id: first.id,
        in_second.provider_job_id: second.id,
        alone.provider_job_id: None,
    }


def test_a_running_jobs_plain_enqueue_is_in_no_batch(app, engine, performed):
    with app.app_context():
        with solidq.batch() as batch:
            batch_jobs.spawner.perform_later(1)
    (claimed,) = claim(engine)
    assert claimed.batch_id == batch.id
    finalize.finalize_all(engine, PROCESS_ID, perform(app, [claimed]), preserve_finished=False)
    assert list(batch_of_jobs(engine).values()) == [None]
    assert batch_counts(app, batch.id) == ("completed", 1, 1, 0, 0)


def test_a_concurrency_limit_is_not_scoped_to_a_batch(app, engine):
    with app.app_context():
        with solidq.batch():
            batch_jobs.one_at_a_time.perform_later("acme")
        with solidq.batch():
            batch_jobs.one_at_a_time.perform_later("acme")
    assert support.count(engine, models.BlockedExecution) == 1
    assert len(claim(engine, 5)) == 1


def test_a_rate_limit_is_not_scoped_to_a_batch(app, engine):
    with app.app_context():
        with solidq.batch():
            batch_jobs.once_a_minute.perform_later(1)
        with solidq.batch():
            batch_jobs.once_a_minute.perform_later(2)
    assert len(claim(engine, 5)) == 1  # the other waits for the budget's next slot
    assert support.count(engine, models.ScheduledExecution) == 1


def test_a_coalesced_callback_uses_its_key_outside_the_batch(app, engine, performed):
    with app.app_context():
        with solidq.batch(on_success=batch_jobs.publish) as batch:
            batch_jobs.work.perform_later(1)
    (claimed,) = claim(engine)
    finalize.finalize_all(engine, PROCESS_ID, perform(app, [claimed]), preserve_finished=False)
    with engine.connect() as connection:
        assert list(connection.scalars(sa.select(KEYS.c.key))) == ["batch_test.publish/catalog"]
    run_all(app, engine)
    assert [ran for name, ran in performed if name == "batch_test.publish"] == [batch.id]


def test_perform_after_commit_is_refused_inside_a_batch(app, engine):
    with app.app_context(), solidq.batch() as batch:
        with pytest.raises(RuntimeError, match=f"inside the block of batch {batch.id}"):
            solidq.perform_after_commit(batch_jobs.work.new(1))


def test_batches_need_a_queue_which_the_inline_adapter_does_not_have(database_url):
    # The test adapter's batches: tests/testing/test_batches_test_adapter.py.
    with support.app_emptied_after(database_url, SOLIDQ_ADAPTER="inline") as app:
        with app.app_context(), pytest.raises(RuntimeError, match="SOLIDQ_ADAPTER is 'inline'"):
            with solidq.batch():
                pass


def test_a_job_a_concurrency_limit_discards_counts_as_added_and_done(app, engine):
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("end")) as batch:
            batch_jobs.only_one.perform_later("acme")
            # Discarded at its own enqueue: stored, and done at once.
            assert batch_jobs.only_one.perform_later("acme").provider_job_id is None
            later = batch_jobs.only_one.set(wait=3600).perform_later("acme")
    assert batch_counts(app, batch.id) == ("pending", 3, 1, 0, 2)
    support.make_due(engine, later.provider_job_id)
    assert dispatch.dispatch_due(engine, 10) == 1  # its slot is taken: it is discarded
    assert batch_counts(app, batch.id) == ("pending", 3, 2, 0, 1)
    run_all(app, engine)
    assert batch_counts(app, batch.id) == ("completed", 3, 3, 0, 0)


def test_metadata_that_isnt_plain_json_is_refused_before_anything_is_written(app, engine):
    with app.app_context(), pytest.raises(SerializationError, match="plain JSON"):
        with solidq.batch(started=dt.datetime(2026, 1, 1)):
            pass
    assert support.count(engine, BATCHES) == 0


def test_the_coalesce_signal_and_blank_keys_carry_the_batch_prefix(app, engine):
    with app.app_context(), support.signals_sent(signals.coalesce) as sent:
        with solidq.batch() as batch:
            batch_jobs.reindex.perform_later(7)
            batch_jobs.blank_key.perform_later(1)
            batch_jobs.blank_key.perform_later(2)  # joins: a blank key is one key
        with engine.connect() as connection:
            keys = set(connection.scalars(sa.select(KEYS.c.key)))
    prefix = f"Batch/{batch.id}/"
    assert [payload["key"] for _sender, payload in sent] == [
        f"{prefix}batch_test.reindex/7",
        f"{prefix}batch_test.blank_key/",
        f"{prefix}batch_test.blank_key/",
    ]
    assert keys == {f"{prefix}batch_test.reindex/7", f"{prefix}batch_test.blank_key/"}
    assert batch_counts(app, batch.id) == ("pending", 2, 0, 0, 2)


def test_a_replacing_call_in_a_batch_adds_nothing_and_the_job_runs_the_last_arguments(
    app, engine, performed
):
    with app.app_context():
        with solidq.batch() as batch:
            first = batch_jobs.replace.perform_later(5, "9.99")
            second = batch_jobs.replace.perform_later(5, "8.99")
    assert second.provider_job_id == first.provider_job_id
    assert batch_of_jobs(engine) == {first.provider_job_id: batch.id}
    assert batch_counts(app, batch.id) == ("pending", 1, 0, 0, 1)
    run_all(app, engine)
    assert [ran for name, ran in performed if name == "batch_test.replace"] == [(5, "8.99")]
    assert batch_counts(app, batch.id) == ("completed", 1, 1, 0, 0)


def test_a_call_after_its_keys_job_started_opens_another_job_of_the_batch(app, engine, performed):
    with app.app_context():
        with solidq.batch() as batch:
            batch_jobs.reindex.perform_later(3)
    (claimed,) = claim(engine, 1)
    outcomes = perform(app, [claimed])  # it started (and ran): its key is free again
    with app.app_context():
        with solidq.batches.find(batch.id).enqueue():
            later = batch_jobs.reindex.perform_later(3)
    assert later.provider_job_id != claimed.id
    assert batch_counts(app, batch.id) == ("pending", 2, 0, 0, 2)
    finalize.finalize_all(engine, PROCESS_ID, outcomes, preserve_finished=False)
    run_all(app, engine)
    assert [ran for name, ran in performed if name == "batch_test.reindex"] == [3, 3]
    assert batch_counts(app, batch.id) == ("completed", 2, 2, 0, 0)


def test_an_exception_in_an_add_block_stores_none_of_it(app, engine):
    with app.app_context():
        with solidq.batch() as batch:
            batch_jobs.work.set(wait=3600).perform_later(1)
        with pytest.raises(batch_jobs.Boom), solidq.batches.find(batch.id).enqueue():
            batch_jobs.work.perform_later(2)
            raise batch_jobs.Boom("the block fails")
    assert list(batch_of_jobs(engine).values()) == [batch.id]
    assert batch_counts(app, batch.id) == ("pending", 1, 0, 0, 1)

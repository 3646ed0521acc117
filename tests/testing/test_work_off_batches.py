"""Batches and steps under ``work_off()`` (issue 34, item 5), on every backend: one call runs a
batch's jobs, then the callbacks their finish stored; a running job's adds to its batch run in
the same call; a job that fails for good leads to ``on_failure``; a steps job that fails
mid-step resumes from its cursor on its retry. The jobs are :mod:`tests.jobs.batch`'s and
:mod:`tests.jobs.steps`'.
"""

from __future__ import annotations

import typing as t

import pytest

from flask_solidq.testing import frozen_clock
from flask_solidq.testing import work_off
from tests.jobs import batch as batch_jobs
from tests.jobs import steps as steps_jobs
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    batch_jobs.PERFORMED.clear()
    steps_jobs.DONE.clear()
    yield batch_jobs.PERFORMED
    batch_jobs.PERFORMED.clear()
    steps_jobs.DONE.clear()


def callbacks_run(performed: list[tuple[str, t.Any]]) -> list[t.Any]:
    return sorted(ran for name, ran in performed if name == "batch_test.callback")


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


def test_one_call_runs_the_jobs_then_the_callbacks_their_finish_stored(
    app: Flask, performed: list[tuple[str, t.Any]]
) -> None:
    with app.app_context():
        with solidq.batch(
            on_success=batch_jobs.callback.new("success"),
            on_failure=batch_jobs.callback.new("failure"),
            on_finish=batch_jobs.callback.new("finish"),
        ) as batch:
            batch_jobs.work.perform_later(1)
            solidq.perform_all_later([batch_jobs.work.new(2)])

        ran = work_off()

        assert [type(job).job_name for job in ran] == [
            "batch_test.work",
            "batch_test.work",
            "batch_test.callback",
            "batch_test.callback",
        ]
        assert counts(batch.id) == ("completed", 2, 2, 0, 0)
        assert work_off() == []  # each callback ran once
    assert callbacks_run(performed) == [
        ("finish", batch.id, "completed", 2, 2, 0, 0),
        ("success", batch.id, "completed", 2, 2, 0, 0),
    ]


def test_an_empty_batch_runs_its_callbacks_at_the_next_call(
    app: Flask, performed: list[tuple[str, t.Any]]
) -> None:
    with app.app_context():
        with solidq.batch(on_finish=batch_jobs.callback.new("empty")) as batch:
            pass
        assert counts(batch.id) == ("completed", 0, 0, 0, 0)
        assert len(work_off()) == 1
    assert callbacks_run(performed) == [("empty", batch.id, "completed", 0, 0, 0, 0)]


def test_a_running_jobs_adds_to_its_batch_run_in_the_same_call_before_the_callbacks(
    app: Flask, performed: list[tuple[str, t.Any]]
) -> None:
    with app.app_context():
        with solidq.batch(on_success=batch_jobs.callback.new("published")) as batch:
            batch_jobs.importer.perform_later(1, [1, 2])
        work_off()
        assert counts(batch.id) == ("completed", 3, 3, 0, 0)
    names = [name for name, _ran in performed]
    assert names == [
        "batch_test.importer",
        "batch_test.reindex",
        "batch_test.reindex",
        "batch_test.callback",
    ]
    assert callbacks_run(performed) == [("published", batch.id, "completed", 3, 3, 0, 0)]


def test_a_job_that_fails_for_good_leads_to_on_failure_and_a_discarded_one_counts_as_done(
    app: Flask, performed: list[tuple[str, t.Any]]
) -> None:
    with app.app_context(), frozen_clock():
        with solidq.batch(
            on_success=batch_jobs.callback.new("success"),
            on_failure=batch_jobs.callback.new("failure"),
            on_finish=batch_jobs.callback.new("finish"),
        ) as batch:
            batch_jobs.work.perform_later(1)
            batch_jobs.fail.perform_later(2)  # no exception leaves work_off
            batch_jobs.dropped.perform_later(3)
            batch_jobs.retried.perform_later(4)  # wait=0: its retry is due in the same call

        work_off()

        assert counts(batch.id) == ("failed", 4, 2, 2, 0)
    assert [ran for name, ran in performed if name == "batch_test.retried"] == [4, 4]
    assert callbacks_run(performed) == [
        ("failure", batch.id, "failed", 4, 2, 2, 0),
        ("finish", batch.id, "failed", 4, 2, 2, 0),
    ]


def test_a_steps_job_that_fails_mid_step_resumes_from_its_cursor_on_its_retry(
    app: Flask,
) -> None:
    with app.app_context(), frozen_clock():
        with solidq.batch() as batch:
            steps_jobs.flaky_walk.perform_later(4, 2)  # raises at item 2 in its first run

        ran = work_off()

        assert [job.executions for job in ran] == [1, 2]
        assert counts(batch.id) == ("completed", 1, 1, 0, 0)
    # Items 0 and 1 were done once: the retry started from the cursor saved at the failure.
    assert steps_jobs.DONE == [("walk", 0), ("walk", 1), ("walk", 2), ("walk", 3)]


def test_a_steps_job_runs_every_step_in_one_call(app: Flask) -> None:
    with app.app_context():
        steps_jobs.Walk.perform_later(3)
        (job,) = work_off()
    assert steps_jobs.DONE == [
        ("prepare", None),
        ("walk", 0),
        ("walk", 1),
        ("walk", 2),
        ("wrap_up", None),
    ]
    assert job.step_progress["done"] == ["prepare", "walk", "wrap_up"]

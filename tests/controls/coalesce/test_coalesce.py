"""Coalescing, end to end through the database on every backend: calls with one key share one
pending job, which runs with the first call's arguments (discard), the latest's (replace) or
all of them (collect). The detailed rules have files of their own
(tests/controls/coalesce/test_coalesce_*.py).
"""

from __future__ import annotations

import typing as t

import pytest

from flask_solidq import CoalesceStatus
from flask_solidq import models
from tests import support
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import coalesce as coalesce_jobs

JOBS = models.JobRecord.__table__


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    coalesce_jobs.PERFORMED.clear()
    yield coalesce_jobs.PERFORMED
    coalesce_jobs.PERFORMED.clear()


def run_all(app, engine) -> None:
    """Claim, perform and finish every ready job."""
    while claimed := claim(engine, 50):
        finish(engine, perform(app, claimed))


def test_discard_keeps_one_pending_job_per_key_which_runs_with_the_first_call(
    app, engine, performed
):
    with app.app_context():
        first = coalesce_jobs.dedupe.perform_later(1, "first")
        second = coalesce_jobs.dedupe.perform_later(1, "second")
        other = coalesce_jobs.dedupe.perform_later(2, "other")
    assert first.coalesce_status is CoalesceStatus.CREATED
    assert second.coalesce_status is CoalesceStatus.DISCARDED
    assert second.provider_job_id == first.provider_job_id
    assert second.successfully_enqueued is True  # a single discarded call, as Active Job says
    assert other.coalesce_status is CoalesceStatus.CREATED
    assert support.count(engine, JOBS) == 2

    run_all(app, engine)
    assert sorted(performed) == [
        ("coalesce_test.dedupe", (1, "first")),
        ("coalesce_test.dedupe", (2, "other")),
    ]
    # The key was freed when the job started: the next call opens the next job.
    with app.app_context():
        after = coalesce_jobs.dedupe.perform_later(1, "after")
    assert after.coalesce_status is CoalesceStatus.CREATED
    assert after.provider_job_id != first.provider_job_id


def test_replace_runs_the_pending_job_with_the_latest_call(app, engine, performed):
    with app.app_context():
        first = coalesce_jobs.replace.perform_later(7, {"name": "old"})
        latest = coalesce_jobs.replace.perform_later(7, {"name": "new"})
    assert first.coalesce_status is CoalesceStatus.CREATED
    assert latest.coalesce_status is CoalesceStatus.REPLACED
    assert latest.provider_job_id == first.provider_job_id
    (row,) = support.rows(engine, JOBS)
    assert row.active_job_id == first.job_id  # the job keeps its own id

    run_all(app, engine)
    assert performed == [("coalesce_test.replace", (7, {"name": "new"}))]


def test_collect_gives_every_call_to_one_run_oldest_first_sealing_at_max_calls(
    app, engine, performed
):
    with app.app_context():
        calls = [coalesce_jobs.collect.perform_later(5, index) for index in range(7)]
    statuses = [call.coalesce_status for call in calls]
    assert statuses == [
        CoalesceStatus.CREATED,
        CoalesceStatus.COLLECTED,
        CoalesceStatus.COLLECTED,
        CoalesceStatus.CREATED,
        CoalesceStatus.COLLECTED,
        CoalesceStatus.COLLECTED,
        CoalesceStatus.CREATED,
    ]
    assert len({call.provider_job_id for call in calls}) == 3

    run_all(app, engine)
    runs = sorted([[args for _id, args, _kwargs in calls] for _name, calls in performed], key=len)
    assert runs == [[(5, 6)], [(5, 0), (5, 1), (5, 2)], [(5, 3), (5, 4), (5, 5)]]


def test_bulk_stores_ordinary_jobs_then_coalesced_calls_key_by_key(app, engine, performed):
    with app.app_context():
        jobs = [
            coalesce_jobs.dedupe.new(3, "a"),
            coalesce_jobs.dedupe.new(3, "b"),
            coalesce_jobs.replace.new(8, "old"),
            coalesce_jobs.replace.new(8, "new"),
            *[coalesce_jobs.collect.new(9, index) for index in range(4)],
        ]
        support.solidq.perform_all_later(jobs)
    statuses = [job.coalesce_status for job in jobs]
    assert statuses == [
        CoalesceStatus.CREATED,
        CoalesceStatus.DISCARDED,
        CoalesceStatus.DISCARDED,  # superseded by the later replace call of the same bulk
        CoalesceStatus.CREATED,
        CoalesceStatus.CREATED,
        CoalesceStatus.COLLECTED,
        CoalesceStatus.COLLECTED,
        CoalesceStatus.CREATED,
    ]
    # In bulk, a call whose data wasn't stored reports successfully_enqueued False.
    assert [job.successfully_enqueued for job in jobs] == [
        True,
        False,
        False,
        True,
        True,
        True,
        True,
        True,
    ]
    run_all(app, engine)
    assert ("coalesce_test.dedupe", (3, "a")) in performed
    assert ("coalesce_test.replace", (8, "new")) in performed
    assert len(performed) == 4


def test_status_shows_each_coalescing_job_its_open_keys_and_waiting_calls(app, engine):
    with app.app_context():
        coalesce_jobs.dedupe.perform_later(1)
        coalesce_jobs.dedupe.perform_later(2)
        for index in range(4):  # max_calls 3: one sealed job of 3 calls, one open of 1
            coalesce_jobs.collect.perform_later(5, index)

    result = app.test_cli_runner().invoke(args=["solidq", "status"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = lines.index("Coalescing")
    assert lines[at + 1].split() == ["JOB", "OPEN", "KEYS", "WAITING", "CALLS", "OLDEST", "CALL"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[at + 2 : at + 4]}
    assert rows["coalesce_test.dedupe"] == ["2", "0", "-"]
    assert rows["coalesce_test.collect"][:2] == ["1", "4"]
    assert rows["coalesce_test.collect"][-1] == "ago"

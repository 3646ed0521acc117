"""The claim, at the database level: order, limits, pauses, and concurrent claimers with and
without SKIP LOCKED."""

from __future__ import annotations

import threading

import pytest

from flask_solidq import models
from flask_solidq.operations import claim
from flask_solidq.operations import processes as process_roll
from flask_solidq.operations import queues
from tests import support
from tests.controls.coalesce import test_coalesce_processes
from tests.controls.coalesce.test_coalesce_processes import lock_waits
from tests.jobs import basic as jobs
from tests.processes import test_faults
from tests.support import solidq

observer = test_coalesce_processes.observer

ALL = claim.QueueSelector(("*",))
#: The processes the tests claim as (registered by conftest's ``claimers``).
CLAIMERS = (9001, 9002, 9003, 9004)
CLAIMER = CLAIMERS[0]
PROCESSES = models.ProcessRecord.__table__


def test_a_claim_takes_the_limit_in_priority_then_enqueue_order(app, engine):
    low = jobs.store_result.set(priority=5).perform_later("low")
    first = jobs.store_result.perform_later("first")
    second = jobs.store_result.perform_later("second")

    claimed = claim.claim(engine, ALL, 2, process_id=CLAIMER)

    assert [job.id for job in claimed] == [first.provider_job_id, second.provider_job_id]
    assert [job.id for job in claim.claim(engine, ALL, 5, process_id=CLAIMER)] == [
        low.provider_job_id
    ]
    assert claim.claim(engine, ALL, 5, process_id=CLAIMER) == []
    claims = support.rows(engine, models.ClaimedExecution)
    assert {row.process_id for row in claims} == {CLAIMER}
    assert support.count(engine, models.ReadyExecution) == 0


def test_a_claim_reads_queues_in_their_order_and_skips_paused_ones(app, engine):
    mail = jobs.store_result.set(queue="mail_low", priority=-10).perform_later(1)
    urgent = jobs.store_result.set(queue="urgent", priority=10).perform_later(2)
    queues.pause(engine, "urgent")

    selector = claim.QueueSelector(("urgent", "mail*"))
    assert [job.id for job in claim.claim(engine, selector, 5, process_id=CLAIMER)] == [
        mail.provider_job_id
    ]

    queues.resume(engine, "urgent")
    assert [job.id for job in claim.claim(engine, selector, 5, process_id=CLAIMER)] == [
        urgent.provider_job_id
    ]


@pytest.mark.parametrize("skip_locked", [True, False], ids=["skip_locked", "for_update"])
def test_concurrent_claimers_never_claim_one_job_twice(app, engine, skip_locked):
    solidq.perform_all_later([jobs.store_result.new(n) for n in range(300)])
    claimed: list[int] = []
    errors: list[BaseException] = []

    def claimer(process_id: int) -> None:
        try:
            while batch := claim.claim(engine, ALL, 7, process_id, skip_locked=skip_locked):
                claimed.extend(job.id for job in batch)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=claimer, args=(process_id,)) for process_id in CLAIMERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert len(claimed) == len(set(claimed)) == 300
    assert support.count(engine, models.ClaimedExecution) == 300
    assert support.count(engine, models.ReadyExecution) == 0


# Only a registered process claims (a pruned one that woke up must not).


def test_a_process_whose_row_is_gone_claims_nothing_and_leaves_the_jobs_ready(app, engine):
    process_id = process_roll.register(
        engine, kind="Worker", name="paused", pid=1, supervisor_id=None, metadata={}
    )
    first = jobs.store_result.perform_later("first").provider_job_id
    assert [job.id for job in claim.claim(engine, ALL, 5, process_id)] == [first]
    process_roll.deregister(engine, process_id)  # as a pruning does, after handling its claims
    second = jobs.store_result.perform_later("second").provider_job_id

    assert claim.claim(engine, ALL, 5, process_id) == []
    assert [row.job_id for row in support.rows(engine, models.ReadyExecution)] == [second]


# SQLite runs one writing transaction at a time: a claim can't overlap a pruning there.
@pytest.mark.parametrize("database_url", test_faults.server_backends(), indirect=True)
def test_a_claim_waits_for_a_pruning_that_holds_the_process_row_then_claims_nothing(
    app, engine, database_url, observer
):
    process_id = process_roll.register(
        engine, kind="Worker", name="paused", pid=1, supervisor_id=None, metadata={}
    )
    ready = jobs.store_result.perform_later("waiting").provider_job_id
    claimed: list[list[claim.ClaimedJob]] = []
    with observer.connect() as pruning, pruning.begin():
        # The pruning locks the silent process's row and deletes it, not committed yet.
        pruning.execute(PROCESSES.delete().where(PROCESSES.c.id == process_id))
        claimer = threading.Thread(
            target=lambda: claimed.append(claim.claim(engine, ALL, 5, process_id))
        )
        claimer.start()
        support.wait_until(lambda: lock_waits(observer) == 1, timeout=10)
        assert claimed == []
    claimer.join(10)

    assert claimed == [[]]
    assert [row.job_id for row in support.rows(engine, models.ReadyExecution)] == [ready]

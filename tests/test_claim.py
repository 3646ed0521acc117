"""The claim, at the database level: order, limits, pauses, and concurrent claimers with and
without SKIP LOCKED."""

from __future__ import annotations

import threading

import pytest

from flask_solidq import models
from flask_solidq.operations import claim
from flask_solidq.operations import queues
from tests import jobs
from tests import support
from tests.support import solidq

ALL = claim.QueueSelector(("*",))


def test_a_claim_takes_the_limit_in_priority_then_enqueue_order(app, engine):
    low = jobs.store_result.set(priority=5).perform_later("low")
    first = jobs.store_result.perform_later("first")
    second = jobs.store_result.perform_later("second")

    claimed = claim.claim(engine, ALL, 2, process_id=1)

    assert [job.id for job in claimed] == [first.provider_job_id, second.provider_job_id]
    assert [job.id for job in claim.claim(engine, ALL, 5, process_id=1)] == [low.provider_job_id]
    assert claim.claim(engine, ALL, 5, process_id=1) == []
    claims = support.rows(engine, models.ClaimedExecution)
    assert {row.process_id for row in claims} == {1}
    assert support.count(engine, models.ReadyExecution) == 0


def test_a_claim_reads_queues_in_their_order_and_skips_paused_ones(app, engine):
    mail = jobs.store_result.set(queue="mail_low", priority=-10).perform_later(1)
    urgent = jobs.store_result.set(queue="urgent", priority=10).perform_later(2)
    queues.pause(engine, "urgent")

    selector = claim.QueueSelector(("urgent", "mail*"))
    assert [job.id for job in claim.claim(engine, selector, 5, process_id=1)] == [
        mail.provider_job_id
    ]

    queues.resume(engine, "urgent")
    assert [job.id for job in claim.claim(engine, selector, 5, process_id=1)] == [
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

    threads = [threading.Thread(target=claimer, args=(process_id,)) for process_id in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert errors == []
    assert len(claimed) == len(set(claimed)) == 300
    assert support.count(engine, models.ClaimedExecution) == 300
    assert support.count(engine, models.ReadyExecution) == 0

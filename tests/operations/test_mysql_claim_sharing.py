"""MariaDB/MySQL: two workers claiming at once share the backlog instead of taking turns
(issue 12).

A claim locks its ready rows with ``FOR UPDATE SKIP LOCKED`` and keeps them locked until its
transaction commits. When MariaDB read the candidates through a sort ("Using filesort"), it
locked every ready row it read, not just the ``LIMIT`` it returned, so a second worker's claim
found nothing while the first one's transaction was open. Here the first claim's transaction
is held open on purpose, and the second claim, on another connection, must still get the next
jobs: for an all-queues worker, a single-queue worker, and with a paused queue in the way.

MariaDB/MySQL only (the other backends never had the problem, and ``test_claim`` covers their
claims), so this module runs in a scratch database of its own when ``SOLIDQ_TEST_MYSQL_URL``
is set.
"""

from __future__ import annotations

import threading
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.operations import claim
from flask_solidq.operations import claim_candidates
from flask_solidq.operations import queues
from flask_solidq.storage import db
from tests import support
from tests.jobs import basic as jobs
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.skipif(
    not support.backend_url("mysql"), reason="SOLIDQ_TEST_MYSQL_URL is not set"
)

ALL = claim.QueueSelector(("*",))
MAIL = claim.QueueSelector(("mail",))
PAUSED = claim.QueueSelector(("paused",))

#: Seconds the second claim may take; it never waits on the first one's locks, so a claim
#: still running after this is blocked.
CLAIM_DEADLINE = 10.0
#: The processes the tests claim as (registered by conftest's ``claimers``).
CLAIMERS = (9001, 9002, 9003)


@pytest.fixture(scope="module")
def mysql_database() -> t.Iterator[str]:
    """A scratch MariaDB/MySQL database with the schema, for this module alone."""
    url = support.create_scratch_database(t.cast(str, support.backend_url("mysql")))
    engine = sa.create_engine(url)
    models.metadata.create_all(engine)
    engine.dispose()
    yield url
    support.drop_scratch_database(url)


@pytest.fixture
def app(mysql_database: str) -> t.Iterator[Flask]:
    """An app on the MariaDB/MySQL scratch database, emptied afterwards (shadows the
    every-backend ``app`` of conftest)."""
    with support.app_emptied_after(mysql_database) as app:
        yield app


def enqueue(queue: str, count: int, priority: int = 0) -> list[int]:
    """Enqueue ``count`` jobs on ``queue``; return their ids in enqueue order."""
    batch = [jobs.store_result.set(queue=queue, priority=priority).new(n) for n in range(count)]
    solidq.perform_all_later(batch)
    return [job.provider_job_id for job in batch]


def ids(claimed: list[claim.ClaimedJob]) -> list[int]:
    return [job.id for job in claimed]


def claim_elsewhere(
    engine: sa.Engine, selector: claim.QueueSelector, limit: int, process_id: int
) -> list[int]:
    """Claim on another thread, so on a connection and transaction of its own, while the
    caller's stays open; fail when that claim doesn't return within the deadline."""
    result: list[int] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.extend(ids(claim.claim(engine, selector, limit, process_id)))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    thread = threading.Thread(target=run, name="second-claimer")
    thread.start()
    thread.join(CLAIM_DEADLINE)
    if thread.is_alive():
        raise AssertionError(f"the second claim was still running after {CLAIM_DEADLINE}s")
    assert errors == []
    return result


def claims_while_first_is_open(
    engine: sa.Engine, first: claim.QueueSelector, second: claim.QueueSelector
) -> tuple[list[int], list[int]]:
    """Claim 3 for process 1 and keep its transaction open while process 2 claims 3."""
    with db.transaction(engine):
        held = ids(claim.claim(engine, first, 3, process_id=9001))
        # Should this fail, leaving the block rolls back and frees the second claimer.
        other = claim_elsewhere(engine, second, 3, process_id=9002)
    return held, other


@pytest.fixture(autouse=True)
def _no_straggling_claimer() -> t.Iterator[None]:
    """Wait for a second claimer that a failed test left blocked (the first claim's
    transaction has ended by now, so it finishes)."""
    yield
    for thread in threading.enumerate():
        if thread.name == "second-claimer":
            thread.join(CLAIM_DEADLINE)


def test_an_all_queues_worker_claims_while_another_holds_its_claim_open(app, engine):
    enqueued = enqueue("default", 10) + enqueue("mail", 10)

    held, other = claims_while_first_is_open(engine, ALL, ALL)

    assert held == enqueued[:3]
    assert other == enqueued[3:6]
    assert claimed_by(engine) == {9001: set(held), 9002: set(other)}


def test_a_single_queue_worker_claims_while_another_holds_its_claim_open(app, engine):
    enqueue("default", 10)
    mail = enqueue("mail", 10)

    held, other = claims_while_first_is_open(engine, MAIL, MAIL)

    assert held == mail[:3]
    assert other == mail[3:6]


def test_a_single_queue_worker_claims_while_an_all_queues_one_holds_the_same_jobs(app, engine):
    mail = enqueue("mail", 20)

    held, other = claims_while_first_is_open(engine, ALL, MAIL)

    assert held == mail[:3]
    assert other == mail[3:6]


def test_workers_share_around_a_paused_queue_and_never_claim_its_jobs(app, engine):
    # The paused queue's jobs come first in priority order, so both claims step over them.
    paused = enqueue("paused", 10, priority=-5)
    mail = enqueue("mail", 10)
    queues.pause(engine, "paused")

    held, other = claims_while_first_is_open(engine, ALL, ALL)
    held_by_queue, other_by_queue = claims_while_first_is_open(engine, MAIL, MAIL)

    assert held == mail[:3]
    assert other == mail[3:6]
    assert held_by_queue == mail[6:9]
    assert other_by_queue == mail[9:]
    assert claim.claim(engine, PAUSED, 5, process_id=9003) == []
    assert claim.claim(engine, ALL, 5, process_id=9003) == []
    assert support.count(engine, models.ReadyExecution) == len(paused)
    assert not set(paused) & set().union(*claimed_by(engine).values())


@pytest.mark.parametrize("queue_name", [None, "mail"], ids=["all_queues", "one_queue"])
def test_the_candidates_select_reads_its_index_in_order_without_a_sort(app, engine, queue_name):
    enqueue("paused", 10, priority=-5)
    enqueue("mail", 10)
    queues.pause(engine, "paused")
    statement = claim_candidates.candidates(queue_name, skip_locked=True)
    compiled = statement.compile(dialect=engine.dialect)
    values = compiled.construct_params({"queue_name": queue_name, "limit": 3, "process_id": 9001})

    with engine.connect() as connection:
        plan = connection.exec_driver_sql(f"EXPLAIN {compiled}", values).mappings().all()

    ready = [row for row in plan if row["table"] == models.ReadyExecution.__tablename__]
    assert len(ready) == 1
    assert "filesort" not in (ready[0]["Extra"] or ""), plan
    assert ready[0]["key"].startswith("ix_solidq_ready_executions_poll_"), plan


def claimed_by(engine: sa.Engine) -> dict[int, set[int]]:
    """Claimed job ids by process id."""
    claims: dict[int, set[int]] = {}
    for row in support.rows(engine, models.ClaimedExecution):
        claims.setdefault(row.process_id, set()).add(row.job_id)
    return claims

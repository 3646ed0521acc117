"""The worker's hot path keeps a fixed handful of statements per batch: claiming 1, 3 or 10
jobs, and storing 1, 3 or 10 outcomes, costs the same number of round trips."""

from __future__ import annotations

import contextlib
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.operations import claim
from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.storage.dialects import postgresql
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support.runtime import CLAIMED
from tests.support.runtime import JOBS
from tests.support.runtime import PROCESSES
from tests.support.runtime import READY

BATCH_SIZES = (1, 3, 10)

#: Statements per claim, by dialect, as measured. PostgreSQL claims in one statement
#: (data-modifying CTEs); the others select the candidates (locking the process's row, so a
#: claim only commits for a registered process), insert the claims, delete the ready rows and
#: read the jobs.
CLAIM_STATEMENTS = {"postgresql": 1, "sqlite": 4, "mysql": 4}

#: Statements to store a batch of finished outcomes, by dialect, as measured. PostgreSQL
#: releases the claims and finishes the jobs in one statement; SQLite and MariaDB delete the
#: claims with RETURNING, then mark the jobs finished.
FINALIZE_STATEMENTS = {"postgresql": 1, "sqlite": 2, "mysql": 2}


@contextlib.contextmanager
def counting_statements(engine: sa.Engine) -> t.Iterator[list[str]]:
    """The statements ``engine`` sends while the block runs."""
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)


def register_process(engine: sa.Engine) -> int:
    now = utcnow()
    with engine.begin() as connection:
        return int(
            connection.execute(
                PROCESSES.insert().values(
                    kind="Worker", name="worker-counting", pid=1, last_heartbeat_at=now
                )
            ).inserted_primary_key[0]
        )


def enqueue_records(app, count: int) -> list[int]:
    with app.app_context():
        jobs = [worker_jobs.record.new(index) for index in range(count)]
        support.solidq.perform_all_later(jobs)
    return [job.provider_job_id for job in jobs]


@pytest.mark.parametrize("batch", BATCH_SIZES)
def test_claiming_a_batch_takes_the_same_few_statements_whatever_its_size(app, engine, batch):
    enqueue_records(app, batch + 2)
    process_id = register_process(engine)
    selector = claim.QueueSelector(("*",))

    with counting_statements(engine) as statements:
        claimed = claim.claim(engine, selector, batch, process_id)

    assert len(claimed) == batch
    assert len(statements) == CLAIM_STATEMENTS[engine.dialect.name], statements
    assert support.count(engine, CLAIMED) == batch
    assert support.count(engine, READY) == 2


def plan_nodes(plan: dict[str, t.Any]) -> t.Iterator[dict[str, t.Any]]:
    """``plan`` (a node of ``EXPLAIN (FORMAT JSON)``) and every node below it."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def scanned_whole(
    engine: sa.Engine, statement: sa.TextClause, values: dict[str, t.Any]
) -> list[set[str]]:
    """The tables PostgreSQL's plans of ``statement`` read whole (a sequential scan): planned
    without statistics of the rows just written, then after ``ANALYZE``."""
    scans: list[set[str]] = []
    with engine.connect() as connection:
        for analyze in (False, True):
            if analyze:
                connection.exec_driver_sql("ANALYZE")
            explained = sa.text(f"EXPLAIN (FORMAT JSON) {statement.text}")
            (plan,) = connection.execute(explained, values).scalar_one()
            scans.append(
                {
                    node["Relation Name"]
                    for node in plan_nodes(plan["Plan"])
                    if node["Node Type"] == "Seq Scan" and "Relation Name" in node
                }
            )
        connection.rollback()
    return scans


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "guarded"])
def test_a_postgres_claim_never_scans_the_whole_ready_or_jobs_table(app, engine, guarded):
    """A backlog bulk-enqueued since the ready table's last statistics (none yet, then after
    ANALYZE): the claim of a few jobs reads the ready rows and the jobs through indexes (or
    ``ctid``). Its delete, once joined to the locked rows, was planned as a hash join over a
    scan of every ready row, a claim costing more the longer the backlog."""
    enqueue_records(app, 5000)
    process_id = register_process(engine)
    values = {"process_id": process_id, "limit": 10, "now": utcnow().replace(tzinfo=None)}
    if guarded:
        values["checked"] = ["no.such.job"]

    scans = scanned_whole(engine, postgresql.CLAIM[(False, True, guarded)], values)

    for scanned in scans:
        assert not scanned & {"solidq_ready_executions", "solidq_jobs"}, scans


@pytest.mark.parametrize("preserve", [True, False], ids=["preserving", "deleting"])
@pytest.mark.parametrize("batch", BATCH_SIZES)
def test_storing_a_batch_of_outcomes_takes_the_same_few_statements_whatever_its_size(
    app, engine, batch, preserve
):
    enqueue_records(app, batch)
    process_id = register_process(engine)
    claimed = claim.claim(engine, claim.QueueSelector(("*",)), batch, process_id)
    outcomes = [Outcome(job, OutcomeKind.FINISHED) for job in claimed]

    with counting_statements(engine) as statements:
        stored = finalize.finalize_all(engine, process_id, outcomes, preserve_finished=preserve)

    assert len(stored) == batch
    assert len(statements) == FINALIZE_STATEMENTS[engine.dialect.name], statements
    assert support.count(engine, CLAIMED) == 0
    if preserve:
        finished = support.rows(engine, JOBS, JOBS.c.finished_at.is_not(None))
        assert len(finished) == batch
    else:
        assert support.count(engine, JOBS) == 0

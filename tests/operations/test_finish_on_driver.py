"""A group of finished jobs stored on SQLite and MySQL/MariaDB through the driver's own
connection (:class:`flask_solidq.storage.dialects.driver.DriverDialect`): it stores exactly what the
ordinary path (SQLAlchemy's Connection) stores, each job started when its claim was made,
and finishes only the jobs whose claims this process still holds."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.storage import driver_writes
from flask_solidq.storage.dialects import driver as driver_dialect
from flask_solidq.testing import frozen_clock
from tests import support
from tests.jobs import basic as jobs
from tests.support.runtime import CLAIMED
from tests.support.runtime import JOBS

#: PostgreSQL finishes such a group in one statement of its own: its runs are not collected.
on_driver_backends = pytest.mark.parametrize(
    "database_url",
    [pytest.param("sqlite", id="sqlite")]
    + [pytest.param("mysql", id="mysql")] * bool(support.backend_url("mysql")),
    indirect=True,
)
pytestmark = on_driver_backends

PROCESS_ID = 4242
#: A whole second: the stamp whose stored text is likeliest to differ (no microseconds).
WHOLE_SECOND = dt.datetime(2026, 12, 3, 12, 0, 0, tzinfo=dt.timezone.utc)


def _listener(*_args: t.Any) -> None:
    """An execution listener: an engine with one takes the ordinary path."""


def claim_twice(engine: sa.Engine, count: int) -> tuple[list[t.Any], list[t.Any]]:
    """Enqueue ``2 * count`` jobs and claim them in two claims (two starts)."""
    for value in range(2 * count):
        jobs.store_result.perform_later(value)
    first = support.claim_everything(engine, PROCESS_ID, limit=count).jobs
    second = support.claim_everything(engine, PROCESS_ID, limit=count).jobs
    assert len(first) == len(second) == count
    return list(first), list(second)


def finish(engine: sa.Engine, claimed: list[t.Any], *, ordinary: bool = False) -> set[int]:
    outcomes = [Outcome(job, OutcomeKind.FINISHED) for job in claimed]
    if ordinary:
        sa.event.listen(engine, "before_cursor_execute", _listener)
    try:
        assert driver_writes.applies(engine) is not ordinary
        with frozen_clock(start=WHOLE_SECOND):
            stored = finalize.finalize_all(engine, PROCESS_ID, outcomes, preserve_finished=True)
    finally:
        if ordinary:
            sa.event.remove(engine, "before_cursor_execute", _listener)
    return {outcome.claimed.id for outcome in stored}


def stored_stamps(engine: sa.Engine, job_id: int) -> tuple[t.Any, ...]:
    """The job's finished_at, started_at and updated_at as the driver reads them (SQLite's
    text, untyped)."""
    query = "SELECT finished_at, started_at, updated_at FROM solidq_jobs WHERE id = :id"
    with engine.connect() as connection:
        return tuple(connection.execute(sa.text(query), {"id": job_id}).one())


def claim_starts(engine: sa.Engine) -> dict[int, t.Any]:
    query = "SELECT job_id, created_at FROM solidq_claimed_executions"
    with engine.connect() as connection:
        return {row[0]: row[1] for row in connection.execute(sa.text(query))}


@pytest.mark.parametrize("returning", [True, False], ids=["delete-returning", "lock-then-delete"])
def test_the_driver_path_stores_what_the_ordinary_path_stores(app, engine, monkeypatch, returning):
    if not returning:  # MySQL's way (MariaDB and SQLite have DELETE ... RETURNING)
        monkeypatch.setattr(engine.dialect, "delete_returning", False)
    first, second = claim_twice(engine, 4)
    starts = claim_starts(engine)
    # Two jobs given one start, as the jobs of one claim share theirs where the claim
    # stamps them once: the statement then takes one start, not a CASE.
    with engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE solidq_claimed_executions SET created_at = :start WHERE job_id = :id"),
            {"start": starts[first[0].id], "id": first[1].id},
        )
    starts = claim_starts(engine)

    one_start = finish(engine, first[:2])
    several_starts = finish(engine, first[2:3] + second[:2])  # a CASE arm per start
    ordinary = finish(engine, first[3:] + second[2:], ordinary=True)

    assert one_start == {job.id for job in first[:2]}
    assert several_starts == {job.id for job in first[2:3] + second[:2]}
    assert ordinary == {job.id for job in first[3:] + second[2:]}
    assert support.count(engine, CLAIMED) == 0
    stamps = {job.id: stored_stamps(engine, job.id) for job in first + second}
    # Each job started when its claim was made, stored in the text the ordinary path stores,
    # and finished at the (frozen) stamp, as the ordinary path's jobs were.
    assert {job_id: started for job_id, (_f, started, _u) in stamps.items()} == starts
    assert {(finished, updated) for finished, _s, updated in stamps.values()} == {
        stored_stamps(engine, second[3].id)[::2]
    }
    if engine.dialect.name == "sqlite":
        assert stamps[first[0].id][0] == "2026-12-03 12:00:00.000000"


def test_a_claim_this_process_no_longer_holds_is_not_finished(app, engine):
    first, second = claim_twice(engine, 2)
    lost = first[0]
    with engine.begin() as connection:  # pruned: another process released it
        connection.execute(CLAIMED.delete().where(CLAIMED.c.job_id == lost.id))

    stored = finish(engine, first + second)

    assert stored == {job.id for job in first[1:] + second}
    finished = support.rows(engine, JOBS, JOBS.c.finished_at.is_not(None))
    assert {row.id for row in finished} == stored


def test_a_failed_statement_stores_nothing(app, engine, monkeypatch):
    first, _second = claim_twice(engine, 2)
    # A statement the database refuses, after the claims' delete in the same transaction.
    for statement in ("_finish_at_one_start", "_finish_at_starts"):
        monkeypatch.setattr(driver_dialect, statement, lambda *_args: "UPDATE no_such_table")

    with pytest.raises(sa.exc.DBAPIError):
        finish(engine, first)

    assert support.count(engine, CLAIMED) == 4  # the delete rolled back with it
    assert support.rows(engine, JOBS, JOBS.c.finished_at.is_not(None)) == []
    monkeypatch.undo()
    assert finish(engine, first) == {job.id for job in first}  # the connection went back clean

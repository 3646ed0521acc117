"""A single enqueue on SQLite and MySQL/MariaDB through the driver's own connection
(:mod:`flask_solidq.storage.driver_writes`): it stores exactly what the ordinary path stores (on
SQLite the same text for every time, which the queue's comparisons rely on), and a failure
leaves nothing behind. PostgreSQL takes its own one-statement path."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import EnqueueError
from flask_solidq import models
from flask_solidq.storage import driver_writes
from flask_solidq.testing import frozen_clock
from tests import support
from tests.jobs import basic as jobs

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)

#: A whole second: the time a stored text is likeliest to get wrong (no microseconds).
WHOLE_SECOND = dt.datetime(2026, 12, 2, 12, 0, 0, tzinfo=dt.timezone.utc)


#: The backends that take the driver path: PostgreSQL takes its own one-statement path, so
#: its runs are not collected (a skip would fail CI's every-backend rule).
on_driver_backends = pytest.mark.parametrize(
    "database_url",
    [pytest.param("sqlite", id="sqlite")]
    + [pytest.param("mysql", id="mysql")] * bool(support.backend_url("mysql")),
    indirect=True,
)
#: ``typeof()`` is SQLite's; MySQL stores a DATETIME(6) value, not text.
on_sqlite = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def _listener(*_args: t.Any) -> None:
    """An execution listener: an engine with one takes the ordinary path."""


def stored_text(engine: sa.Engine, table: sa.Table, job_id: int) -> list[tuple[t.Any, ...]]:
    """Every column of the job's row in ``table`` as SQLite holds it (no type conversion)."""
    key = "id" if table is JOBS else "job_id"
    columns = ", ".join(f"typeof({c.name}), {c.name}" for c in table.c if c.name != "id")
    query = f"SELECT {columns} FROM {table.name} WHERE {key} = :job_id"  # noqa: S608
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(sa.text(query), {"job_id": job_id})]


def enqueue_both_ways(engine: sa.Engine, **options: t.Any) -> tuple[int, int]:
    """The same call enqueued on the driver path, then on the ordinary one."""
    assert driver_writes.applies(engine)
    fast = jobs.store_result.set(**options).perform_later(1)
    sa.event.listen(engine, "before_cursor_execute", _listener)
    try:
        assert not driver_writes.applies(engine)
        ordinary = jobs.store_result.set(**options).perform_later(1)
    finally:
        sa.event.remove(engine, "before_cursor_execute", _listener)
    return t.cast(int, fast.provider_job_id), t.cast(int, ordinary.provider_job_id)


def without_ids(rows: list[tuple[t.Any, ...]], *ids: object) -> list[tuple[t.Any, ...]]:
    return [tuple("<id>" if value in ids else value for value in row) for row in rows]


@on_sqlite
@pytest.mark.parametrize("options", [{}, {"wait": 30}], ids=["ready", "scheduled"])
def test_the_driver_path_stores_the_same_text_as_the_ordinary_one(app, engine, options):
    with frozen_clock(start=WHOLE_SECOND):
        fast, ordinary = enqueue_both_ways(engine, **options)

    fast_job, ordinary_job = stored_text(engine, JOBS, fast), stored_text(engine, JOBS, ordinary)
    # The rows differ only in the job's own UUID.
    uuid_column = [c.name for c in JOBS.c if c.name != "id"].index("active_job_id")
    for row in (fast_job, ordinary_job):
        row[0] = row[0][: 2 * uuid_column] + row[0][2 * uuid_column + 2 :]
    assert fast_job == ordinary_job
    assert ("text", "2026-12-02 12:00:00.000000") in zip(
        fast_job[0][::2], fast_job[0][1::2], strict=True
    )
    table = SCHEDULED if options else READY
    assert without_ids(stored_text(engine, table, fast), fast) == without_ids(
        stored_text(engine, table, ordinary), ordinary
    )
    assert support.count(engine, READY if options else SCHEDULED) == 0


@on_driver_backends
def test_a_failed_insert_stores_nothing_and_raises_enqueue_error(app, engine):
    jobs.store_result.perform_later(0)  # the tables checked (once a process), then one goes
    with engine.begin() as connection:
        connection.execute(JOBS.delete())
        connection.execute(READY.delete())
    with engine.begin() as connection:
        connection.execute(sa.text("ALTER TABLE solidq_ready_executions RENAME TO moved_away"))
    try:
        with pytest.raises(EnqueueError, match="Error"):
            jobs.store_result.perform_later(1)
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE moved_away RENAME TO solidq_ready_executions"))

    assert support.count(engine, JOBS) == 0  # the job's row was rolled back with it
    job = jobs.store_result.perform_later(2)  # the connection went back to the pool clean
    assert support.count(engine, JOBS) == 1 and job.successfully_enqueued


@on_driver_backends
def test_a_committed_enqueue_gives_its_connection_back_without_the_pools_rollback(app, engine):
    jobs.store_result.perform_later(0)  # the tables checked (once a process)
    resets: list[bool] = []

    def heard(_dbapi: t.Any, _record: t.Any, state: t.Any) -> None:
        resets.append(state.transaction_was_reset)

    sa.event.listen(engine.pool, "reset", heard)
    try:
        assert driver_writes.applies(engine)
        jobs.store_result.perform_later(1)
        assert resets == [True]  # committed: the pool is told, and sends no ROLLBACK

        with engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE solidq_ready_executions RENAME TO moved_away"))
        resets.clear()
        try:
            with pytest.raises(EnqueueError):
                jobs.store_result.perform_later(2)
        finally:
            with engine.begin() as connection:
                connection.execute(
                    sa.text("ALTER TABLE moved_away RENAME TO solidq_ready_executions")
                )
        assert resets[0] is False  # a failure takes the pool's rollback
    finally:
        sa.event.remove(engine.pool, "reset", heard)

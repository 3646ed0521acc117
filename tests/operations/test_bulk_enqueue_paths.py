"""``perform_all_later``'s own ways of storing: on PostgreSQL one statement per chunk, its
columns joined as text when no job of the chunk has a control's key (and a separator fits);
everywhere the rows built with one payload encoder. What they store is what enqueuing the
same jobs one by one through SQLAlchemy's Connection stores, row for row, and a failure
stores nothing."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import fast_path
from flask_solidq import models
from flask_solidq import postgres
from flask_solidq.definitions import arguments
from flask_solidq.definitions.job import Job
from flask_solidq.testing import frozen_clock
from tests import support
from tests.jobs import basic as jobs
from tests.support import solidq

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
BLOCKED = t.cast(sa.Table, models.BlockedExecution.__table__)
EXECUTIONS = (READY, SCHEDULED, BLOCKED)

NOW = dt.datetime(2026, 12, 2, 12, 0, 0, tzinfo=dt.timezone.utc)


def plain_jobs() -> list[Job]:
    """Jobs no control keys: PostgreSQL's statement with text columns."""
    return [
        jobs.store_result.new(1),
        jobs.store_result.new("héllo ☃ \U0001f600"),
        jobs.store_result.new({"nested": [1.5, None, True], 3: "int key"}),
        jobs.store_pair.new(1, second=[2, 3]),
        jobs.store_result.new(2).set(queue="other", priority=-3),
        jobs.store_result.new(3).set(wait=30),
        jobs.StoreResultJob.new("later").set(wait_until=NOW + dt.timedelta(hours=1)),
        jobs.store_result.new(4).set(wait_until=NOW - dt.timedelta(hours=1)),
    ]


def keyed_jobs() -> list[Job]:
    """Plain jobs among ones under a concurrency limit (the second of account 7 is blocked)
    and a rate limit: PostgreSQL's statement with the controls' columns."""
    return [
        jobs.store_result.new(1),
        jobs.sync_account.new(7),
        jobs.store_result.new(2).set(wait=30),
        jobs.sync_account.new(7, note="é"),
        jobs.sync_account.new(8).set(wait=60),
        jobs.store_pair.new("a", second="b"),
    ]


def separator_jobs() -> list[Job]:
    """Plain jobs whose queue names hold the first separators the text statement would join
    its columns by (and an argument holding one, which JSON escapes): it joins by another."""
    return [
        jobs.store_result.new("\x1f").set(queue="a\x1fb"),
        jobs.store_result.new(2).set(queue="c\x1ed", wait=30),
        jobs.store_result.new(3),
    ]


def unseparable_jobs() -> list[Job]:
    """Plain jobs whose queue names hold every separator of the text statement: they take
    the statement with arrays."""
    return [
        jobs.store_result.new(1).set(queue=SEPARATORS[:6]),
        jobs.store_result.new(2).set(queue=SEPARATORS[6:]),
    ]


def one_job() -> list[Job]:
    """A single job due now, whose ``scheduled_at`` column is one ``'now'``."""
    return [jobs.store_result.new(1)]


SEPARATORS = "\x1f\x1e\x1d\x1c" + "".join(map(chr, range(1, 9)))

#: Each set of jobs, and PostgreSQL's statement for it.
CASES = [
    pytest.param(plain_jobs, postgres.BULK_ENQUEUE_TEXT, id="plain"),
    pytest.param(keyed_jobs, postgres.BULK_ENQUEUE, id="keyed"),
    pytest.param(separator_jobs, postgres.BULK_ENQUEUE_TEXT, id="separators"),
    pytest.param(unseparable_jobs, postgres.BULK_ENQUEUE, id="unseparable"),
    pytest.param(one_job, postgres.BULK_ENQUEUE_TEXT, id="one"),
]


def _listener(*_args: t.Any) -> None:
    """An execution listener: an engine with one sends every statement through SQLAlchemy's
    Connection (no driver-level path)."""


def _spy(fetch: t.Callable[..., t.Any], statements: list[t.Any]) -> t.Callable[..., t.Any]:
    """``fetch``, recording each statement it runs in ``statements``."""

    def spy(where: t.Any, statement: t.Any, params: t.Any, **options: t.Any) -> t.Any:
        statements.append((fetch.__name__, statement))
        return fetch(where, statement, params, **options)

    return spy


def one_by_one_through_the_connection(engine: sa.Engine, batch: list[Job]) -> None:
    """The reference: each job enqueued alone, every statement through the Connection."""
    sa.event.listen(engine, "before_cursor_execute", _listener)
    try:
        for job in batch:
            job.perform_later()
    finally:
        sa.event.remove(engine, "before_cursor_execute", _listener)


def stored(engine: sa.Engine, batch: list[Job]) -> list[tuple[t.Any, ...]]:
    """For each job, in order: its row and its executions' rows, ids and its own UUID left
    out (they differ between two enqueues of the same call)."""
    snapshot = []
    with engine.connect() as connection:
        for job in batch:
            (row,) = connection.execute(sa.select(JOBS).where(JOBS.c.id == job.provider_job_id))
            kept = {k: v for k, v in row._mapping.items() if k not in ("id", "active_job_id")}
            executions = [
                (
                    table.name,
                    {k: v for k, v in execution._mapping.items() if k not in ("id", "job_id")},
                )
                for table in EXECUTIONS
                for execution in connection.execute(
                    sa.select(table).where(table.c.job_id == job.provider_job_id)
                )
            ]
            snapshot.append((kept, executions))
    return snapshot


@pytest.mark.parametrize(("make_jobs", "statement"), CASES)
def test_a_bulk_enqueue_stores_what_enqueues_one_by_one_store(
    app, engine, make_jobs, statement, monkeypatch
):
    statements = []
    for name in ("fetch_in_transaction", "fetch_autocommitted"):
        monkeypatch.setattr(fast_path, name, _spy(getattr(fast_path, name), statements))
    with frozen_clock(start=NOW):
        reference = make_jobs()
        one_by_one_through_the_connection(engine, reference)
        expected = stored(engine, reference)
        support.delete_all_rows(engine)

        statements.clear()  # the single enqueues' ones
        batch = make_jobs()
        solidq.perform_all_later(batch)

    assert [job.successfully_enqueued for job in batch] == [True] * len(batch)
    assert stored(engine, batch) == expected
    ids = [job.provider_job_id for job in batch]
    assert ids == sorted(ids)  # ids in the order given: a queue's first in is first out
    assert [job.scheduled_at for job in batch] == [job.scheduled_at for job in reference]
    assert [job.enqueued_at for job in batch] == [NOW] * len(batch)
    if engine.dialect.name == "postgresql":
        # The text statement needs no transaction of its own: it is one, autocommitted.
        text = statement is postgres.BULK_ENQUEUE_TEXT
        way = "fetch_autocommitted" if text else "fetch_in_transaction"
        assert statements == [(way, statement)]


@pytest.mark.parametrize("make_jobs", [plain_jobs, separator_jobs, keyed_jobs])
def test_a_bulk_enqueue_heard_by_a_listener_stores_the_same(app, engine, make_jobs):
    """With an execution listener, the statements go through SQLAlchemy's Connection."""
    with frozen_clock(start=NOW):
        reference = make_jobs()
        solidq.perform_all_later(reference)
        expected = stored(engine, reference)
        support.delete_all_rows(engine)

        batch = make_jobs()
        sa.event.listen(engine, "before_cursor_execute", _listener)
        try:
            solidq.perform_all_later(batch)
        finally:
            sa.event.remove(engine, "before_cursor_execute", _listener)

    assert [job.successfully_enqueued for job in batch] == [True] * len(batch)
    assert stored(engine, batch) == expected


@pytest.mark.parametrize("make_jobs", [plain_jobs, keyed_jobs], ids=["plain", "keyed"])
def test_a_failed_bulk_enqueue_stores_nothing(app, engine, make_jobs):
    jobs.store_result.perform_later(0)  # the tables checked (once a process), then one goes
    support.delete_all_rows(engine)
    with engine.begin() as connection:
        connection.execute(sa.text("ALTER TABLE solidq_ready_executions RENAME TO moved_away"))
    try:
        batch = make_jobs()
        with pytest.raises(sa.exc.DBAPIError):
            solidq.perform_all_later(batch)
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE moved_away RENAME TO solidq_ready_executions"))

    assert support.count(engine, JOBS) == 0
    assert not any(job.successfully_enqueued for job in batch)
    again = make_jobs()  # the connection went back to the pool clean
    solidq.perform_all_later(again)
    assert support.count(engine, JOBS) == len(again)


def test_the_bulk_payload_encoder_writes_what_dumps_writes(app):
    payloads = [
        {"job": "tests.jobs.basic:store_result", "args": [1]},
        {"args": ["héllo ☃ \U0001f600", "\u2028", '"quoted"\\'], "kwargs": {"é": [1.5, -0.0]}},
        {"args": [10**40, 1e300, True, None, {"_sq": "tagged"}]},
    ]
    encode = arguments.payload_encoder()
    assert [encode(payload) for payload in payloads] == [
        arguments.dumps(payload) for payload in payloads
    ]


def test_the_text_columns_are_joined_by_a_separator_none_of_their_values_holds():
    columns = {"queue_name": ["a\x1fb", "c"], "arguments": ["{}", "[]"]}
    assert postgres.joined_columns(columns) == {
        "queue_name": "a\x1fb\x1ec",
        "arguments": "{}\x1e[]",
        "separator": "\x1e",
    }
    assert postgres.joined_columns({"queue_name": [SEPARATORS[1:], "b"]}) == {
        "queue_name": SEPARATORS[1:] + "\x1fb",
        "separator": "\x1f",
    }
    # Even one value is split by a separator it holds.
    assert postgres.joined_columns({"queue_name": [SEPARATORS]}) is None
    assert postgres.joined_columns({"queue_name": [SEPARATORS, "b"]}) is None
    # string_to_array reads an empty string as no element at all, not one empty one.
    assert postgres.joined_columns({"queue_name": [""]}) is None


class Ünïcode(Job):
    """A definition whose import path isn't ASCII."""

    def perform(self, *args: object) -> None: ...


class OwnPayload(Job):
    """A definition that adds to its payload."""

    def perform(self, *args: object) -> None: ...

    def payload(self) -> dict[str, t.Any]:
        return {**super().payload(), "extra": "kept"}


def test_a_jobs_encoded_payload_is_its_payload_as_dumps_writes_it(app):
    retried = jobs.store_result.new(1)
    retried.executions, retried.exception_executions = 2, {"ValueError": 1}
    with_steps = jobs.store_result.new(2)
    with_steps._steps.done.append("fetch")
    with_steps._steps.current = ("embed", 3)
    resumed = jobs.store_result.new(3)
    resumed._steps.resumptions = 1
    batch = [
        jobs.store_result.new(1),
        jobs.store_pair.new("héllo ☃ \U0001f600", "\x1f\u2028"),
        jobs.store_result.new({"nested": [1.5, None, True], 3: "int key"}, jobs.Color.RED),
        jobs.store_pair.new(1, second=[2, 3]),
        jobs.StoreResultJob.new(),
        Ünïcode.new(1),
        OwnPayload.new(1),
        retried,
        with_steps,
        resumed,
        jobs.store_result.new(4).set(wait=30),
    ]
    encode = arguments.payload_encoder()
    assert [job.encoded_payload(encode) for job in batch] == [
        arguments.dumps(job.payload()) for job in batch
    ]
    assert [job.encoded_payload(arguments.dumps) for job in batch] == [
        arguments.dumps(job.payload()) for job in batch
    ]

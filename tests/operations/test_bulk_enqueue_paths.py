"""``perform_all_later``'s own ways of storing: on PostgreSQL one statement per chunk, its
columns joined as text when no job of the chunk has a control's key (and a separator fits),
and more than a chunk of jobs no control concerns pipelined in one transaction; everywhere
the rows built with one payload encoder. What they store is what enqueuing the same jobs one
by one through SQLAlchemy's Connection stores, row for row, and a failure stores nothing,
also one met in the last chunk of a pipelined enqueue, after the server ran the first."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import SerializationError
from flask_solidq import models
from flask_solidq.definitions import arguments
from flask_solidq.definitions.job import Job
from flask_solidq.operations import enqueue
from flask_solidq.storage import fast_path
from flask_solidq.storage.dialects import postgresql_bulk
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


def chunks_of_jobs() -> list[Job]:
    """More than two chunks of plain jobs, the second holding the unseparable ones: on
    PostgreSQL, three statements pipelined, the second with arrays."""
    size = enqueue.PIPELINED_CHUNK
    first = [jobs.store_result.new(index) for index in range(size - len(plain_jobs()))]
    second = unseparable_jobs() + [jobs.store_result.new(-index) for index in range(size - 2)]
    return plain_jobs() + first + second + separator_jobs()


SEPARATORS = "\x1f\x1e\x1d\x1c" + "".join(map(chr, range(1, 9)))

#: Each set of jobs, and PostgreSQL's statement for it.
CASES = [
    pytest.param(plain_jobs, postgresql_bulk.BULK_ENQUEUE_TEXT, id="plain"),
    pytest.param(keyed_jobs, postgresql_bulk.BULK_ENQUEUE, id="keyed"),
    pytest.param(separator_jobs, postgresql_bulk.BULK_ENQUEUE_TEXT, id="separators"),
    pytest.param(unseparable_jobs, postgresql_bulk.BULK_ENQUEUE, id="unseparable"),
    pytest.param(one_job, postgresql_bulk.BULK_ENQUEUE_TEXT, id="one"),
    pytest.param(
        chunks_of_jobs,
        [
            postgresql_bulk.BULK_ENQUEUE_TEXT,
            postgresql_bulk.BULK_ENQUEUE,
            postgresql_bulk.BULK_ENQUEUE_TEXT,
        ],
        id="pipelined",
    ),
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


def _spy_pipelined(statements: list[t.Any]) -> t.Callable[..., t.Any]:
    """:func:`flask_solidq.storage.fast_path.fetch_pipelined`, recording each statement it runs."""
    fetch = fast_path.fetch_pipelined

    def spy(engine: sa.Engine, pipelined: t.Iterable[fast_path.Statement]) -> t.Any:
        def recorded() -> t.Iterator[fast_path.Statement]:
            for statement in pipelined:
                statements.append(("fetch_pipelined", statement[0]))
                yield statement

        return fetch(engine, recorded())

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
    monkeypatch.setattr(fast_path, "fetch_pipelined", _spy_pipelined(statements))
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
    if engine.dialect.name == "postgresql" and isinstance(statement, list):
        assert statements == [("fetch_pipelined", each) for each in statement]
    elif engine.dialect.name == "postgresql":
        # The text statement needs no transaction of its own: it is one, autocommitted.
        text = statement is postgresql_bulk.BULK_ENQUEUE_TEXT
        way = "fetch_autocommitted" if text else "fetch_in_transaction"
        assert statements == [(way, statement)]


@pytest.mark.parametrize("make_jobs", [plain_jobs, separator_jobs, keyed_jobs, chunks_of_jobs])
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


def assert_nothing_stored_and_the_connection_clean(
    engine: sa.Engine, batch: list[Job], make_jobs: t.Callable[[], list[Job]]
) -> None:
    """After a failed ``perform_all_later(batch)``: no job stored, none marked enqueued, and
    the same kind of jobs enqueue on the connection the failure gave back to the pool."""
    assert support.count(engine, JOBS) == 0
    assert not any(job.successfully_enqueued for job in batch)
    again = make_jobs()
    solidq.perform_all_later(again)
    assert support.count(engine, JOBS) == len(again)


@pytest.mark.parametrize(
    "make_jobs", [plain_jobs, keyed_jobs, chunks_of_jobs], ids=["plain", "keyed", "pipelined"]
)
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

    assert_nothing_stored_and_the_connection_clean(engine, batch, make_jobs)


def test_a_job_that_cant_be_stored_in_the_last_chunk_stores_nothing(app, engine):
    # On PostgreSQL the first chunks are sent, and run, before the last one's rows are built.
    batch = chunks_of_jobs() + [jobs.store_result.new(object())]
    with pytest.raises(SerializationError):
        solidq.perform_all_later(batch)

    assert_nothing_stored_and_the_connection_clean(engine, batch, chunks_of_jobs)


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_pipelined_enqueue_the_server_refuses_in_its_last_chunk_stores_nothing(
    app, engine, monkeypatch
):
    statements: list[t.Any] = []
    monkeypatch.setattr(fast_path, "fetch_pipelined", _spy_pipelined(statements))
    refuse = "CHECK (arguments NOT LIKE '%poison%')"
    with engine.begin() as connection:
        connection.execute(sa.text(f"ALTER TABLE solidq_jobs ADD CONSTRAINT no_poison {refuse}"))
    try:
        batch = chunks_of_jobs() + [jobs.store_result.new("poison")]
        with pytest.raises(sa.exc.IntegrityError, match="no_poison"):
            solidq.perform_all_later(batch)
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE solidq_jobs DROP CONSTRAINT no_poison"))

    assert len(statements) == 3  # the refused row in the last, after two the server ran
    assert support.count(engine, READY) == 0
    assert_nothing_stored_and_the_connection_clean(engine, batch, chunks_of_jobs)


def test_a_pipelined_enqueue_needs_more_than_a_chunk_of_jobs_no_control_concerns(app, engine):
    size = enqueue.PIPELINED_CHUNK
    plain = [jobs.store_result.new(index) for index in range(size + 1)]
    with app.app_context():
        pipelined = enqueue._pipelines(engine, plain)
        assert not enqueue._pipelines(engine, plain[:size])
        assert not enqueue._pipelines(engine, plain + [jobs.sync_account.new(7)])
        with solidq.transaction():
            assert not enqueue._pipelines(engine, plain)
    assert pipelined is (engine.dialect.name == "postgresql")


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
    assert postgresql_bulk.joined_columns(columns) == {
        "queue_name": "a\x1fb\x1ec",
        "arguments": "{}\x1e[]",
        "separator": "\x1e",
    }
    assert postgresql_bulk.joined_columns({"queue_name": [SEPARATORS[1:], "b"]}) == {
        "queue_name": SEPARATORS[1:] + "\x1fb",
        "separator": "\x1f",
    }
    # Even one value is split by a separator it holds.
    assert postgresql_bulk.joined_columns({"queue_name": [SEPARATORS]}) is None
    assert postgresql_bulk.joined_columns({"queue_name": [SEPARATORS, "b"]}) is None
    # string_to_array reads an empty string as no element at all, not one empty one.
    assert postgresql_bulk.joined_columns({"queue_name": [""]}) is None


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

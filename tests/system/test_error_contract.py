"""The error contract for bad input (issue 8, points 4 and 5a): each bad input raises the
documented error, the same on every backend, before anything is written; and a stored payload
that can't be loaded fails its job through the ordinary failure path."""

from __future__ import annotations

import datetime as dt
import json
import logging
import typing as t

import pytest
import sqlalchemy as sa

import flask_solidq
from flask_solidq import limits_concurrency
from flask_solidq import limits_rate
from flask_solidq import models
from flask_solidq import signals
from flask_solidq.definitions import arguments
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.operations import claim
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.testing import batches as testing_batches
from tests import support
from tests.support import solidq

if t.TYPE_CHECKING:
    from flask import Flask

UTC = dt.timezone.utc
JOBS = t.cast(sa.Table, models.JobRecord.__table__)
EVERY_QUEUE = claim.QueueSelector(("*",))
PROCESS_ID = 9001
CLAIMERS = (PROCESS_ID,)

#: Every table an enqueue writes: none may hold a row after a refused one.
ENQUEUE_TABLES = (
    models.JobRecord,
    models.ReadyExecution,
    models.ScheduledExecution,
    models.BlockedExecution,
    models.Semaphore,
)


@solidq.job(name="error_contract.echo")
def echo(*args: object, **kwargs: object) -> None:
    pass


@solidq.job(name="error_contract.limited")
@limits_concurrency(key=lambda key: key, to=1)
def limited(key: str) -> None:
    pass


@solidq.job(name="error_contract.rated")
@limits_rate(to=5, per=60, key=lambda key: key)
def rated(key: str) -> None:
    pass


def assert_nothing_stored(engine: sa.Engine) -> None:
    for table in ENQUEUE_TABLES:
        assert support.count(engine, table) == 0, table


# -- 1. lone surrogates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "position", "where"),
    [
        (("\ud800",), {}, "argument 0", "argument 0:"),
        (("ok", ["x", {"k": "a\udfffb"}]), {}, "argument 1", "argument 1[1]['k']:"),
        (({"\udc80": 1},), {}, "argument 0", "argument 0<key '\\udc80'>:"),
        (({"\ud800"},), {}, "argument 0", "argument 0<element '\\ud800'>:"),
        (((1, "\ud800"),), {}, "argument 0", "argument 0[1]:"),
        ((), {"note": "\ud800"}, "keyword argument 'note'", "keyword argument 'note':"),
        ((), {"\ud800": 1}, "keyword argument '\\ud800'", "keyword argument '\\ud800':"),
    ],
)
def test_a_string_with_a_lone_surrogate_is_refused_naming_its_position(
    app, engine, args, kwargs, position, where
):
    with app.app_context(), pytest.raises(flask_solidq.SerializationError) as raised:
        echo.perform_later(*args, **kwargs)

    assert raised.value.position == position
    assert f"Can't store {where} it" in str(raised.value)
    assert "lone surrogate" in str(raised.value)
    assert_nothing_stored(engine)


def test_a_lone_surrogate_in_bulk_is_refused_before_anything_is_written(app, engine):
    batch = [echo.new("fine"), echo.new("\ud800")]
    with app.app_context(), pytest.raises(flask_solidq.SerializationError, match="argument 0"):
        solidq.perform_all_later(batch)

    assert_nothing_stored(engine)


def test_text_beyond_ascii_is_still_stored_and_round_trips(app, engine):
    values = ("é", ["ü", "日本"], {"ä": "ö", "😀": ("ß",)}, {"ñ"})
    with app.app_context():
        job = echo.perform_later(*values, note="ç")

    (record,) = support.rows(engine, JOBS)
    assert record.id == job.provider_job_id
    restored = echo.new()
    restored.load_payload(json.loads(record.arguments))
    assert restored.arguments == values
    assert restored.kwargs == {"note": "ç"}


def test_the_argument_functions_refuse_lone_surrogates_without_a_database():
    with pytest.raises(flask_solidq.SerializationError, match=r"U\+D800 at index 2"):
        arguments.dump_args(("ab\ud800",))


# -- 2. priority ---------------------------------------------------------------------------------


@pytest.mark.parametrize("priority", [2**31, -(2**31) - 1, 10**30])
def test_a_priority_outside_32_bits_is_refused_by_set(priority):
    message = r"set\(priority=\) must be between -2147483648 and 2147483647"
    with pytest.raises(ValueError, match=message):
        echo.set(priority=priority)
    with pytest.raises(ValueError, match=message):
        echo.new().set(priority=priority)


def test_a_priority_outside_32_bits_is_refused_as_a_class_attribute():
    with pytest.raises(ValueError, match=r"TooUrgent.priority must be between -2147483648"):

        class TooUrgent(solidq.Job, abstract=True):
            priority = -(2**31) - 1


@pytest.mark.parametrize("priority", [2**31 - 1, -(2**31)])
def test_the_ends_of_the_priority_range_are_stored(app, engine, priority):
    with app.app_context():
        job = echo.set(priority=priority).perform_later()

    (record,) = support.rows(engine, JOBS)
    assert (record.id, record.priority) == (job.provider_job_id, priority)


# -- 3. wait and wait_until ----------------------------------------------------------------------


@pytest.mark.parametrize("wait", [1e12, dt.timedelta(days=999_999_999), 1e300])
def test_a_wait_beyond_year_9999_is_refused_by_set(wait):
    message = r"set\(wait=\) must be at most \d+ seconds.*between 1970-01-01 and 9999-12-31"
    with pytest.raises(ValueError, match=message):
        echo.set(wait=wait)
    with pytest.raises(ValueError, match=message):
        echo.new().set(wait=wait)


@pytest.mark.parametrize(
    "when",
    [
        dt.datetime.max,
        dt.datetime.max.replace(tzinfo=UTC),
        dt.datetime(9999, 12, 31, 12, tzinfo=UTC),
        dt.datetime(9999, 12, 31, 20, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
        dt.datetime.min,
        dt.datetime(1, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5))),
        dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
)
def test_a_wait_until_outside_1970_to_9999_is_refused_by_set(when):
    message = r"set\(wait_until=\) must fall between 1970-01-01 and 9999-12-31 \(UTC\)"
    with pytest.raises(ValueError, match=message):
        echo.set(wait_until=when)
    with pytest.raises(ValueError, match=message):
        echo.new().set(wait_until=when)


def test_the_ends_of_the_schedule_range_are_stored(app, engine):
    latest = dt.datetime(9999, 12, 31, tzinfo=UTC)
    earliest = dt.datetime(1970, 1, 1, tzinfo=UTC)
    with app.app_context():
        far = echo.set(wait_until=latest).perform_later()
        past = echo.set(wait_until=earliest).perform_later()
        longest = echo.set(wait=(latest - dt.datetime.now(UTC)).total_seconds() - 60)
        waiting = longest.perform_later()

    by_id = {row.id: row.scheduled_at for row in support.rows(engine, JOBS)}
    assert by_id[far.provider_job_id] == latest
    assert by_id[past.provider_job_id] == earliest
    assert by_id[waiting.provider_job_id] > latest - dt.timedelta(minutes=2)
    assert {row.job_id for row in support.rows(engine, models.ScheduledExecution)} == {
        far.provider_job_id,
        waiting.provider_job_id,
    }


# -- 4. keys longer than their column ------------------------------------------------------------


@pytest.mark.parametrize(
    ("definition", "what"), [(limited, "concurrency key"), (rated, "rate-limit key")]
)
def test_a_key_longer_than_its_column_is_refused_at_enqueue(app, engine, definition, what):
    name = definition.job_name
    key = "k" * (255 - len(name))  # "<name>/<key>": 256 characters
    message = f"{name}'s {what} is 256 characters long; its column takes at most 255"
    with app.app_context():
        with pytest.raises(ValueError, match=message) as raised:
            definition.perform_later(key)
        assert key not in str(raised.value)
        with pytest.raises(ValueError, match=message):
            solidq.perform_all_later([echo.new(1), definition.new(key)])

    assert_nothing_stored(engine)


@pytest.mark.parametrize("definition", [limited, rated])
def test_a_key_of_exactly_255_characters_is_stored(app, engine, definition):
    key = "k" * (254 - len(definition.job_name))
    with app.app_context():
        job = definition.perform_later(key)

    (record,) = support.rows(engine, JOBS)
    assert record.id == job.provider_job_id
    stored = record.concurrency_key if definition is limited else record.rate_limit_key
    assert stored is not None and len(stored) == 255


# -- 5. the same job twice in bulk ---------------------------------------------------------------


def test_perform_all_later_refuses_the_same_job_twice_before_writing(app, engine):
    job = echo.new(1)
    batch = [echo.new(0), job, echo.new(2), job]
    with app.app_context(), pytest.raises(ValueError) as raised:
        solidq.perform_all_later(batch)

    message = str(raised.value)
    assert "the same job (error_contract.echo" in message
    assert f"job_id={job.job_id!r}" in message
    assert "at positions 1 and 3" in message
    assert all(each.successfully_enqueued is None for each in batch)
    assert_nothing_stored(engine)


def test_perform_all_later_refuses_two_jobs_with_the_same_job_id(app, engine):
    first, second = echo.new(1), echo.new(2)
    second.job_id = first.job_id
    with app.app_context(), pytest.raises(ValueError, match="two jobs with the same job_id"):
        solidq.perform_all_later([first, second])

    assert_nothing_stored(engine)


@pytest.mark.parametrize("adapter", ["inline", "test"])
def test_every_adapter_refuses_the_same_job_twice(tmp_path, adapter):
    app = support.create_app(f"sqlite:///{tmp_path}/app.db", SOLIDQ_ADAPTER=adapter)
    job = echo.new(1)
    with app.app_context():
        with pytest.raises(ValueError, match="the same job"):
            solidq.perform_all_later([job, job])
        assert job.successfully_enqueued is None
        if adapter == "test":
            assert testing_batches.records_of(app.extensions["solidq"]).jobs == []


# -- 6. a stored payload that can't be loaded ----------------------------------------------------


def _deeply_nested(depth: int) -> str:
    return (
        '{"job": "tests.system.test_error_contract:echo", "args": ['
        + "[" * depth
        + "]" * depth
        + "]}"
    )


@pytest.mark.parametrize(
    ("stored", "message"),
    [
        ("[1,2]", "must be a JSON object, not an array"),
        ('"x"', "must be a JSON object, not a string"),
        ("7", "must be a JSON object, not a number"),
        ("null", "must be a JSON object, not null"),
        ('{"job": 5, "args": []}', '"job" (the definition\'s import path) must be a string'),
        ('{"args": [], "executions": [1]}', "attempt counters are malformed"),
        ('{"args": [], "exception_executions": 3}', "attempt counters are malformed"),
        (_deeply_nested(100_000), "nests too deeply to load"),  # json.loads gives up
        (_deeply_nested(2_000), "nests too deeply to load"),  # json.loads gives up
        (_deeply_nested(950), "nests too deeply to load"),  # loading the arguments does
    ],
    ids=[
        "array",
        "string",
        "number",
        "null",
        "job-not-a-string",
        "executions",
        "exception-executions",
        "nested-100000",
        "nested-2000",
        "nested-950",
    ],
)
def test_a_payload_that_cant_be_loaded_fails_the_job_like_any_failure(
    app: Flask, engine: sa.Engine, caplog: pytest.LogCaptureFixture, stored: str, message: str
) -> None:
    with app.app_context():
        job = echo.perform_later("hello")
    with engine.begin() as connection:
        connection.execute(
            JOBS.update().where(JOBS.c.id == job.provider_job_id).values(arguments=stored)
        )
    (claimed,) = claim.claim(engine, EVERY_QUEUE, 1, PROCESS_ID)

    failures: list[dict[str, t.Any]] = []

    def on_fail(sender: t.Any, **payload: t.Any) -> None:
        failures.append(payload)

    caplog.set_level(logging.DEBUG, logger="flask_solidq")
    log_subscriber.connect()
    try:
        with signals.fail.connected_to(on_fail), app.app_context():
            outcome = execute.perform(claimed)
            assert failures == []  # sent once the failure is stored
            finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=True)
    finally:
        log_subscriber.disconnect()

    assert outcome.kind is OutcomeKind.FAILED
    error = json.loads(t.cast(str, outcome.error))
    assert error["exception_class"] == "flask_solidq.errors.DeserializationError"
    assert message in error["message"]
    assert "hello" not in outcome.error
    (sent,) = failures
    assert sent["provider_job_id"] == job.provider_job_id
    assert sent["job"] is None
    assert isinstance(sent["error"], flask_solidq.DeserializationError)
    # The signal's line is DEBUG: a worker's "Job failed" line is the WARNING.
    fails = [r for r in caplog.records if r.getMessage().startswith("SolidQ Fail ")]
    assert [(r.levelno, r.getMessage()) for r in fails] == [
        (
            logging.DEBUG,
            f"SolidQ Fail job_id: {job.provider_job_id},"
            ' error_class: "flask_solidq.errors.DeserializationError"',
        )
    ]

    (failed,) = support.rows(engine, models.FailedExecution)
    assert failed.job_id == job.provider_job_id
    assert message in json.loads(failed.error)["message"]
    assert support.count(engine, models.ClaimedExecution) == 0

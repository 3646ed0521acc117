"""Coalescing admission, what an enqueue does with a coalesced call, on every backend: the
declaration's validation, key forms, discard/replace/collect at enqueue, the outcome table,
``signals.coalesce``, bulk enqueues, transactions and recurring ticks (seed 003's sections
"coalesce options", "Keys", "Replacing arguments", "Collecting jobs and scheduling", "Enqueue
outcomes", "Bulk enqueues", "Transactions", "Recurring jobs and concurrency limits")."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import typing as t

import pytest
import sqlalchemy as sa
from sqlalchemy import orm

from flask_solidq import CoalesceStatus
from flask_solidq import SerializationError
from flask_solidq import coalesce
from flask_solidq import limits_concurrency
from flask_solidq import models
from flask_solidq import signals
from flask_solidq.config import RecurringSettings
from flask_solidq.definitions import arguments
from flask_solidq.operations import dispatch
from flask_solidq.recurring import tasks
from flask_solidq.storage import db as solidq_db
from flask_solidq.timing import UTC
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import coalesce_admission as jobs

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
KEYS = t.cast(sa.Table, models.CoalesceKey.__table__)
CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
EXECUTIONS = t.cast(sa.Table, models.RecurringExecution.__table__)

P = jobs.PREFIX
CREATED = CoalesceStatus.CREATED
DISCARDED = CoalesceStatus.DISCARDED
REPLACED = CoalesceStatus.REPLACED
COLLECTED = CoalesceStatus.COLLECTED

#: Slack for comparing a stored time with one computed in the test.
SLACK = dt.timedelta(seconds=5)

TICK = dt.datetime(2026, 3, 1, 12, 5, tzinfo=UTC)


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    jobs.PERFORMED.clear()
    jobs.SEEN_BY_WORKER.clear()
    yield jobs.PERFORMED
    jobs.PERFORMED.clear()
    jobs.SEEN_BY_WORKER.clear()


# -- helpers ------------------------------------------------------------------------------------


def key_rows(engine: sa.Engine) -> dict[str, tuple[int, int]]:
    """key -> (open job id, calls_count), for every row of ``solidq_coalesce_keys``."""
    return {row.key: (row.job_id, row.calls_count) for row in support.rows(engine, KEYS)}


def calls_per_job(engine: sa.Engine) -> dict[int, int]:
    """job id -> how many ``solidq_coalesced_calls`` it holds."""
    with engine.connect() as connection:
        query = sa.select(CALLS.c.job_id, sa.func.count()).group_by(CALLS.c.job_id)
        return {job_id: size for job_id, size in connection.execute(query)}


def job_row(engine: sa.Engine, job_id: int | None) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return row


def stored_arguments(row: sa.Row[t.Any]) -> tuple[tuple[t.Any, ...], dict[str, t.Any]]:
    payload = json.loads(row.arguments)
    return arguments.load_args(payload["args"]), arguments.load_kwargs(payload.get("kwargs", {}))


def assert_nothing_stored(engine: sa.Engine) -> None:
    assert support.count(engine, JOBS) == 0
    assert support.count(engine, KEYS) == 0
    assert support.count(engine, CALLS) == 0


def near(moment: dt.datetime, expected: dt.datetime) -> bool:
    return expected - SLACK <= moment <= expected + SLACK


@contextlib.contextmanager
def coalesce_signals(
    fail_on_key: str | None = None,
) -> t.Iterator[list[dict[str, t.Any]]]:
    """Collect the payloads (and senders) of ``signals.coalesce`` sent inside the block; with
    ``fail_on_key``, the receiver raises for a call of that key."""
    sent: list[dict[str, t.Any]] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        sent.append({"sender": sender, **payload})
        if payload["key"] == fail_on_key:
            raise RuntimeError("a coalesce receiver failed")

    with signals.coalesce.connected_to(receiver):
        yield sent


def run_all(app: t.Any, engine: sa.Engine) -> None:
    """Claim, perform and finish every ready job."""
    while claimed := claim(engine, 50):
        finish(engine, perform(app, claimed))


# -- 1. the declaration -------------------------------------------------------------------------


@pytest.mark.parametrize("on_conflict", ["block", "merge", "DISCARD", ""])
def test_on_conflict_other_than_discard_replace_or_collect_raises_value_error(on_conflict):
    with pytest.raises(ValueError, match="on_conflict"):
        coalesce(key="k", on_conflict=on_conflict)


@pytest.mark.parametrize("on_conflict", ["discard", "replace"])
@pytest.mark.parametrize(
    "option",
    [{"max_calls": 5}, {"on_full": "wait"}, {"on_full": "dispatch"}],
    ids=["max_calls", "on_full-wait", "on_full-dispatch"],
)
def test_max_calls_and_on_full_are_only_allowed_with_collect(on_conflict, option):
    with pytest.raises(ValueError, match=next(iter(option))):
        coalesce(key="k", on_conflict=on_conflict, **option)


def test_collect_takes_100_calls_and_waits_when_full_by_default():
    assert jobs.collect.coalesce_max_calls == 100
    assert jobs.collect.coalesce_on_full == "wait"
    assert jobs.discard.coalesce_max_calls is None
    assert jobs.discard.coalesce_on_full is None


@pytest.mark.parametrize(
    "options",
    [
        {"debounce": 10, "max_wait": 10},
        {"debounce": 10, "max_wait": 5},
        {"debounce": dt.timedelta(seconds=10), "max_wait": dt.timedelta(seconds=9)},
        {"max_wait": 30},
    ],
    ids=["equal", "shorter", "timedelta-shorter", "without-debounce"],
)
def test_max_wait_must_be_longer_than_debounce_and_needs_it(options):
    with pytest.raises(ValueError, match="max_wait"):
        coalesce(key="k", **options)


@pytest.mark.parametrize("mode", ["replace", "collect"])
@pytest.mark.parametrize("order", ["coalesce-first", "concurrency-first"])
def test_replace_or_collect_with_a_discarding_concurrency_limit_raises_in_either_order(mode, order):
    declarations = [
        coalesce(key="k", on_conflict=mode),
        limits_concurrency(to=1, key="k", on_conflict="discard"),
    ]
    if order == "concurrency-first":
        declarations.reverse()

    def combined(*_args: object) -> None:
        pass

    with pytest.raises(ValueError, match="limits_concurrency"):
        target = combined
        for declaration in declarations:
            target = declaration(target)
        support.solidq.job(name=f"{P}combined-{mode}-{order}")(target)

    class Combined(support.solidq.Job, name=f"{P}combined-class-{mode}-{order}"):
        pass

    first, second = declarations
    first(Combined)
    with pytest.raises(ValueError, match="limits_concurrency"):
        second(Combined)


def test_discard_may_be_combined_with_a_discarding_concurrency_limit():
    assert jobs.discard_limited.coalesce_on_conflict == "discard"
    assert jobs.discard_limited.concurrency_on_conflict == "discard"


def test_the_declaration_reads_back_on_the_definition():
    def key(account: object, *_args: object) -> object:
        return account

    @support.solidq.job(name=f"{P}read_back")
    @coalesce(
        key=key,
        on_conflict="collect",
        max_calls=7,
        on_full="dispatch",
        debounce=dt.timedelta(seconds=5),
        max_wait=30,
    )
    def read_back(calls: list[t.Any]) -> None:
        pass

    assert read_back.coalesce_key is key
    assert read_back.coalesce_on_conflict == "collect"
    assert read_back.coalesce_max_calls == 7
    assert read_back.coalesce_on_full == "dispatch"
    assert read_back.coalesce_debounce == 5.0
    assert read_back.coalesce_max_wait == 30.0
    assert jobs.key_global.coalesce_key == "global"
    assert jobs.key_global.coalesce_on_conflict == "discard"
    assert jobs.key_global.coalesce_debounce is None
    assert jobs.key_global.coalesce_max_wait is None


# -- 2. keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "suffix"),
    [
        ("key_global", "/global"),
        ("key_blank", "/"),
        ("key_empty_list", ""),
        ("key_none_result", ""),
    ],
    ids=["literal", "blank-literal", "empty-list", "callable-returning-none"],
)
def test_class_wide_key_forms_merge_every_call_under_their_stored_key(app, engine, name, suffix):
    definition = getattr(jobs, name)
    expected = f"{P}{name}{suffix}"

    first = definition.perform_later(1)
    second = definition.perform_later(2)

    assert (first.coalesce_status, second.coalesce_status) == (CREATED, DISCARDED)
    assert second.provider_job_id == first.provider_job_id
    assert support.count(engine, JOBS) == 1
    assert key_rows(engine) == {expected: (first.provider_job_id, 0)}
    with pytest.raises(AttributeError):  # what the enqueue recorded; the caller can't rewrite it
        second.coalesce_status = CREATED
    assert definition.coalesce_key_for(1) == definition.coalesce_key_for(2) == expected


def test_a_callable_key_gives_1_and_the_string_1_the_same_key(app, engine):
    first = jobs.key_value.perform_later(1)
    second = jobs.key_value.perform_later("1")
    other = jobs.key_value.perform_later(2)

    assert [job.coalesce_status for job in (first, second, other)] == [CREATED, DISCARDED, CREATED]
    assert second.provider_job_id == first.provider_job_id
    assert key_rows(engine) == {
        f"{P}key_value/1": (first.provider_job_id, 0),
        f"{P}key_value/2": (other.provider_job_id, 0),
    }
    assert jobs.key_value.coalesce_key_for(1) == jobs.key_value.coalesce_key_for("1")


def test_list_items_are_joined_with_slashes_so_a_slash_inside_an_item_gives_the_same_key(
    app, engine
):
    first = jobs.key_parts.perform_later("a/b")
    second = jobs.key_parts.perform_later("a", "b")

    assert second.coalesce_status is DISCARDED
    assert second.provider_job_id == first.provider_job_id
    assert list(key_rows(engine)) == [f"{P}key_parts/a/b"]
    assert jobs.key_parts.coalesce_key_for("a", "b") == f"{P}key_parts/a/b"


@pytest.mark.parametrize("name", ["key_declared_none", "key_declared_false"])
def test_a_key_declared_none_or_false_turns_coalescing_off(app, engine, name):
    definition = getattr(jobs, name)

    first = definition.perform_later(1)
    second = definition.perform_later(1)

    assert first.coalesce_status is None and second.coalesce_status is None
    assert first.provider_job_id and second.provider_job_id
    assert first.provider_job_id != second.provider_job_id
    assert first.successfully_enqueued and second.successfully_enqueued
    assert support.count(engine, JOBS) == 2
    assert support.count(engine, KEYS) == 0
    assert definition.coalesce_key_for(1) is None


def test_keys_are_scoped_to_the_job_name_so_two_definitions_with_one_key_never_merge(app, engine):
    one = jobs.same_key_one.perform_later()
    two = jobs.same_key_two.perform_later()

    assert (one.coalesce_status, two.coalesce_status) == (CREATED, CREATED)
    assert one.provider_job_id != two.provider_job_id
    assert key_rows(engine) == {
        f"{P}same_key_one/shared": (one.provider_job_id, 0),
        f"{P}same_key_two/shared": (two.provider_job_id, 0),
    }


def test_a_key_longer_than_255_characters_raises_at_enqueue_with_nothing_stored(app, engine):
    room = 255 - len(f"{P}key_long/")

    with pytest.raises(ValueError, match="255"):
        jobs.key_long.perform_later(room + 1)
    with pytest.raises(ValueError, match="255"):
        support.solidq.perform_all_later([jobs.plain.new(1), jobs.key_long.new(room + 1)])
    assert_nothing_stored(engine)

    fits = jobs.key_long.perform_later(room)  # exactly 255 characters: every backend takes it
    assert fits.coalesce_status is CREATED
    assert [len(key) for key in key_rows(engine)] == [255]


# -- 3. discard ---------------------------------------------------------------------------------


def test_a_discarded_call_changes_nothing_about_the_pending_job(app, engine):
    before = utcnow()
    first = jobs.discard.set(wait=60).perform_later("k", "first")
    stored = job_row(engine, first.provider_job_id)
    (schedule,) = support.rows(engine, SCHEDULED)

    later = jobs.discard.set(queue="other", priority=9, wait=600).perform_later("k", "later")
    plain = jobs.discard.perform_later("k", "plain")

    for call in (later, plain):
        assert call.coalesce_status is DISCARDED
        assert call.provider_job_id == first.provider_job_id
        assert call.successfully_enqueued is True
    assert job_row(engine, first.provider_job_id) == stored
    assert (stored.queue_name, stored.priority) == ("first", 1)
    assert near(stored.scheduled_at, before + dt.timedelta(seconds=60))
    assert stored_arguments(stored) == (("k", "first"), {})
    assert support.rows(engine, SCHEDULED) == [schedule]
    assert support.count(engine, READY) == 0
    assert support.count(engine, JOBS) == 1


# -- 4. replace ---------------------------------------------------------------------------------


def test_replace_writes_the_payload_over_the_job_which_keeps_everything_else(app, engine):
    before = utcnow()
    first = jobs.replace.set(wait=60).perform_later(7, {"name": "old"}, region="eu")
    original = job_row(engine, first.provider_job_id)

    latest = jobs.replace.set(queue="other", priority=9, wait=600).perform_later(
        7, {"name": "new"}, region="us"
    )

    assert latest.coalesce_status is REPLACED
    assert latest.provider_job_id == first.provider_job_id
    assert latest.successfully_enqueued is True
    replaced = job_row(engine, first.provider_job_id)
    assert stored_arguments(replaced) == ((7, {"name": "new"}), {"region": "us"})
    kept = ("id", "active_job_id", "queue_name", "priority", "scheduled_at")
    assert [getattr(replaced, column) for column in kept] == [
        getattr(original, column) for column in kept
    ]
    assert replaced.active_job_id == first.job_id
    assert (replaced.queue_name, replaced.priority) == ("first", 1)
    assert replaced.concurrency_key == f"{P}replace/eu"
    assert replaced.rate_limit_key == f"{P}replace/eu"
    assert near(replaced.scheduled_at, before + dt.timedelta(seconds=60))
    assert support.count(engine, JOBS) == 1

    support.make_due(engine, first.provider_job_id)
    dispatch.dispatch_due(engine, 500)
    run_all(app, engine)
    assert jobs.PERFORMED == [(f"{P}replace", (7, {"name": "new"}, "us"))]


# -- 5. collect ---------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["one-by-one", "bulk"])
def test_250_calls_with_max_calls_100_make_two_sealed_jobs_of_100_and_an_open_one_of_50(
    app, engine, how
):
    key = f"{P}collect/acct"
    if how == "bulk":
        calls = [jobs.collect.new("acct", index) for index in range(250)]
        support.solidq.perform_all_later(calls)
    else:
        calls = []
        for index in range(250):
            calls.append(jobs.collect.perform_later("acct", index))
            if index == 99:  # the call that fills a job seals it: the key has no open job
                assert key_rows(engine) == {}
            if index == 100:  # and the next call opens a new one
                assert key_rows(engine) == {key: (calls[-1].provider_job_id, 1)}

    opened = [index for index, call in enumerate(calls) if call.coalesce_status is CREATED]
    assert opened == [0, 100, 200]
    assert all(call.coalesce_status is COLLECTED for i, call in enumerate(calls) if i not in opened)
    first, second, third = (calls[index].provider_job_id for index in opened)
    assert [call.provider_job_id for call in calls] == [first] * 100 + [second] * 100 + [third] * 50
    assert calls_per_job(engine) == {first: 100, second: 100, third: 50}
    assert key_rows(engine) == {key: (third, 50)}
    assert support.count(engine, JOBS) == 3


def test_on_full_dispatch_makes_a_job_that_fills_ready_at_once_and_one_that_doesnt_waits(
    app, engine
):
    before = utcnow()
    filled = [jobs.collect_dispatch.set(wait=30).perform_later("a", index) for index in range(3)]
    opened = jobs.collect_dispatch.set(wait=30).perform_later("a", 3)
    full, waiting = filled[0].provider_job_id, opened.provider_job_id

    assert [call.coalesce_status for call in filled] == [CREATED, COLLECTED, COLLECTED]
    assert opened.coalesce_status is CREATED and waiting != full
    assert [row.job_id for row in support.rows(engine, READY)] == [full]
    assert [row.job_id for row in support.rows(engine, SCHEDULED)] == [waiting]
    assert near(job_row(engine, full).scheduled_at, utcnow())  # moved to the moment it filled
    assert near(job_row(engine, waiting).scheduled_at, before + dt.timedelta(seconds=30))
    assert key_rows(engine) == {f"{P}collect_dispatch/a": (waiting, 1)}

    # A bulk whose calls fill a new job at once: it is ready straight away too.
    bulk = [jobs.collect_dispatch.new("b", index).set(wait=30) for index in range(3)]
    support.solidq.perform_all_later(bulk)
    assert len({call.provider_job_id for call in bulk}) == 1
    assert bulk[0].provider_job_id in {row.job_id for row in support.rows(engine, READY)}


def test_on_full_wait_keeps_a_full_job_waiting_for_its_time(app, engine):
    before = utcnow()
    calls = [jobs.collect_wait.set(wait=30).perform_later("a", index) for index in range(3)]
    job_id = calls[0].provider_job_id

    assert [call.provider_job_id for call in calls] == [job_id] * 3
    assert key_rows(engine) == {}  # sealed
    assert support.count(engine, READY) == 0
    assert [row.job_id for row in support.rows(engine, SCHEDULED)] == [job_id]
    assert near(job_row(engine, job_id).scheduled_at, before + dt.timedelta(seconds=30))


def test_after_max_calls_is_lowered_the_next_call_seals_an_open_job_over_it_as_it_is(
    app, engine, monkeypatch
):
    key = f"{P}collect_small/a"
    old = [jobs.collect_small.perform_later("a", index) for index in range(4)]
    old_job = old[0].provider_job_id
    assert key_rows(engine) == {key: (old_job, 4)}

    # A deploy lowers max_calls from 5 to 2 while the job is open with 4 calls.
    lowered = dataclasses.replace(jobs.collect_small._coalesce, max_calls=2)
    support.redeclare(monkeypatch, jobs.collect_small, coalesce=lowered)
    opener = jobs.collect_small.perform_later("a", 4)

    assert opener.coalesce_status is CREATED
    new_job = opener.provider_job_id
    assert new_job != old_job
    assert calls_per_job(engine) == {old_job: 4, new_job: 1}  # the old job keeps all its calls
    assert key_rows(engine) == {key: (new_job, 1)}

    filler = jobs.collect_small.perform_later("a", 5)
    assert (filler.coalesce_status, filler.provider_job_id) == (COLLECTED, new_job)
    assert key_rows(engine) == {}


# -- 6. enqueue outcomes ------------------------------------------------------------------------


def test_single_enqueue_outcomes_for_created_discarded_replaced_and_collected(app, engine):
    outcomes = [
        jobs.discard.perform_later("o"),
        jobs.discard.perform_later("o"),
        jobs.replace.perform_later(1, "old"),
        jobs.replace.perform_later(1, "new"),
        jobs.collect.perform_later("o", 1),
        jobs.collect.perform_later("o", 2),
    ]

    rows = [row.id for row in support.rows(engine, JOBS)]
    assert [
        (job.coalesce_status, job.provider_job_id, job.successfully_enqueued) for job in outcomes
    ] == [
        (CREATED, rows[0], True),
        (DISCARDED, rows[0], True),
        (CREATED, rows[1], True),
        (REPLACED, rows[1], True),
        (CREATED, rows[2], True),
        (COLLECTED, rows[2], True),
    ]


def test_bulk_enqueue_outcomes_report_calls_whose_data_wasnt_stored_as_not_enqueued(app, engine):
    first = [
        jobs.discard.new("o"),
        jobs.discard.new("o"),
        jobs.replace.new(1, "a"),
        jobs.replace.new(1, "b"),
        jobs.replace.new(1, "c"),
        jobs.collect.new("o", 1),
        jobs.collect.new("o", 2),
    ]
    support.solidq.perform_all_later(first)
    discard_id, replace_id, collect_id = (first[index].provider_job_id for index in (0, 4, 5))

    assert [
        (job.coalesce_status, job.provider_job_id, job.successfully_enqueued) for job in first
    ] == [
        (CREATED, discard_id, True),
        (DISCARDED, discard_id, False),
        (DISCARDED, replace_id, False),  # superseded by the last replace call of the bulk
        (DISCARDED, replace_id, False),
        (CREATED, replace_id, True),
        (CREATED, collect_id, True),
        (COLLECTED, collect_id, True),
    ]
    assert stored_arguments(job_row(engine, replace_id))[0] == (1, "c")

    # Into jobs that are already open.
    second = [jobs.replace.new(1, "d"), jobs.replace.new(1, "e"), jobs.discard.new("o")]
    support.solidq.perform_all_later(second)
    assert [
        (job.coalesce_status, job.provider_job_id, job.successfully_enqueued) for job in second
    ] == [
        (DISCARDED, replace_id, False),
        (REPLACED, replace_id, True),
        (DISCARDED, discard_id, False),
    ]
    assert stored_arguments(job_row(engine, replace_id))[0] == (1, "e")
    assert support.count(engine, JOBS) == 3


def test_a_single_call_whose_job_a_concurrency_conflict_destroyed_has_no_outcome(app, engine):
    held = jobs.discard_limited.perform_later("a")  # takes the only slot
    with coalesce_signals() as sent:
        destroyed = jobs.discard_limited.perform_later("b")

    assert destroyed.coalesce_status is None
    assert destroyed.provider_job_id is None
    # The seed's table: "Concurrency conflict destroyed the job, single nil nil true, set by
    # Active Job".
    assert destroyed.successfully_enqueued is True
    assert sent == []  # no coalesce event for a call a concurrency conflict destroyed
    assert [row.id for row in support.rows(engine, JOBS)] == [held.provider_job_id]
    # The destroyed job freed its key: the next call of "b" isn't discarded into a ghost.
    assert key_rows(engine) == {f"{P}discard_limited/a": (held.provider_job_id, 0)}
    again = jobs.discard_limited.perform_later("b")
    assert (again.coalesce_status, again.provider_job_id) == (None, None)


def test_bulk_calls_whose_jobs_a_concurrency_conflict_destroyed_have_no_outcome(app, engine):
    jobs.discard_limited.perform_later("a")  # takes the only slot
    destroyed = [jobs.discard_limited.new("b"), jobs.discard_limited.new("c")]
    with coalesce_signals() as sent:
        support.solidq.perform_all_later(destroyed)

    assert [
        (job.coalesce_status, job.provider_job_id, job.successfully_enqueued) for job in destroyed
    ] == [(None, None, False), (None, None, False)]
    assert sent == []
    assert support.count(engine, JOBS) == 1
    assert list(key_rows(engine)) == [f"{P}discard_limited/a"]


def test_a_workers_instance_has_no_coalesce_status(app, engine):
    enqueued = jobs.reports_status.perform_later()
    assert enqueued.coalesce_status is CREATED

    run_all(app, engine)

    assert jobs.SEEN_BY_WORKER == [(None, enqueued.provider_job_id)]


# -- 7. signals.coalesce ------------------------------------------------------------------------


def test_the_coalesce_signal_fires_once_per_admitted_call_with_its_outcome(app, engine):
    with coalesce_signals() as sent:
        calls = [
            jobs.discard.perform_later("s"),
            jobs.discard.perform_later("s"),
            jobs.collect.perform_later("s", 1),
            jobs.collect.perform_later("s", 2),
            jobs.replace.perform_later("s", 1),
            jobs.replace.perform_later("s", 2),
        ]

    assert sent == [
        {
            "sender": type(call),
            "status": call.coalesce_status.value,
            "key": type(call).coalesce_key_for(*call.arguments),
            "job_id": call.provider_job_id,
            "active_job_id": call.job_id,
            "class_name": type(call).job_name,
        }
        for call in calls
    ]
    assert [payload["status"] for payload in sent] == [
        "created",
        "discarded",
        "created",
        "collected",
        "created",
        "replaced",
    ]
    assert all(type(payload["status"]) is str for payload in sent)
    # A call that joined has its own job id, not the owning job's.
    assert sent[1]["active_job_id"] != job_row(engine, sent[1]["job_id"]).active_job_id


# -- 8. bulk enqueues ---------------------------------------------------------------------------


def test_bulk_stores_ordinary_jobs_too_and_admits_coalesced_calls_in_sorted_key_order(app, engine):
    batch = [
        jobs.key_value.new("c"),
        jobs.plain.new(1),
        jobs.key_value.new("a"),
        jobs.discard.new("b"),
        jobs.key_value.new("b"),
        jobs.key_value.new("a"),
        jobs.plain.new(2),
    ]
    with coalesce_signals() as sent:
        support.solidq.perform_all_later(batch)

    ordinary = [batch[1], batch[6]]
    assert all(job.coalesce_status is None and job.successfully_enqueued for job in ordinary)
    expected = sorted(
        [
            f"{P}key_value/c",
            f"{P}key_value/a",
            f"{P}discard/b",
            f"{P}key_value/b",
            f"{P}key_value/a",
        ]
    )
    assert [payload["key"] for payload in sent] == expected
    assert expected[0] == f"{P}discard/b"  # a key's order is the string's, not the input's
    # Ordinary jobs first, then one job per key, created in key order.
    rows = support.rows(engine, JOBS)
    assert {row.id for row in rows[:2]} == {job.provider_job_id for job in ordinary}
    assert [row.class_name for row in rows] == [
        f"{P}plain",
        f"{P}plain",
        f"{P}discard",
        f"{P}key_value",
        f"{P}key_value",
        f"{P}key_value",
    ]
    assert [stored_arguments(row)[0] for row in rows[2:]] == [("b",), ("a",), ("b",), ("c",)]
    assert batch[5].coalesce_status is DISCARDED
    assert batch[5].provider_job_id == batch[2].provider_job_id


def test_a_key_callable_that_raises_fails_a_bulk_enqueue_with_nothing_written(app, engine):
    batch = [
        jobs.plain.new(1),
        jobs.discard.new("x"),
        jobs.collect_raising_key.new("fine", 1),
        jobs.collect_raising_key.new("boom", 2),
    ]

    with pytest.raises(LookupError, match="key callable"):
        support.solidq.perform_all_later(batch)

    assert_nothing_stored(engine)
    assert [job.provider_job_id for job in batch] == [None] * 4


def test_an_unserializable_argument_on_a_collect_call_fails_a_bulk_with_nothing_written(
    app, engine
):
    batch = [
        jobs.plain.new(1),
        jobs.discard.new("x"),
        jobs.collect.new("k", 1),
        jobs.collect.new("k", object()),
    ]

    with pytest.raises(SerializationError):
        support.solidq.perform_all_later(batch)

    assert_nothing_stored(engine)
    assert [job.provider_job_id for job in batch] == [None] * 4


def test_an_unserializable_argument_on_a_repeated_discard_call_in_bulk_is_silently_discarded(
    app, engine
):
    batch = [jobs.discard.new("d", "fine"), jobs.discard.new("d", object())]

    support.solidq.perform_all_later(batch)

    assert [job.coalesce_status for job in batch] == [CREATED, DISCARDED]
    assert batch[1].provider_job_id == batch[0].provider_job_id
    assert stored_arguments(job_row(engine, batch[0].provider_job_id))[0] == ("d", "fine")


def test_an_unserializable_argument_on_a_repeated_single_discard_call_is_silently_discarded(
    app, engine
):
    # Seed: "A repeated :discard call is never stored, so an argument on it that can't be
    # serialized stays silently discarded, as with a single perform_later."
    first = jobs.discard.perform_later("d", "fine")

    repeated = jobs.discard.perform_later("d", object())

    assert repeated.coalesce_status is DISCARDED
    assert repeated.provider_job_id == first.provider_job_id
    assert support.count(engine, JOBS) == 1


def _three_keys_and_an_ordinary_job() -> list[t.Any]:
    return [jobs.discard.new("c"), jobs.plain.new(1), jobs.discard.new("a"), jobs.discard.new("b")]


def test_a_bulk_failing_part_way_inside_a_queue_transaction_stores_nothing(app, engine):
    batch = _three_keys_and_an_ordinary_job()

    with coalesce_signals(fail_on_key=f"{P}discard/b") as sent:
        with pytest.raises(RuntimeError, match="receiver failed"):
            with support.solidq.transaction():
                support.solidq.perform_all_later(batch)

    assert [payload["key"] for payload in sent] == [f"{P}discard/a", f"{P}discard/b"]
    assert_nothing_stored(engine)


def test_a_bulk_failing_part_way_outside_a_transaction_keeps_what_was_admitted_before(app, engine):
    last_c, ordinary, first_a, _second_b = batch = _three_keys_and_an_ordinary_job()

    with coalesce_signals(fail_on_key=f"{P}discard/b"):
        with pytest.raises(RuntimeError, match="receiver failed"):
            support.solidq.perform_all_later(batch)

    # Admitted and committed before the failure: stored, with their outcomes.
    assert ordinary.provider_job_id is not None and ordinary.successfully_enqueued
    assert (first_a.coalesce_status, first_a.successfully_enqueued) == (CREATED, True)
    stored = {row.id: stored_arguments(row)[0] for row in support.rows(engine, JOBS)}
    assert stored[first_a.provider_job_id] == ("a",)
    # The call whose receiver failed had committed already; the failure doesn't undo it.
    assert ("b",) in stored.values()
    # After the failure: no outcome, nothing stored.
    assert (last_c.coalesce_status, last_c.provider_job_id) == (None, None)
    assert ("c",) not in stored.values()
    assert sorted(key_rows(engine)) == [f"{P}discard/a", f"{P}discard/b"]

    # The seed's recovery: enqueue again the calls that have no job id.
    support.solidq.perform_all_later([job for job in batch if not job.provider_job_id])
    assert last_c.coalesce_status is CREATED
    assert support.count(engine, JOBS) == 4


# -- 9. transactions ----------------------------------------------------------------------------


class Base(orm.DeclarativeBase):
    pass


class Note(Base):
    __tablename__ = "coalesce_admission_test_notes"

    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    number: orm.Mapped[str] = orm.mapped_column(sa.String(50))


def test_a_coalesced_enqueue_in_a_request_commits_and_rolls_back_with_the_apps_transaction(
    database_url,
):
    # An app of its own (see tests/storage/test_app_transaction.py): one session per request.
    app = support.create_app(database_url, PROPAGATE_EXCEPTIONS=False)
    with app.app_context():
        engine = app.extensions["solidq"].engine
    Base.metadata.create_all(engine)
    statuses: list[t.Any] = []

    @app.post("/notes/<number>/<outcome>")
    def add_note(number: str, outcome: str) -> str:
        support.db.session.add(Note(number=number))
        support.db.session.flush()
        statuses.append(jobs.collect.perform_later(number, outcome).coalesce_status)
        if outcome == "rollback":
            support.db.session.rollback()
        else:
            support.db.session.commit()
        return "ok"

    def stored() -> tuple[list[str], list[str], list[str], int]:
        with solidq_db.read(engine) as connection:
            return (
                list(connection.scalars(sa.select(Note.number))),
                list(connection.scalars(sa.select(JOBS.c.class_name))),
                list(connection.scalars(sa.select(KEYS.c.key))),
                int(connection.scalar(sa.select(sa.func.count()).select_from(CALLS)) or 0),
            )

    client = app.test_client()
    try:
        assert client.post("/notes/n1/rollback").status_code == 200
        assert stored() == ([], [], [], 0)

        assert client.post("/notes/n1/commit").status_code == 200
        assert stored() == (["n1"], [f"{P}collect"], [f"{P}collect/n1"], 1)
        assert client.post("/notes/n1/commit").status_code == 200
        assert stored()[1:] == ([f"{P}collect"], [f"{P}collect/n1"], 2)
        # The rolled-back call had created a job in its transaction: it reported so, and
        # the commits after it created the job again.
        assert statuses == [CREATED, CREATED, COLLECTED]
    finally:
        with engine.begin() as connection:
            connection.execute(Note.__table__.delete())
        support.delete_all_rows(engine)
        with app.app_context():
            app.extensions["solidq"].dispose()
            support.db.engines[None].dispose()


def test_a_queue_transaction_that_rolls_back_leaves_no_job_key_or_call(app, engine):
    with pytest.raises(RuntimeError, match="after enqueueing"):
        with support.solidq.transaction():
            jobs.collect.perform_later("t", 1)
            jobs.collect.perform_later("t", 2)
            jobs.discard.perform_later("t")
            raise RuntimeError("the block failed after enqueueing")

    assert_nothing_stored(engine)

    with support.solidq.transaction():
        committed = jobs.collect.perform_later("t", 3)
    assert committed.coalesce_status is CREATED
    assert key_rows(engine) == {f"{P}collect/t": (committed.provider_job_id, 1)}


# -- 10. recurring tasks ------------------------------------------------------------------------


def recurring_task(job: str) -> tasks.RecurringTask:
    settings = RecurringSettings(key="sync", job=f"{jobs.__name__}:{job}", schedule="every minute")
    return tasks.RecurringTask.from_settings(settings)


def test_a_discard_tasks_tick_that_finds_its_job_pending_adds_nothing_and_isnt_recorded(
    app, engine
):
    task = recurring_task("recurring_discard")
    next_tick = TICK + dt.timedelta(minutes=1)

    first = tasks.enqueue_tick(engine, task, TICK)
    suppressed = tasks.enqueue_tick(engine, task, next_tick)

    assert first is not None and first.coalesce_status is CREATED
    assert suppressed is None
    assert [row.id for row in support.rows(engine, JOBS)] == [first.provider_job_id]
    assert [(row.job_id, row.run_at) for row in support.rows(engine, EXECUTIONS)] == [
        (first.provider_job_id, TICK)
    ]

    # Once the job started, the key is free: the next tick enqueues and is recorded.
    run_all(app, engine)
    later = tasks.enqueue_tick(engine, task, next_tick + dt.timedelta(minutes=1))
    assert later is not None and later.coalesce_status is CREATED
    assert support.count(engine, EXECUTIONS) == 2


def test_a_recurring_task_refuses_a_collecting_job():
    # replace and debounce are refused in tests/recurring/test_recurring.py; collect wasn't checked.
    settings = RecurringSettings(
        key="collecting", job=f"{jobs.__name__}:recurring_collect", schedule="every minute"
    )
    with pytest.raises(ValueError, match="on_conflict='collect'"):
        tasks.load_all([settings])

"""``limits_concurrency`` in the database, on every backend, without worker processes: the
operations (enqueue, dispatch, claim, perform, finalize, release, maintenance) called
directly, then the state of jobs, executions and semaphores read back. Also enqueues racing
from threads and from processes, and `flask solidq status`."""

from __future__ import annotations

import contextlib
import datetime as dt
import multiprocessing
import threading
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import limits_concurrency
from flask_solidq.controls import concurrency
from flask_solidq.definitions import registry
from flask_solidq.operations import claim as claim_operation
from flask_solidq.operations import dispatch
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations import release
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.operations.outcomes import failure_json
from flask_solidq.storage import db as solidq_db
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import concurrency as concurrency_jobs
from tests.jobs.concurrency import DURATION
from tests.support import concurrency as concurrency_support
from tests.support import make_due
from tests.support import releases
from tests.support.concurrency import BLOCKED
from tests.support.concurrency import CLAIMED
from tests.support.concurrency import FAILED
from tests.support.concurrency import JOBS
from tests.support.concurrency import SCHEDULED
from tests.support.concurrency import SEMAPHORES
from tests.support.concurrency import blocked_ids
from tests.support.concurrency import job_state
from tests.support.concurrency import ready_ids
from tests.support.concurrency import semaphore

if t.TYPE_CHECKING:
    from flask import Flask

#: The process id the claims of these tests belong to (no process row needed).
PROCESS_ID = 4242

#: Slack for comparing a stored expiry with now + duration.
SLACK = dt.timedelta(milliseconds=10)

LIMITED = "concurrency_test.limited"


class Enqueued(t.NamedTuple):
    """An enqueued job and the id of its ``solidq_jobs`` row (None when none was kept)."""

    job: t.Any
    id: t.Any


def row_id(engine: sa.Engine, job: t.Any) -> int | None:
    """The id of the row holding ``job``, found by its job id (not ``provider_job_id``,
    which a blocked enqueue doesn't set: see the xfail'd test below)."""
    rows = support.rows(engine, JOBS, JOBS.c.active_job_id == job.job_id)
    return rows[-1].id if rows else None


def later(app: Flask, definition: t.Any, *args: t.Any, **options: t.Any) -> Enqueued:
    """Enqueue ``definition(*args)`` with ``set(**options)``."""
    with app.app_context():
        target = definition.set(**options) if options else definition
        job = target.perform_later(*args)
        return Enqueued(job, row_id(app.extensions["solidq"].engine, job))


def claim(engine: sa.Engine, limit: int = 1) -> list[claim_operation.ClaimedJob]:
    support.register_claimers(engine, [PROCESS_ID])
    return claim_operation.claim(engine, claim_operation.QueueSelector(("*",)), limit, PROCESS_ID)


def perform(app: Flask, claimed: t.Sequence[claim_operation.ClaimedJob]) -> list[t.Any]:
    with app.app_context():
        return [execute.perform(job) for job in claimed]


def finish(engine: sa.Engine, outcomes: list[t.Any]) -> list[t.Any]:
    return finalize.finalize_all(engine, PROCESS_ID, outcomes, preserve_finished=True)


def run_next(app: Flask, engine: sa.Engine) -> t.Any:
    """Claim the next ready job, perform it and store its outcome; return the outcome."""
    (claimed,) = claim(engine)
    (outcome,) = perform(app, [claimed])
    assert finish(engine, [outcome]) == [outcome]
    return outcome


def expire(engine: sa.Engine, table: sa.Table, where: t.Any) -> None:
    """Set ``expires_at`` of ``table``'s rows matching ``where`` one second into the past."""
    with engine.begin() as connection:
        connection.execute(
            table.update().where(where).values(expires_at=utcnow() - dt.timedelta(seconds=1))
        )


def around(moment: dt.datetime, earliest: dt.datetime, latest: dt.datetime) -> bool:
    return earliest - SLACK <= moment <= latest + SLACK


# Enqueue: a slot, blocking, discarding.


def test_a_due_job_with_a_free_slot_becomes_ready_and_takes_a_slot_for_its_duration(app, engine):
    before = utcnow()
    enqueued = later(app, concurrency_jobs.limited, "acct")
    after = utcnow()

    assert enqueued.job.successfully_enqueued is True
    assert enqueued.job.provider_job_id == enqueued.id
    assert ready_ids(engine) == [enqueued.id]
    assert blocked_ids(engine) == []
    (row,) = support.rows(engine, SEMAPHORES)
    assert row.key == f"{LIMITED}/acct"
    assert row.value == 0
    duration = dt.timedelta(seconds=DURATION)
    assert around(row.expires_at, before + duration, after + duration)
    (stored,) = support.rows(engine, JOBS)
    assert stored.concurrency_key == f"{LIMITED}/acct"


def test_the_next_job_of_a_taken_key_is_blocked_with_its_key_queue_priority_and_expiry(app, engine):
    first = later(app, concurrency_jobs.limited, "acct")
    before = utcnow()
    second = later(app, concurrency_jobs.limited, "acct", queue="other", priority=7)
    after = utcnow()

    assert second.id is not None
    assert ready_ids(engine) == [first.id]
    (blocked,) = support.rows(engine, BLOCKED)
    assert blocked.job_id == second.id
    assert blocked.concurrency_key == f"{LIMITED}/acct"
    assert blocked.queue_name == "other"
    assert blocked.priority == 7
    duration = dt.timedelta(seconds=DURATION)
    assert around(blocked.expires_at, before + duration, after + duration)
    assert semaphore(engine, f"{LIMITED}/acct").value == 0


def test_a_taken_key_does_not_hold_back_jobs_of_another_key(app, engine):
    first = later(app, concurrency_jobs.limited, "a")
    other = later(app, concurrency_jobs.limited, "b")
    free = later(app, concurrency_jobs.unlimited, "x")

    assert ready_ids(engine) == [first.id, other.id, free.id]
    assert concurrency_support.semaphore_values(engine) == {f"{LIMITED}/a": 0, f"{LIMITED}/b": 0}
    assert support.rows(engine, JOBS)[2].concurrency_key is None


def test_a_limit_of_two_lets_two_jobs_of_a_key_through_and_blocks_the_third(app, engine):
    key = "concurrency_test.limited_two/acct"
    first = later(app, concurrency_jobs.limited_two, "acct")
    assert semaphore(engine, key).value == 1
    second = later(app, concurrency_jobs.limited_two, "acct")
    assert semaphore(engine, key).value == 0
    third = later(app, concurrency_jobs.limited_two, "acct")

    assert ready_ids(engine) == [first.id, second.id]
    assert blocked_ids(engine) == [third.id]
    assert semaphore(engine, key).value == 0


def test_discard_destroys_the_extra_job_in_its_enqueue_and_fails_nothing(app, engine):
    kept = later(app, concurrency_jobs.discarded, "acct")
    dropped = later(app, concurrency_jobs.discarded, "acct")

    assert kept.job.successfully_enqueued is True
    assert dropped.job.successfully_enqueued is False
    assert dropped.id is None
    assert [row.id for row in support.rows(engine, JOBS)] == [kept.id]
    assert ready_ids(engine) == [kept.id]
    assert support.count(engine, BLOCKED) == 0
    assert support.count(engine, FAILED) == 0
    assert semaphore(engine, "concurrency_test.discarded/acct").value == 0


def _mixed_batch(prefix: str) -> list[t.Any]:
    """Jobs of several keys, limits and kinds, in an order that interleaves the keys."""
    jobs = concurrency_jobs
    return [
        jobs.limited.new(f"{prefix}-a"),
        jobs.limited.new(f"{prefix}-b"),
        jobs.limited.new(f"{prefix}-a"),
        jobs.unlimited.new(prefix),
        jobs.limited_two.new(f"{prefix}-c"),
        jobs.discarded.new(f"{prefix}-d"),
        jobs.limited_two.new(f"{prefix}-c"),
        jobs.discarded.new(f"{prefix}-d"),
        jobs.limited.new(f"{prefix}-b").set(priority=3),
        jobs.limited_two.new(f"{prefix}-c"),
        jobs.limited.new(f"{prefix}-a").set(wait=60),
    ]


def _states(engine: sa.Engine, jobs: list[t.Any]) -> list[str]:
    return [
        job_state(engine, row_id(engine, job)) if row_id(engine, job) else "gone" for job in jobs
    ]


def _values(engine: sa.Engine, prefix: str) -> dict[str, int]:
    return {
        key.replace(f"/{prefix}-", "/"): value
        for key, value in concurrency_support.semaphore_values(engine).items()
        if f"/{prefix}-" in key
    }


def test_perform_all_later_over_several_keys_ends_as_enqueuing_one_by_one_does(app, engine):
    one_by_one = _mixed_batch("single")
    with app.app_context():
        for job in one_by_one:
            job.perform_later()
    bulk = _mixed_batch("bulk")
    with app.app_context():
        support.solidq.perform_all_later(bulk)

    expected = [
        "ready",
        "ready",
        "blocked",
        "ready",
        "ready",
        "ready",
        "ready",
        "gone",
        "blocked",
        "blocked",
        "scheduled",
    ]
    assert _states(engine, one_by_one) == expected
    assert _states(engine, bulk) == expected
    values = {
        "concurrency_test.limited/a": 0,
        "concurrency_test.limited/b": 0,
        "concurrency_test.limited_two/c": 0,
        "concurrency_test.discarded/d": 0,
    }
    assert _values(engine, "single") == values
    assert _values(engine, "bulk") == values
    assert [job.successfully_enqueued for job in bulk] == [
        job.successfully_enqueued for job in one_by_one
    ]
    for job, state in zip(bulk + one_by_one, expected * 2, strict=True):
        if state in ("ready", "scheduled"):
            assert job.successfully_enqueued is True
            assert job.provider_job_id == row_id(engine, job)
        if state == "gone":
            assert (job.successfully_enqueued, job.provider_job_id) == (False, None)
    assert support.count(engine, FAILED) == 0
    # Each blocked job waits on its own key.
    keys = {row.job_id: row.concurrency_key for row in support.rows(engine, BLOCKED)}
    assert keys == {
        row_id(engine, job): type(job).concurrency_key_for(*job.arguments)
        for job, state in zip(bulk + one_by_one, expected * 2, strict=True)
        if state == "blocked"
    }


def test_a_blocked_job_is_reported_enqueued_with_its_row_id_alone_and_in_bulk(app, engine):
    later(app, concurrency_jobs.limited, "acct")
    blocked = later(app, concurrency_jobs.limited, "acct")
    bulk = [concurrency_jobs.limited.new("acct"), concurrency_jobs.limited.new("other")]
    with app.app_context():
        support.solidq.perform_all_later(bulk)

    assert job_state(engine, blocked.id) == "blocked"
    assert job_state(engine, row_id(engine, bulk[0])) == "blocked"
    assert (blocked.job.successfully_enqueued, blocked.job.provider_job_id) == (True, blocked.id)
    assert (bulk[0].successfully_enqueued, bulk[0].provider_job_id) == (
        True,
        row_id(engine, bulk[0]),
    )


# Scheduled jobs: the limit applies when they come due.


def test_a_scheduled_job_of_a_taken_key_is_blocked_when_it_comes_due_not_at_enqueue(app, engine):
    running = later(app, concurrency_jobs.limited, "acct")
    scheduled = later(app, concurrency_jobs.limited, "acct", wait=60)
    dropped = later(app, concurrency_jobs.discarded, "acct")
    assert later(app, concurrency_jobs.discarded, "acct").job.successfully_enqueued is False
    dropped_later = later(app, concurrency_jobs.discarded, "acct", wait=60)
    free_later = later(app, concurrency_jobs.limited, "free", wait=60)

    assert scheduled.job.successfully_enqueued is True
    assert dropped_later.job.successfully_enqueued is True
    assert {row.job_id for row in support.rows(engine, SCHEDULED)} == {
        scheduled.id,
        dropped_later.id,
        free_later.id,
    }
    assert support.count(engine, BLOCKED) == 0
    assert semaphore(engine, f"{LIMITED}/free") is None

    make_due(engine, scheduled.id, dropped_later.id)
    with app.app_context():
        assert dispatch.dispatch_due(engine, 500) == 2

    assert blocked_ids(engine) == [scheduled.id]
    assert job_state(engine, dropped_later.id) == "gone"
    assert ready_ids(engine) == [running.id, dropped.id]
    assert [row.job_id for row in support.rows(engine, SCHEDULED)] == [free_later.id]

    make_due(engine, free_later.id)
    with app.app_context():
        assert dispatch.dispatch_due(engine, 500) == 1
    assert job_state(engine, free_later.id) == "ready"
    assert semaphore(engine, f"{LIMITED}/free").value == 0
    assert support.count(engine, FAILED) == 0


# Finishing: the slot goes back, and one blocked job of the key takes it.


def test_finishing_a_job_releases_exactly_one_blocked_job_of_its_key_by_priority_then_age(
    app, engine
):
    key = f"{LIMITED}/acct"
    first = later(app, concurrency_jobs.limited, "acct")
    low = later(app, concurrency_jobs.limited, "acct", priority=5)
    older = later(app, concurrency_jobs.limited, "acct", priority=1)
    newer = later(app, concurrency_jobs.limited, "acct", priority=1)
    # Another key, last in claim order, whose blocked job nobody releases.
    other = later(app, concurrency_jobs.limited, "other", priority=9)
    other_blocked = later(app, concurrency_jobs.limited, "other")
    assert blocked_ids(engine) == sorted(job.id for job in (low, older, newer, other_blocked))

    order = []
    for expected in (older, newer, low):
        ready = [job_id for job_id in ready_ids(engine) if job_id != other.id]
        with releases() as sent:
            outcome = run_next(app, engine)
        assert outcome.kind is OutcomeKind.FINISHED
        assert outcome.claimed.id == ready[0]
        assert sent == [{"job_id": expected.id, "concurrency_key": key, "released": True}]
        assert expected.id in ready_ids(engine)
        assert semaphore(engine, key).value == 0
        order.append(expected.id)
        if expected is older:
            assert sorted(blocked_ids(engine)) == sorted([newer.id, low.id, other_blocked.id])

    assert order == [older.id, newer.id, low.id]
    # The last one gives its slot back with nothing left to release.
    with releases() as sent:
        run_next(app, engine)
    assert sent == []
    assert semaphore(engine, key).value == 1
    # The other key was never touched.
    assert ready_ids(engine) == [other.id]
    assert blocked_ids(engine) == [other_blocked.id]
    assert semaphore(engine, f"{LIMITED}/other").value == 0
    finished = {row.id for row in support.rows(engine, JOBS, JOBS.c.finished_at.is_not(None))}
    assert finished == {job.id for job in (first, low, older, newer)}


def test_a_slot_given_back_goes_to_the_blocked_job_not_to_an_enqueue_that_comes_in_between(
    app, engine
):
    key = f"{LIMITED}/acct"
    later(app, concurrency_jobs.limited, "acct")
    waiting = later(app, concurrency_jobs.limited, "acct")
    outcomes = perform(app, claim(engine))
    newcomer: list[Enqueued] = []
    busy = threading.Lock()

    # Another request enqueues the moment a transaction of the finish hook ends with the slot
    # free (every transaction ends by returning its connection to the pool).
    def enqueue_when_the_slot_is_free(*_: t.Any) -> None:
        if newcomer or not busy.acquire(blocking=False):
            return
        try:
            if semaphore(engine, key).value == 1:
                newcomer.append(later(app, concurrency_jobs.limited, "acct"))
        finally:
            busy.release()

    sa.event.listen(engine.pool, "checkin", enqueue_when_the_slot_is_free)
    try:
        with releases() as sent:
            finish(engine, outcomes)
    finally:
        sa.event.remove(engine.pool, "checkin", enqueue_when_the_slot_is_free)

    if not newcomer:  # the slot was never free between transactions: the enqueue comes after
        newcomer.append(later(app, concurrency_jobs.limited, "acct"))
    assert sent == [{"job_id": waiting.id, "concurrency_key": key, "released": True}]
    assert ready_ids(engine) == [waiting.id]
    assert blocked_ids(engine) == [newcomer[0].id]


def test_a_failed_job_gives_its_slot_back_to_the_next_blocked_job(app, engine):
    key = "concurrency_test.failing/acct"
    failed = later(app, concurrency_jobs.failing, "acct")
    waiting = later(app, concurrency_jobs.failing, "acct")

    with releases() as sent:
        outcome = run_next(app, engine)

    assert outcome.kind is OutcomeKind.FAILED
    assert [row.job_id for row in support.rows(engine, FAILED)] == [failed.id]
    assert sent == [{"job_id": waiting.id, "concurrency_key": key, "released": True}]
    assert ready_ids(engine) == [waiting.id]
    assert blocked_ids(engine) == []
    assert semaphore(engine, key).value == 0


def test_a_retry_due_at_once_keeps_its_slot_and_stays_ahead_of_the_waiting_job(app, engine):
    key = "concurrency_test.retried/acct"
    retried = later(app, concurrency_jobs.retried, "acct")
    waiting = later(app, concurrency_jobs.retried, "acct", "second")

    with releases() as sent:
        outcome = run_next(app, engine)

    assert outcome.kind is OutcomeKind.RETRIED
    # A retry due at once is the same job going on: it keeps the slot it holds (nothing is
    # released), so it stays ahead of the job that waited.
    assert sent == []
    assert ready_ids(engine) == [retried.id]
    assert blocked_ids(engine) == [waiting.id]
    assert semaphore(engine, key).value == 0
    assert support.count(engine, FAILED) == 0

    # The second attempt fails for good, and the waiting job gets the slot.
    outcome = run_next(app, engine)
    assert outcome.kind is OutcomeKind.FAILED
    assert outcome.claimed.id == retried.id
    assert ready_ids(engine) == [waiting.id]
    assert blocked_ids(engine) == []
    assert semaphore(engine, key).value == 0


def test_a_retried_job_alone_on_its_key_runs_again_instead_of_waiting_on_its_own_slot(app, engine):
    key = "concurrency_test.retried/solo"
    job = later(app, concurrency_jobs.retried, "solo")

    assert run_next(app, engine).kind is OutcomeKind.RETRIED

    assert ready_ids(engine) == [job.id]
    assert blocked_ids(engine) == []
    assert semaphore(engine, key).value == 0
    assert run_next(app, engine).kind is OutcomeKind.FAILED
    assert semaphore(engine, key).value == 1
    assert ready_ids(engine) == []


def test_a_discard_limited_job_that_retries_at_once_is_not_discarded_by_its_own_slot(app, engine):
    key = "concurrency_test.retried_or_discarded/acct"
    job = later(app, concurrency_jobs.retried_or_discarded, "acct")

    outcome = run_next(app, engine)

    assert outcome.kind is OutcomeKind.RETRIED
    # Nothing else holds the key: the retry must run again, not vanish.
    assert job_state(engine, job.id) == "ready"
    assert semaphore(engine, key).value == 0


def test_claims_released_on_graceful_shutdown_keep_their_slot(app, engine):
    key = f"{LIMITED}/acct"
    first = later(app, concurrency_jobs.limited, "acct")
    waiting = later(app, concurrency_jobs.limited, "acct")
    (claimed,) = claim(engine)
    held = semaphore(engine, key)

    with releases() as sent:
        assert release.release_all(engine, [PROCESS_ID]) == 1

    assert sent == []
    assert ready_ids(engine) == [first.id]
    assert blocked_ids(engine) == [waiting.id]
    assert support.count(engine, CLAIMED) == 0
    assert held.value == 0
    assert semaphore(engine, key) == held

    # Run again, it gives the slot back once, to the waiting job.
    assert run_next(app, engine).claimed.id == first.id
    assert ready_ids(engine) == [waiting.id]
    assert semaphore(engine, key).value == 0
    run_next(app, engine)
    assert semaphore(engine, key).value == 1


def test_a_late_finish_whose_claim_is_gone_gives_nothing_back(app, engine):
    key = f"{LIMITED}/acct"
    first = later(app, concurrency_jobs.limited, "acct")
    waiting = later(app, concurrency_jobs.limited, "acct")
    claimed = claim(engine)
    outcomes = perform(app, claimed)
    with engine.begin() as connection:
        connection.execute(CLAIMED.delete())

    with releases() as sent:
        assert finish(engine, outcomes) == []

    assert sent == []
    assert semaphore(engine, key).value == 0
    assert blocked_ids(engine) == [waiting.id]
    assert ready_ids(engine) == []
    assert support.rows(engine, JOBS, JOBS.c.id == first.id)[0].finished_at is None


def test_a_job_whose_claim_was_failed_for_a_dead_worker_gives_its_slot_back_once(app, engine):
    key = f"{LIMITED}/acct"
    first = later(app, concurrency_jobs.limited, "acct")
    second = later(app, concurrency_jobs.limited, "acct")
    third = later(app, concurrency_jobs.limited, "acct")
    claimed = claim(engine)
    outcomes = perform(app, claimed)

    with releases() as sent:
        assert release.fail_all(engine, [PROCESS_ID], failure_json("Dead", "gone")) == 1
        # The worker comes back to finish what it ran: its claim is no longer its own.
        assert finish(engine, outcomes) == []

    assert sent == [{"job_id": second.id, "concurrency_key": key, "released": True}]
    assert [row.job_id for row in support.rows(engine, FAILED)] == [first.id]
    assert ready_ids(engine) == [second.id]
    assert blocked_ids(engine) == [third.id]
    assert semaphore(engine, key).value == 0


# Maintenance: expired semaphores, and the blocked jobs their dead holders left.


def test_maintenance_deletes_expired_semaphores_and_releases_a_blocked_job_of_their_keys(
    app, engine
):
    stale, live = f"{LIMITED}/stale", f"{LIMITED}/live"
    stale_holder = later(app, concurrency_jobs.limited, "stale")
    stale_first = later(app, concurrency_jobs.limited, "stale")
    stale_second = later(app, concurrency_jobs.limited, "stale")
    live_holder = later(app, concurrency_jobs.limited, "live")
    live_waiting = later(app, concurrency_jobs.limited, "live")
    expire(engine, SEMAPHORES, SEMAPHORES.c.key == stale)
    expire(engine, BLOCKED, BLOCKED.c.concurrency_key.in_([stale, live]))
    live_semaphore = semaphore(engine, live)

    before = utcnow()
    with releases() as sent:
        concurrency.maintain(engine, 500)
    after = utcnow()

    # The stale key's semaphore was deleted and taken again, by one blocked job.
    assert sent == [{"job_id": stale_first.id, "concurrency_key": stale, "released": True}]
    assert ready_ids(engine) == [
        stale_holder.id,
        stale_first.id,
        live_holder.id,
    ]
    assert blocked_ids(engine) == [stale_second.id, live_waiting.id]
    renewed = semaphore(engine, stale)
    assert renewed.value == 0
    duration = dt.timedelta(seconds=DURATION)
    assert around(renewed.expires_at, before + duration, after + duration)
    # The live, full semaphore is left alone, and its blocked job waits on.
    assert semaphore(engine, live) == live_semaphore


def test_maintenance_releases_nothing_while_blocked_jobs_have_not_expired(app, engine):
    later(app, concurrency_jobs.limited, "acct")
    waiting = later(app, concurrency_jobs.limited, "acct")
    expire(engine, SEMAPHORES, SEMAPHORES.c.key == f"{LIMITED}/acct")

    with releases() as sent:
        concurrency.maintain(engine, 500)

    assert sent == []
    assert support.count(engine, SEMAPHORES) == 0
    assert blocked_ids(engine) == [waiting.id]


# Keys and definitions.


def test_the_key_is_computed_once_at_enqueue_and_stored_with_the_job(app, engine):
    concurrency_jobs.KEY_CALLS.clear()
    now = later(app, concurrency_jobs.counted_key, "k1")
    scheduled = later(app, concurrency_jobs.counted_key, "k2", wait=60)
    assert concurrency_jobs.KEY_CALLS == [("k1",), ("k2",)]

    make_due(engine, scheduled.id)
    with app.app_context():
        dispatch.dispatch_due(engine, 500)
    run_next(app, engine)
    run_next(app, engine)

    assert concurrency_jobs.KEY_CALLS == [("k1",), ("k2",)]
    stored = {row.id: row.concurrency_key for row in support.rows(engine, JOBS)}
    assert stored == {
        now.id: "concurrency_test.counted_key/k1",
        scheduled.id: "concurrency_test.counted_key/k2",
    }
    assert concurrency_support.semaphore_values(engine) == {
        "concurrency_test.counted_key/k1": 1,
        "concurrency_test.counted_key/k2": 1,
    }


def test_a_job_whose_definition_cannot_be_loaded_at_dispatch_is_not_limited(app, engine):
    @support.solidq.job(name="concurrency_test.vanishing")
    @limits_concurrency(key="only", to=1, duration=DURATION)
    def vanishing() -> None: ...

    try:
        holder = later(app, vanishing)
        waiting = later(app, vanishing)
        scheduled = later(app, vanishing, wait=60)
        assert blocked_ids(engine) == [waiting.id]
    finally:
        # Defined inside a function: once forgotten, nothing can load it by its import path.
        registry.unregister(vanishing)

    make_due(engine, scheduled.id)
    with app.app_context():
        assert dispatch.dispatch_due(engine, 500) == 1

    assert ready_ids(engine) == [holder.id, scheduled.id]
    assert blocked_ids(engine) == [waiting.id]
    assert semaphore(engine, "concurrency_test.vanishing/only").value == 0


def test_a_group_shares_one_semaphore_between_two_definitions(app, engine):
    key = f"{concurrency_jobs.ACCOUNT_WRITES}/1"
    imports = later(app, concurrency_jobs.import_orders, 1)
    recalc = later(app, concurrency_jobs.recalculate_balance, 1)
    other_account = later(app, concurrency_jobs.recalculate_balance, 2)

    assert concurrency_jobs.recalculate_balance.concurrency_key_for(1) == key
    assert ready_ids(engine) == [imports.id, other_account.id]
    (blocked,) = support.rows(engine, BLOCKED)
    assert (blocked.job_id, blocked.concurrency_key) == (recalc.id, key)
    assert concurrency_support.semaphore_values(engine) == {
        key: 0,
        f"{concurrency_jobs.ACCOUNT_WRITES}/2": 0,
    }

    # The import finishing hands the shared slot to the other definition's job.
    with releases() as sent:
        outcome = run_next(app, engine)
    assert outcome.claimed.id == imports.id
    assert sent == [{"job_id": recalc.id, "concurrency_key": key, "released": True}]
    assert semaphore(engine, key).value == 0


# Enqueues racing each other.

RACE_KEYS = ["race-a", "race-b", "race-c"]


def assert_one_ready_per_key_and_the_rest_blocked(engine: sa.Engine, per_key: int) -> None:
    states = concurrency_support.states_by_key(engine)
    assert states == {
        f"{LIMITED}/{key}": {"ready": 1, "blocked": per_key - 1, "scheduled": 0, "claimed": 0}
        for key in RACE_KEYS
    }
    assert concurrency_support.semaphore_values(engine) == {
        f"{LIMITED}/{key}": 0 for key in RACE_KEYS
    }
    assert support.count(engine, JOBS) == per_key * len(RACE_KEYS)
    assert support.count(engine, FAILED) == 0


def test_threads_enqueuing_the_same_keys_at_once_leave_one_ready_job_per_key(app, engine):
    threads_count, each = 6, 9
    start = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def enqueue(index: int) -> None:
        try:
            with app.app_context():
                start.wait(10)
                for number in range(each):
                    key = RACE_KEYS[(index + number) % len(RACE_KEYS)]
                    concurrency_jobs.limited.perform_later(key, index)
                # Several keys in one transaction, in an order of this thread's own.
                rotated = RACE_KEYS[index % 3 :] + RACE_KEYS[: index % 3]
                if index % 2:
                    rotated.reverse()
                support.solidq.perform_all_later(
                    [concurrency_jobs.limited.new(key, index) for key in rotated]
                )
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [threading.Thread(target=enqueue, args=(index,)) for index in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "an enqueuing thread hung"

    assert errors == []
    per_key = threads_count * each // len(RACE_KEYS) + threads_count
    assert_one_ready_per_key_and_the_rest_blocked(engine, per_key)


@pytest.mark.processes
def test_processes_enqueuing_the_same_keys_at_once_leave_one_ready_job_per_key(
    app, engine, database_url
):
    processes_count, each = 4, 12
    # Forked: the children start at once, with everything imported; each builds its own app.
    context = multiprocessing.get_context("fork")
    go, results = context.Event(), context.SimpleQueue()
    children = [
        context.Process(
            target=concurrency_support.enqueue_in_child,
            args=(database_url, RACE_KEYS, each, go, results),
        )
        for _ in range(processes_count)
    ]
    try:
        for child in children:
            child.start()
        go.set()
        for child in children:
            child.join(60)
        assert not any(child.is_alive() for child in children), "an enqueuing process hung"
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(10)

    reports = [results.get() for _ in children]
    assert reports == ["done"] * processes_count, "\n".join(reports)
    assert [child.exitcode for child in children] == [0] * processes_count
    per_key = processes_count * each // len(RACE_KEYS) + processes_count
    assert_one_ready_per_key_and_the_rest_blocked(engine, per_key)


def test_bulk_enqueues_whose_keys_fall_in_opposite_order_across_insert_batches_never_deadlock(
    request, app, engine, database_url
):
    # A limited job first and last, with a whole insert batch of unlimited jobs between.
    fillers = solidq_db.INSERT_BATCH_SIZE - 1
    batches = [
        [
            concurrency_jobs.limited.new(first),
            *(concurrency_jobs.unlimited.new(index) for index in range(fillers)),
            concurrency_jobs.limited.new(last),
        ]
        for first, last in (("order-a", "order-b"), ("order-b", "order-a"))
    ]

    mysql = sa.make_url(database_url).get_backend_name() in ("mysql", "mariadb")
    with contextlib.ExitStack() as stack:
        if mysql:  # Where the deadlock was, make the race certain rather than likely.
            stack.enter_context(second_locks_wait_for_first_locks(engine, database_url))
        errors = bulk_race(app, batches)

    assert errors == []
    states = concurrency_support.states_by_key(engine)
    assert {key: states[key]["ready"] for key in states if key} == {
        f"{LIMITED}/order-a": 1,
        f"{LIMITED}/order-b": 1,
    }


@contextlib.contextmanager
def second_locks_wait_for_first_locks(engine: sa.Engine, database_url: str) -> t.Iterator[None]:
    """Hold each :func:`bulk_race` thread before it locks its second semaphore until the other
    thread has locked its first one, or is waiting for a lock in this database (when the two
    lock in the same order, the other waits for this one's first lock). Polls; gives up after
    10 seconds."""
    locked_first: set[int] = set()
    counts: dict[int, int] = {}
    observer = sa.create_engine(database_url)
    lock_waits = sa.text(
        "SELECT COUNT(*) FROM information_schema.innodb_trx AS trx"
        " JOIN information_schema.processlist AS list ON list.id = trx.trx_mysql_thread_id"
        " WHERE trx.trx_state = 'LOCK WAIT' AND list.db = DATABASE()"
    )

    def is_semaphore_lock(statement: str) -> bool:
        racing = threading.current_thread().name.startswith("bulk-race")
        return racing and "FROM solidq_semaphores" in statement and "FOR UPDATE" in statement

    def before(conn: t.Any, cursor: t.Any, statement: str, *_: t.Any) -> None:
        if not is_semaphore_lock(statement):
            return
        me = threading.get_ident()
        counts[me] = counts.get(me, 0) + 1
        if counts[me] != 2:
            return
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not locked_first - {me}:
            with observer.connect() as connection:
                if connection.scalar(lock_waits):
                    return
            time.sleep(0.01)

    def after(conn: t.Any, cursor: t.Any, statement: str, *_: t.Any) -> None:
        if is_semaphore_lock(statement):
            locked_first.add(threading.get_ident())

    sa.event.listen(engine, "before_cursor_execute", before)
    sa.event.listen(engine, "after_cursor_execute", after)
    try:
        yield
    finally:
        sa.event.remove(engine, "before_cursor_execute", before)
        sa.event.remove(engine, "after_cursor_execute", after)
        observer.dispose()


def bulk_race(app: Flask, batches: list[list[t.Any]]) -> list[BaseException]:
    """``perform_all_later`` of each batch, in threads of their own (named ``bulk-race-N``)
    started together; return what they raised."""
    start = threading.Barrier(len(batches))
    errors: list[BaseException] = []

    def enqueue(jobs: list[t.Any]) -> None:
        try:
            with app.app_context():
                start.wait(10)
                support.solidq.perform_all_later(jobs)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [
        threading.Thread(target=enqueue, args=(jobs,), name=f"bulk-race-{index}")
        for index, jobs in enumerate(batches)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "an enqueuing thread hung"
    return errors


# `flask solidq status`.


def test_status_lists_blocked_jobs_per_key_and_the_semaphores_with_their_free_slots(app, engine):
    for _ in range(3):
        later(app, concurrency_jobs.limited, "a")
    for _ in range(2):
        later(app, concurrency_jobs.limited, "b")
    later(app, concurrency_jobs.limited_two, "c")

    result = app.test_cli_runner().invoke(args=["solidq", "status"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    blocked_at = lines.index("Blocked jobs")
    assert lines[blocked_at + 1].split() == ["CONCURRENCY", "KEY", "BLOCKED", "JOBS"]
    assert [line.split() for line in lines[blocked_at + 2 : blocked_at + 4]] == [
        [f"{LIMITED}/a", "2"],
        [f"{LIMITED}/b", "1"],
    ]
    semaphores_at = lines.index("Semaphores")
    assert lines[semaphores_at + 1].split() == ["KEY", "FREE", "SLOTS", "LEASE"]
    rows = [line.split() for line in lines[semaphores_at + 2 : semaphores_at + 5]]
    assert [row[:2] for row in rows] == [
        [f"{LIMITED}/a", "0"],
        [f"{LIMITED}/b", "0"],
        ["concurrency_test.limited_two/c", "1"],
    ]
    assert all(row[2] == "in" for row in rows)
    assert "BLOCKED" in lines[1]
    default = [line.split() for line in lines if line.split()[:1] == ["default"]]
    assert default[0][1:6] == [
        "3",
        "0",
        "0",
        "0",
        "3",
    ]  # ready, scheduled, deferred, claimed, blocked


def test_a_limit_declared_after_a_definition_enqueued_plain_jobs_applies_to_the_next(app, engine):
    # A single enqueue skips the controls for a definition none concerns, an answer kept per
    # declarations object: a decorator applied later gives the class a new one.
    @support.solidq.job(name="concurrency_test.limited_later")
    def limited_later() -> None: ...

    try:
        plain = [later(app, limited_later) for _ in range(2)]
        limits_concurrency(key="only", to=1, duration=DURATION)(limited_later)
        holder = later(app, limited_later)
        waiting = later(app, limited_later)
    finally:
        registry.unregister(limited_later)

    assert ready_ids(engine) == [plain[0].id, plain[1].id, holder.id]
    assert blocked_ids(engine) == [waiting.id]
    assert semaphore(engine, "concurrency_test.limited_later/only").value == 0

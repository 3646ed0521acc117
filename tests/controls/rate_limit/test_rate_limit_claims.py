"""``limits_rate`` in the database, on every backend, without worker processes: jobs enqueued,
then claimed with :func:`flask_solidq.operations.claim.claim_batch` directly, and the state of
jobs, executions and budgets (``solidq_rate_limits``) read back.

The exact times are checked: a claim's clock is the ``updated_at`` it writes on the budgets
it locked, so each slot is known to the microsecond. The jobs are in
:mod:`tests.jobs.rate_limit`; most have a limit of one claim a minute.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
import threading
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq import signals
from flask_solidq.controls import rate_limit
from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit.gcra import MAX_AHEAD
from flask_solidq.definitions import registry
from flask_solidq.logging import subscriber as log_subscriber
from flask_solidq.operations import claim
from flask_solidq.operations import dispatch
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations import release
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import rate_limit as rate_limit_jobs
from tests.operations.test_claim_queries import CLAIM_STATEMENTS
from tests.operations.test_claim_queries import counting_statements
from tests.support import make_due
from tests.support import releases
from tests.support.concurrency import BLOCKED
from tests.support.concurrency import CLAIMED
from tests.support.concurrency import JOBS
from tests.support.concurrency import READY
from tests.support.concurrency import SCHEDULED
from tests.support.concurrency import SEMAPHORES
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask

BUDGETS = t.cast(sa.Table, models.RateLimitBudget.__table__)

#: The process id the claims of these tests belong to (no process row needed).
PROCESS_ID = 4343
#: Registered by conftest's ``claimers``: a claim only takes jobs for a registered process.
CLAIMERS = (PROCESS_ID,)

EVERY_QUEUE = claim.QueueSelector(("*",))

MINUTE = dt.timedelta(minutes=1)

#: The interval of ``rate_test.staggered``: 10 s / (10 - 2 + 1), rounded up.
STAGGERED = dt.timedelta(microseconds=1_111_112)

GLOBAL = "rate_test.global/global"


# -- helpers ---------------------------------------------------------------------------------


def row_id(engine: sa.Engine, job: t.Any) -> int:
    """The id of the row holding ``job``, found by its job id."""
    (row,) = support.rows(engine, JOBS, JOBS.c.active_job_id == job.job_id)
    return int(row.id)


def later(app: Flask, definition: t.Any, *args: t.Any, **options: t.Any) -> int:
    """Enqueue ``definition(*args)`` with ``set(**options)``; return its row's id."""
    with app.app_context():
        target = definition.set(**options) if options else definition
        job = target.perform_later(*args)
        return row_id(app.extensions["solidq"].engine, job)


def many(app: Flask, definition: t.Any, count: int, *args: t.Any) -> list[int]:
    return [later(app, definition, *args, index) for index in range(count)]


def claim_batch(engine: sa.Engine, limit: int = 20, **kwargs: t.Any) -> claim.ClaimBatch:
    return claim.claim_batch(engine, EVERY_QUEUE, limit, PROCESS_ID, **kwargs)


def claimed_ids(batch: claim.ClaimBatch) -> list[int]:
    return [job.id for job in batch.jobs]


def deferred_ids(batch: claim.ClaimBatch) -> list[int]:
    return [deferral.job.id for deferral in batch.deferrals]


def budget(engine: sa.Engine, key: str) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, BUDGETS, BUDGETS.c.key == key)
    return row


def budget_keys(engine: sa.Engine) -> list[str]:
    return sorted(row.key for row in support.rows(engine, BUDGETS))


def claim_clock(engine: sa.Engine, key: str) -> dt.datetime:
    """The clock of the last claim that locked ``key``'s budget (it writes ``updated_at``)."""
    return t.cast(dt.datetime, budget(engine, key).updated_at)


def scheduled_at(engine: sa.Engine, job_id: int) -> dt.datetime:
    (row,) = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id == job_id)
    return t.cast(dt.datetime, row.scheduled_at)


def job_row(engine: sa.Engine, job_id: int) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return row


def update_jobs(engine: sa.Engine, job_ids: t.Iterable[int], **values: t.Any) -> None:
    with engine.begin() as connection:
        connection.execute(JOBS.update().where(JOBS.c.id.in_(list(job_ids))).values(**values))


def deferral_signals() -> t.ContextManager[list[tuple[t.Any, dict[str, t.Any]]]]:
    """Collect (sender, payload) of the ``defer_rate_limited`` signals sent in the block."""
    return support.signals_sent(signals.defer_rate_limited)


# -- admit or defer --------------------------------------------------------------------------


def test_a_budget_admits_its_first_job_and_defers_the_next_to_its_slot(app, engine):
    first, second = many(app, rate_limit_jobs.global_job, 2)
    enqueued_at = job_row(engine, second).scheduled_at

    batch = claim_batch(engine)

    now = claim_clock(engine, GLOBAL)
    assert claimed_ids(batch) == [first]
    (deferral,) = batch.deferrals
    assert (deferral.job.id, deferral.key, deferral.until) == (second, GLOBAL, now + MINUTE)
    assert job_state(engine, first) == "claimed"
    assert job_state(engine, second) == "scheduled"
    assert scheduled_at(engine, second) == now + MINUTE
    # Only the scheduled execution carries the next check: the job keeps its own time.
    assert job_row(engine, second).scheduled_at == enqueued_at
    assert support.count(engine, READY) == 0


def _due_in_a_moment(engine: sa.Engine, key: str) -> dt.datetime:
    """Make budget ``key`` admit its next claim :data:`SOON` from now; return that moment."""
    moment = utcnow() + SOON
    with engine.begin() as connection:
        connection.execute(
            BUDGETS.update().where(BUDGETS.c.key == key).values(tat=moment, last_slot_at=None)
        )
    return moment


#: How far ahead of the clock the tests below put a budget's next admission: inside
#: the 250 ms a limit of one a minute is charged ahead, with the claim's round trips to spare.
SOON = dt.timedelta(milliseconds=45)


@pytest.mark.parametrize("charge_ahead", [True, False])
def test_a_claim_a_moment_before_the_admission_is_charged_for_it_only_if_its_worker_waits(
    app, engine, charge_ahead
):
    """A worker's claim (``charge_ahead``) that reaches a budget within ``charge_ahead`` of its
    next admission is admitted for that moment: its claim stamped with it, the budget charged
    from it, and the moment handed back for the worker to start the job at. Any other claim
    sends the job to wait for that moment as a slot. A claim that a slow machine made after
    the moment is admitted plainly: the test tries again (at most 5 times)."""
    (first,) = many(app, rate_limit_jobs.global_job, 1)
    assert claimed_ids(claim_batch(engine)) == [first]
    for _attempt in range(5):
        (job_id,) = many(app, rate_limit_jobs.global_job, 1)
        moment = _due_in_a_moment(engine, GLOBAL)
        batch = claim_batch(engine, charge_ahead=charge_ahead)
        if claim_clock(engine, GLOBAL) >= moment:
            assert claimed_ids(batch) == [job_id]  # the moment had come: admitted plainly
            continue
        if charge_ahead:
            assert claimed_ids(batch) == [job_id]
            (claimed_row,) = support.rows(engine, CLAIMED, CLAIMED.c.job_id == job_id)
            assert claimed_row.created_at == moment
            assert budget(engine, GLOBAL).tat == moment + MINUTE
            assert list(batch.starts) == [job_id]
            assert batch.starts[job_id] <= time.monotonic() + SOON.total_seconds()
        else:
            assert (deferred_ids(batch), batch.deferrals[0].until) == ([job_id], moment)
            assert budget(engine, GLOBAL).tat == moment
            assert batch.starts == {}
        return
    pytest.fail("every claim came after the moment it was to be charged ahead for")


def test_a_budget_row_is_inserted_on_first_use_and_updated_after(app, engine):
    first = later(app, rate_limit_jobs.global_job, "first")
    assert budget_keys(engine) == []

    claim_batch(engine)

    row = budget(engine, GLOBAL)
    now = row.updated_at
    assert (row.tat, row.last_slot_at) == (now + MINUTE, None)
    # Inserted (as an idle budget) before the claim read its clock, which it reads only
    # once its budgets are locked.
    assert row.created_at <= now
    assert job_state(engine, first) == "claimed"

    second = later(app, rate_limit_jobs.global_job, "second")
    claim_batch(engine)

    again = budget(engine, GLOBAL)
    assert (again.id, again.created_at, again.tat) == (row.id, row.created_at, now + MINUTE)
    assert again.last_slot_at == now + MINUTE == scheduled_at(engine, second)
    assert again.updated_at >= now
    assert budget_keys(engine) == [GLOBAL]


def test_a_batch_of_unlimited_jobs_touches_no_budget(app, engine):
    jobs = many(app, rate_limit_jobs.unlimited, 3)

    batch = claim_batch(engine)

    assert claimed_ids(batch) == jobs
    assert batch.deferrals == []
    assert budget_keys(engine) == []


def test_unlimited_jobs_in_the_batch_are_claimed_while_limited_ones_wait(app, engine):
    mixed = [
        later(app, rate_limit_jobs.global_job, "g1"),
        later(app, rate_limit_jobs.unlimited, "u1"),
        later(app, rate_limit_jobs.global_job, "g2"),
        later(app, rate_limit_jobs.unlimited, "u2"),
        later(app, rate_limit_jobs.global_job, "g3"),
        later(app, rate_limit_jobs.unlimited, "u3"),
    ]
    g1, u1, g2, u2, g3, u3 = mixed

    batch = claim_batch(engine, limit=6)

    assert claimed_ids(batch) == [g1, u1, u2, u3]
    assert deferred_ids(batch) == [g2, g3]
    assert sorted(row.job_id for row in support.rows(engine, CLAIMED)) == [g1, u1, u2, u3]
    assert sorted(row.job_id for row in support.rows(engine, SCHEDULED)) == [g2, g3]


def test_candidates_are_checked_in_queue_order_priority_then_id(app, engine):
    low_first = later(app, rate_limit_jobs.global_job, "a", priority=5)
    high_first = later(app, rate_limit_jobs.global_job, "b", priority=0)
    high_second = later(app, rate_limit_jobs.global_job, "c", priority=0)
    low_second = later(app, rate_limit_jobs.global_job, "d", priority=5)

    batch = claim_batch(engine)

    now = claim_clock(engine, GLOBAL)
    assert claimed_ids(batch) == [high_first]
    assert [(d.job.id, d.until) for d in batch.deferrals] == [
        (high_second, now + MINUTE),
        (low_first, now + 2 * MINUTE),
        (low_second, now + 3 * MINUTE),
    ]


def test_a_fresh_budget_admits_burst_at_once_and_staggers_the_rest_one_interval_apart(app, engine):
    jobs = many(app, rate_limit_jobs.staggered, 6)

    batch = claim_batch(engine)

    key = "rate_test.staggered/global"
    now = claim_clock(engine, key)
    assert claimed_ids(batch) == jobs[:2]
    slots = [now + step * STAGGERED for step in (1, 2, 3, 4)]
    assert [(d.job.id, d.key, d.until) for d in batch.deferrals] == [
        (job_id, key, slot) for job_id, slot in zip(jobs[2:], slots, strict=True)
    ]
    assert [scheduled_at(engine, job_id) for job_id in jobs[2:]] == slots
    row = budget(engine, key)
    assert (row.tat, row.last_slot_at) == (now + 2 * STAGGERED, slots[-1])


def test_a_later_claim_hands_out_slots_after_the_last_one_given(app, engine):
    first, second = many(app, rate_limit_jobs.global_job, 2)
    claim_batch(engine)
    now = claim_clock(engine, GLOBAL)
    assert scheduled_at(engine, second) == now + MINUTE

    third = later(app, rate_limit_jobs.global_job, "third")
    batch = claim_batch(engine)

    assert deferred_ids(batch) == [third]
    assert scheduled_at(engine, third) == now + 2 * MINUTE
    assert budget(engine, GLOBAL).last_slot_at == now + 2 * MINUTE
    assert job_state(engine, first) == "claimed"


def test_slots_stop_five_minutes_ahead_and_later_jobs_look_again_in_five_minutes(app, engine):
    jobs = many(app, rate_limit_jobs.slow, 6)  # one every 100 s

    batch = claim_batch(engine)

    key = "rate_test.slow/global"
    now = claim_clock(engine, key)
    assert claimed_ids(batch) == jobs[:1]
    hundred = dt.timedelta(seconds=100)
    expected = [now + hundred, now + 2 * hundred, now + 3 * hundred] + [now + MAX_AHEAD] * 2
    assert [d.until for d in batch.deferrals] == expected
    assert [scheduled_at(engine, job_id) for job_id in jobs[1:]] == expected
    # The jobs past the horizon took no slot: the last one handed out is the third.
    assert budget(engine, key).last_slot_at == now + 3 * hundred == now + MAX_AHEAD


def test_each_budget_key_in_a_batch_hands_out_its_own_slots(app, engine):
    a1, b1, a2, c1, b2, a3 = (
        later(app, rate_limit_jobs.per_account, account, index)
        for index, account in enumerate("abacba")
    )

    batch = claim_batch(engine)

    assert claimed_ids(batch) == [a1, b1, c1]
    key = "rate_test.per_account/{}".format
    now = claim_clock(engine, key("a"))
    assert [(d.job.id, d.key, d.until) for d in batch.deferrals] == [
        (a2, key("a"), now + MINUTE),
        (b2, key("b"), now + MINUTE),
        (a3, key("a"), now + 2 * MINUTE),
    ]
    assert budget_keys(engine) == [key("a"), key("b"), key("c")]
    assert budget(engine, key("a")).last_slot_at == now + 2 * MINUTE
    assert budget(engine, key("b")).last_slot_at == now + MINUTE
    assert budget(engine, key("c")).last_slot_at is None
    assert {budget(engine, key(name)).updated_at for name in "abc"} == {now}


def test_two_definitions_sharing_a_group_share_one_budget(app, engine):
    sync = later(app, rate_limit_jobs.sync_orders, "s")
    refund = later(app, rate_limit_jobs.refund_orders, "r")

    batch = claim_batch(engine)

    shared = f"{rate_limit_jobs.SHARED}/global"
    assert claimed_ids(batch) == [sync]
    assert [(d.job.id, d.key) for d in batch.deferrals] == [(refund, shared)]
    assert job_row(engine, sync).rate_limit_key == job_row(engine, refund).rate_limit_key
    assert budget_keys(engine) == [shared]


def test_a_class_job_is_limited_like_a_function_job(app, engine):
    first = later(app, rate_limit_jobs.AccountSync, "acct")
    second = later(app, rate_limit_jobs.AccountSync, "acct")
    other = later(app, rate_limit_jobs.AccountSync, "other")

    batch = claim_batch(engine)

    assert claimed_ids(batch) == [first, other]
    assert [(d.job.id, d.key) for d in batch.deferrals] == [(second, "rate_test.account_sync/acct")]


# -- keys ------------------------------------------------------------------------------------


def test_a_key_callable_returning_none_uses_the_bare_budget_of_the_job(app, engine):
    first, second = many(app, rate_limit_jobs.bare, 2)

    batch = claim_batch(engine)

    assert job_row(engine, first).rate_limit_key == "rate_test.bare"
    assert claimed_ids(batch) == [first]
    assert [(d.job.id, d.key) for d in batch.deferrals] == [(second, "rate_test.bare")]
    assert budget_keys(engine) == ["rate_test.bare"]


def test_a_blank_key_is_stored_empty_and_leaves_the_job_unlimited(app, engine):
    jobs = many(app, rate_limit_jobs.blank, 3)

    batch = claim_batch(engine)

    assert [job_row(engine, job_id).rate_limit_key for job_id in jobs] == ["", "", ""]
    assert claimed_ids(batch) == jobs
    assert batch.deferrals == []
    assert budget_keys(engine) == []


def test_a_job_stored_without_a_key_uses_the_bare_budget_of_its_definition(app, engine):
    # As if enqueued before the definition declared its limit.
    first = later(app, rate_limit_jobs.per_account, "a")
    second = later(app, rate_limit_jobs.per_account, "b")
    keyed = later(app, rate_limit_jobs.per_account, "c")
    update_jobs(engine, [first, second], rate_limit_key=None)

    batch = claim_batch(engine)

    assert claimed_ids(batch) == [first, keyed]
    assert [(d.job.id, d.key) for d in batch.deferrals] == [(second, "rate_test.per_account")]
    assert budget_keys(engine) == ["rate_test.per_account", "rate_test.per_account/c"]
    assert job_row(engine, second).rate_limit_key is None


@pytest.mark.parametrize("letter", ["k", "\u00e9"], ids=["ascii", "two-byte"])
def test_a_key_of_255_characters_is_stored_and_gets_its_budget(app, engine, letter):
    prefix = "rate_test.by_value/"
    value = letter * (255 - len(prefix))
    first = later(app, rate_limit_jobs.by_value, value)
    second = later(app, rate_limit_jobs.by_value, value)

    batch = claim_batch(engine)

    assert job_row(engine, first).rate_limit_key == prefix + value
    assert claimed_ids(batch) == [first]
    assert deferred_ids(batch) == [second]
    assert budget_keys(engine) == [prefix + value]


@pytest.mark.parametrize("many_at_once", [False, True], ids=["perform_later", "perform_all"])
def test_a_key_longer_than_255_characters_fails_the_enqueue_naming_the_limit(
    app, engine, many_at_once
):
    value = "k" * 255
    with app.app_context(), pytest.raises(ValueError, match="rate-limit key is 274 characters"):
        if many_at_once:
            jobs = [rate_limit_jobs.unlimited.new("fine"), rate_limit_jobs.by_value.new(value)]
            support.solidq.perform_all_later(jobs)
        else:
            rate_limit_jobs.by_value.perform_later(value)

    assert support.count(engine, JOBS) == 0
    assert support.count(engine, READY) == 0


@pytest.mark.parametrize("many_at_once", [False, True], ids=["perform_later", "perform_all"])
def test_a_key_callable_that_raises_fails_the_enqueue_with_its_error(app, engine, many_at_once):
    with (
        app.app_context(),
        pytest.raises(rate_limit_jobs.KeyUnavailable, match="no budget key for acct"),
    ):
        if many_at_once:
            jobs = [rate_limit_jobs.unlimited.new("fine"), rate_limit_jobs.raising_key.new("acct")]
            support.solidq.perform_all_later(jobs)
        else:
            rate_limit_jobs.raising_key.perform_later("acct")

    assert support.count(engine, JOBS) == 0
    assert support.count(engine, READY) == 0


def test_keys_that_differ_only_in_case_are_claimed_on_every_backend(app, engine):
    """Keys aren't case-folded: on PostgreSQL and SQLite "Acct" and "acct" are two budgets;
    on MySQL/MariaDB, whose default collation ignores case, they share one (the seed's
    "Rules and limitations"). Either way the claim must work."""
    upper = later(app, rate_limit_jobs.by_value, "Acct")
    lower = later(app, rate_limit_jobs.by_value, "acct")

    batch = claim_batch(engine)

    if engine.dialect.name == "mysql":
        assert claimed_ids(batch) == [upper]
        assert deferred_ids(batch) == [lower]
    else:
        assert claimed_ids(batch) == [upper, lower]
        assert budget_keys(engine) == ["rate_test.by_value/Acct", "rate_test.by_value/acct"]


def test_a_key_differing_in_case_from_a_stored_budget_is_claimed_on_every_backend(app, engine):
    first = later(app, rate_limit_jobs.by_value, "Acct")
    claim_batch(engine)
    assert job_state(engine, first) == "claimed"
    second = later(app, rate_limit_jobs.by_value, "acct")

    batch = claim_batch(engine)

    if engine.dialect.name == "mysql":  # one budget, spent by the first claim
        assert deferred_ids(batch) == [second]
    else:
        assert claimed_ids(batch) == [second]


# -- definitions that changed ----------------------------------------------------------------


def test_a_job_whose_definition_no_longer_declares_a_limit_is_claimed_without_a_check(
    app, engine, monkeypatch
):
    dropped = many(app, rate_limit_jobs.global_job, 3)
    limited = many(app, rate_limit_jobs.per_account, 2, "acct")
    support.redeclare(monkeypatch, rate_limit_jobs.global_job, rate_limit=None)

    batch = claim_batch(engine)

    assert claimed_ids(batch) == [*dropped, limited[0]]
    assert deferred_ids(batch) == [limited[1]]
    assert budget_keys(engine) == ["rate_test.per_account/acct"]


def test_a_batch_of_jobs_whose_definition_dropped_its_limit_is_claimed_whole(
    app, engine, monkeypatch
):
    jobs = many(app, rate_limit_jobs.global_job, 3)
    support.redeclare(monkeypatch, rate_limit_jobs.global_job, rate_limit=None)

    batch = claim_batch(engine)

    assert claimed_ids(batch) == jobs
    assert budget_keys(engine) == []


def _make_unloadable(engine: sa.Engine, job_ids: list[int]) -> None:
    payload = json.dumps({"job": "tests.jobs.rate_limit:vanished", "args": []})
    update_jobs(engine, job_ids, class_name="rate_test.vanished", arguments=payload)


@pytest.mark.parametrize("with_limited", [False, True], ids=["alone", "with-limited-jobs"])
def test_a_job_whose_definition_cannot_be_loaded_is_claimed_without_a_check(
    app, engine, with_limited
):
    gone = many(app, rate_limit_jobs.global_job, 2)
    _make_unloadable(engine, gone)
    limited = many(app, rate_limit_jobs.per_account, 2, "acct") if with_limited else []

    batch = claim_batch(engine)

    assert claimed_ids(batch) == gone + limited[:1]
    assert deferred_ids(batch) == limited[1:]
    assert GLOBAL not in budget_keys(engine)


@pytest.fixture
def late_definition(tmp_path, monkeypatch):
    """A rate-limited job (of 1 a minute) defined in a module the test forgets after enqueueing
    (see support.late_definition). Yields (module, job name)."""
    with support.late_definition(
        tmp_path, monkeypatch, "rate", 'to=1, per=60, key="global"'
    ) as late:
        yield late


def test_a_job_of_a_definition_imported_only_at_claim_is_checked(app, engine, late_definition):
    module, job_name = late_definition
    first, second = many(app, module.late, 2)
    registry.unregister(module.late)
    sys.modules.pop(module.__name__)
    assert not registry.is_registered(job_name)

    with deferral_signals() as sent:
        batch = claim_batch(engine)

    assert registry.is_registered(job_name)
    assert claimed_ids(batch) == [first]
    assert [(d.job.id, d.key) for d in batch.deferrals] == [(second, f"{job_name}/global")]
    assert job_state(engine, first) == "claimed"
    assert job_state(engine, second) == "scheduled"
    assert [payload["job_ids"] for _, payload in sent] == [[second]]


# -- retried and released jobs ---------------------------------------------------------------


def test_a_released_job_keeps_its_stored_key_and_is_charged_again(app, engine, monkeypatch):
    job_id = later(app, rate_limit_jobs.versioned, "acct")
    monkeypatch.setitem(rate_limit_jobs.KEY_VERSION, "version", "v2")
    assert claimed_ids(claim_batch(engine)) == [job_id]

    assert release.release_all(engine, [PROCESS_ID]) == 1
    batch = claim_batch(engine)

    key = "rate_test.versioned/acct/v1"
    assert job_row(engine, job_id).rate_limit_key == key
    assert [(d.job.id, d.key) for d in batch.deferrals] == [(job_id, key)]
    assert budget_keys(engine) == [key]


def test_a_retried_job_keeps_its_stored_key_and_is_charged_again(app, engine, monkeypatch):
    job_id = later(app, rate_limit_jobs.retried, "acct")
    monkeypatch.setitem(rate_limit_jobs.KEY_VERSION, "version", "v2")
    (claimed,) = claim_batch(engine).jobs
    with app.app_context():
        outcome = execute.perform(claimed)
    assert outcome.kind is OutcomeKind.RETRIED
    finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=True)
    assert job_state(engine, job_id) == "ready"

    batch = claim_batch(engine)

    key = "rate_test.retried/acct/v1"
    assert job_row(engine, job_id).rate_limit_key == key
    assert [(d.job.id, d.key) for d in batch.deferrals] == [(job_id, key)]
    assert budget_keys(engine) == [key]


def test_a_job_stored_without_a_key_gets_the_current_key_when_it_is_retried(app, engine):
    """The seed: a job enqueued without a key "uses the bare class-wide budget, and gets the
    current key if it's retried"."""
    job_id = later(app, rate_limit_jobs.retried, "acct")
    update_jobs(engine, [job_id], rate_limit_key=None)
    (claimed,) = claim_batch(engine).jobs
    assert budget_keys(engine) == ["rate_test.retried"]
    with app.app_context():
        outcome = execute.perform(claimed)
    finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=True)

    assert job_row(engine, job_id).rate_limit_key == "rate_test.retried/acct/v1"
    assert claimed_ids(claim_batch(engine)) == [job_id]  # a budget of its own, unspent


# -- with limits_concurrency -----------------------------------------------------------------


def _spend_serial_budget(app: Flask, engine: sa.Engine) -> None:
    """Claim one ``rate_test.serial`` job of another account, spending the shared budget."""
    spender = later(app, rate_limit_jobs.serial, "spender")
    assert claimed_ids(claim_batch(engine)) == [spender]


def test_a_deferred_job_gives_its_concurrency_slot_to_the_next_blocked_job_of_its_key(app, engine):
    _spend_serial_budget(app, engine)
    first = later(app, rate_limit_jobs.serial, "acct", 1)
    blocked = later(app, rate_limit_jobs.serial, "acct", 2)
    assert job_state(engine, blocked) == "blocked"

    with releases() as released:
        batch = claim_batch(engine)

    assert deferred_ids(batch) == [first]
    assert job_state(engine, first) == "scheduled"
    assert job_state(engine, blocked) == "ready"
    assert released == [
        {"job_id": blocked, "concurrency_key": "rate_test.serial/acct", "released": True}
    ]
    # The slot went from the deferred job to the released one: still taken, once.
    (semaphore,) = support.rows(engine, SEMAPHORES, SEMAPHORES.c.key == "rate_test.serial/acct")
    assert semaphore.value == 0


def test_a_deferred_job_gives_its_slot_back_when_no_job_is_blocked(app, engine):
    _spend_serial_budget(app, engine)
    job_id = later(app, rate_limit_jobs.serial, "acct")

    batch = claim_batch(engine)

    assert deferred_ids(batch) == [job_id]
    (semaphore,) = support.rows(engine, SEMAPHORES, SEMAPHORES.c.key == "rate_test.serial/acct")
    assert semaphore.value == 1


def test_a_deferred_job_takes_a_free_concurrency_slot_again_when_it_comes_back(app, engine):
    _spend_serial_budget(app, engine)
    job_id = later(app, rate_limit_jobs.serial, "acct")
    assert deferred_ids(claim_batch(engine)) == [job_id]

    make_due(engine, job_id)
    assert dispatch.dispatch_due(engine, 500) == 1

    assert job_state(engine, job_id) == "ready"
    (semaphore,) = support.rows(engine, SEMAPHORES, SEMAPHORES.c.key == "rate_test.serial/acct")
    assert semaphore.value == 0
    # And the next claim checks the rate again: the budget is still spent.
    batch = claim_batch(engine)
    assert deferred_ids(batch) == [job_id]
    assert scheduled_at(engine, job_id) > utcnow()


def test_a_deferred_job_coming_back_to_a_taken_concurrency_slot_is_blocked(app, engine):
    _spend_serial_budget(app, engine)
    first = later(app, rate_limit_jobs.serial, "acct", 1)
    second = later(app, rate_limit_jobs.serial, "acct", 2)
    assert deferred_ids(claim_batch(engine)) == [first]
    assert job_state(engine, second) == "ready"  # it holds the slot now

    make_due(engine, first)
    assert dispatch.dispatch_due(engine, 500) == 1

    assert job_state(engine, first) == "blocked"
    assert [row.job_id for row in support.rows(engine, BLOCKED)] == [first]


# -- signal and log line ---------------------------------------------------------------------


def test_defer_rate_limited_is_sent_once_per_definition_with_its_keys_and_jobs(app, engine):
    a1, a2, b1, a3, b2 = (
        later(app, rate_limit_jobs.per_account, account, index)
        for index, account in enumerate("aabab")
    )
    g1, g2, g3 = many(app, rate_limit_jobs.global_job, 3)
    unlimited = later(app, rate_limit_jobs.unlimited, "u")

    with deferral_signals() as sent:
        batch = claim_batch(engine)

    assert claimed_ids(batch) == [a1, b1, g1, unlimited]
    assert sorted(sent, key=lambda item: item[1]["class_name"]) == [
        (
            rate_limit_jobs.global_job,
            {"class_name": "rate_test.global", "keys": [GLOBAL], "job_ids": [g2, g3], "size": 2},
        ),
        (
            rate_limit_jobs.per_account,
            {
                "class_name": "rate_test.per_account",
                "keys": ["rate_test.per_account/a", "rate_test.per_account/b"],
                "job_ids": [a2, a3, b2],
                "size": 3,
            },
        ),
    ]


def test_defer_rate_limited_is_sent_after_the_claim_committed(app, engine):
    many(app, rate_limit_jobs.global_job, 2)
    seen: list[list[int]] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        # From another connection: only a committed deferral is visible.
        seen.append([row.job_id for row in support.rows(engine, SCHEDULED)])

    with signals.defer_rate_limited.connected_to(receiver):
        batch = claim_batch(engine)

    assert seen == [deferred_ids(batch)]


def test_defer_rate_limited_waits_for_the_callers_transaction_and_not_a_rollback(app, engine):
    many(app, rate_limit_jobs.global_job, 2)

    with deferral_signals() as sent, app.app_context():
        with support.solidq.transaction():
            batch = claim_batch(engine)
            assert len(batch.deferrals) == 1
            assert sent == []
        assert [payload["job_ids"] for _, payload in sent] == [deferred_ids(batch)]

        third = later(app, rate_limit_jobs.global_job, "rolled back")
        with pytest.raises(RuntimeError, match="roll back"):
            with support.solidq.transaction():
                assert deferred_ids(claim_batch(engine)) == [third]
                raise RuntimeError("roll back")
        assert len(sent) == 1
    assert job_state(engine, third) == "ready"


def test_no_signal_when_a_claim_defers_nothing(app, engine):
    later(app, rate_limit_jobs.global_job, "only")
    later(app, rate_limit_jobs.unlimited, "u")

    with deferral_signals() as sent:
        claim_batch(engine)

    assert sent == []


def test_the_log_subscriber_logs_each_deferring_definition_at_debug(app, engine, caplog):
    jobs = many(app, rate_limit_jobs.global_job, 3)
    caplog.set_level(logging.DEBUG, logger="flask_solidq")
    log_subscriber.connect()
    try:
        claim_batch(engine)
    finally:
        log_subscriber.disconnect()

    lines = [record.getMessage() for record in caplog.records if "Defer" in record.getMessage()]
    assert lines == [
        f'SolidQ Defer rate-limited jobs class_name: "rate_test.global", keys: ["{GLOBAL}"],'
        f" job_ids: [{jobs[1]}, {jobs[2]}], size: 2"
    ]
    assert [record.levelno for record in caplog.records if "Defer" in record.getMessage()] == [
        logging.DEBUG
    ]


# -- statements ------------------------------------------------------------------------------


@pytest.mark.parametrize("backlog", [False, True], ids=["only-unlimited", "limited-behind"])
def test_a_batch_without_limited_jobs_costs_the_plain_claims_statements(app, engine, backlog):
    assert "rate_test.global" in rate_limit.CONTROL.checked_at_claim()
    unlimited = many(app, rate_limit_jobs.unlimited, 3)
    if backlog:  # limited jobs wait further down the queue, outside the batch
        many(app, rate_limit_jobs.global_job, 3)

    with counting_statements(engine) as statements:
        batch = claim_batch(engine, limit=3)

    assert claimed_ids(batch) == unlimited
    assert len(statements) == CLAIM_STATEMENTS[engine.dialect.name], statements


#: Statements of a claim whose batch holds limited jobs of one budget that exists, as
#: measured: select the candidates (locking the process's row), read their jobs, lock the
#: budget, read the database's clock (not on SQLite: its clock is this host's), save
#: the budget, insert the deferred jobs' scheduled executions, insert the claims, delete the
#: ready rows; on PostgreSQL, a NOTIFY for the dispatchers of the deferred jobs (the guarded
#: one-statement claim is not tried again for a second after a batch it refused, as the
#: warm-up's was).
LIMITED_CLAIM_STATEMENTS = {"postgresql": 9, "sqlite": 7, "mysql": 8}

#: Two more when the budget is seen the first time: insert its row, lock it.
NEW_BUDGET_STATEMENTS = 2


@pytest.mark.parametrize("batch_size", [2, 5, 10])
def test_a_batch_with_limited_jobs_costs_the_same_few_statements_whatever_its_size(
    app, engine, batch_size
):
    later(app, rate_limit_jobs.global_job, "warm-up")
    claim_batch(engine)  # the budget's row exists, and the table's presence is known
    jobs = many(app, rate_limit_jobs.global_job, batch_size)
    unlimited = later(app, rate_limit_jobs.unlimited, "u")

    with counting_statements(engine) as statements:
        batch = claim_batch(engine, limit=batch_size + 1)

    assert claimed_ids(batch) == [unlimited]
    assert deferred_ids(batch) == jobs
    assert len(statements) == LIMITED_CLAIM_STATEMENTS[engine.dialect.name], statements


def test_a_new_budget_costs_two_more_statements(app, engine):
    later(app, rate_limit_jobs.global_job, "warm-up")
    claim_batch(engine)  # the table's presence is known
    jobs = many(app, rate_limit_jobs.per_account, 3, "new")
    unlimited = later(app, rate_limit_jobs.unlimited, "u")

    with counting_statements(engine) as statements:
        batch = claim_batch(engine)

    assert claimed_ids(batch) == [jobs[0], unlimited]
    expected = LIMITED_CLAIM_STATEMENTS[engine.dialect.name] + NEW_BUDGET_STATEMENTS
    assert len(statements) == expected, statements


def test_a_claim_locks_its_budgets_in_one_statement_in_key_order(app, engine):
    for account in ("m", "z", "a"):
        later(app, rate_limit_jobs.per_account, account)
    claim_batch(engine)  # the budgets exist now
    for account in ("z", "a", "m"):
        later(app, rate_limit_jobs.per_account, account)

    with counting_statements(engine) as statements:
        claim_batch(engine)

    locks = [sql for sql in statements if sql.lstrip().startswith("SELECT") and BUDGETS.name in sql]
    assert len(locks) == 1, statements
    assert re.search(rf"ORDER BY {BUDGETS.name}\.[`\"]?key[`\"]?", locks[0]), locks[0]
    if engine.dialect.name != "sqlite":  # SQLite's BEGIN IMMEDIATE holds the only write lock
        assert locks[0].rstrip().endswith("FOR UPDATE"), locks[0]


# -- several claimers ------------------------------------------------------------------------


def test_claimers_at_once_admit_each_budget_once_without_deadlocking(app, engine):
    """Two claimers, each over a queue holding jobs of budgets "x" and "y" in opposite
    orders, claiming at the same moment: each budget admits exactly one job in all."""
    rounds = 3
    for round_ in range(rounds):
        for queue, accounts in (("race_one", "yx"), ("race_two", "xy")):
            for account in accounts * 2:
                later(app, rate_limit_jobs.per_account, f"{account}{round_}", queue=queue)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    batches: list[claim.ClaimBatch] = []

    def claimer(queue: str) -> None:
        try:
            for _ in range(rounds):
                barrier.wait(timeout=10)
                batches.append(
                    claim.claim_batch(engine, claim.QueueSelector((queue,)), 4, PROCESS_ID)
                )
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)
            barrier.abort()

    threads = [
        threading.Thread(target=claimer, args=(queue,)) for queue in ("race_one", "race_two")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    admitted = [job.rate_limit_key for batch in batches for job in batch.jobs]
    keys = [f"rate_test.per_account/{name}{r}" for r in range(rounds) for name in "xy"]
    assert sorted(admitted) == sorted(keys)
    assert support.count(engine, SCHEDULED) == 8 * rounds - len(keys)
    assert support.count(engine, READY) == 0


# -- the budgets table missing ---------------------------------------------------------------


def test_without_the_budgets_table_limited_jobs_wait_a_minute_and_one_error_is_logged(
    tmp_path, caplog
):
    url = f"sqlite:///{tmp_path}/without_budgets.db"
    setup = sa.create_engine(url)
    models.metadata.create_all(setup)
    app = support.create_app(url)
    with app.app_context():
        queue = t.cast(sa.Engine, app.extensions["solidq"].engine)
    limited = many(app, rate_limit_jobs.global_job, 2)
    unlimited = later(app, rate_limit_jobs.unlimited, "u")
    with setup.begin() as connection:
        connection.exec_driver_sql("DROP TABLE solidq_rate_limits")
    support.register_claimers(queue, CLAIMERS)
    caplog.set_level(logging.ERROR, logger="flask_solidq")
    try:
        before = utcnow()
        batch = claim_batch(queue)
        after = utcnow()

        assert claimed_ids(batch) == [unlimited]
        assert deferred_ids(batch) == limited
        for job_id in limited:
            assert before + MINUTE <= scheduled_at(queue, job_id) <= after + MINUTE
        errors = [record for record in caplog.records if record.levelno == logging.ERROR]
        assert len(errors) == 1
        assert "solidq_rate_limits" in errors[0].getMessage()

        # A minute later they wait again; the process doesn't log the error twice.
        make_due(queue, *limited)
        assert dispatch.dispatch_due(queue, 500) == 2
        again = claim_batch(queue)
        assert deferred_ids(again) == limited
        assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
    finally:
        budget_table.TABLE.forget()
        with app.app_context():
            app.extensions["solidq"].dispose()
            support.db.engines[None].dispose()
        setup.dispose()


# -- clearing idle budgets -------------------------------------------------------------------


def test_clearing_idle_budgets_deletes_only_those_that_admit_as_a_missing_row(app, engine):
    for account in ("idle", "spent", "holding"):
        later(app, rate_limit_jobs.per_account, account)
    later(app, rate_limit_jobs.per_account, "holding")
    claim_batch(engine)
    key = "rate_test.per_account/{}".format
    past = utcnow() - dt.timedelta(seconds=1)
    with engine.begin() as connection:
        connection.execute(
            BUDGETS.update().where(BUDGETS.c.key == key("idle")).values(tat=past, last_slot_at=past)
        )
        connection.execute(
            BUDGETS.update()
            .where(BUDGETS.c.key == key("holding"))
            .values(tat=past)  # full, but a slot handed out a minute ahead
        )

    assert budgets.clear_idle_in_batches(engine, batch_size=1) == 1

    assert budget_keys(engine) == [key("holding"), key("spent")]
    # A claim after clearing inserts the row again, and admits as before.
    job_id = later(app, rate_limit_jobs.per_account, "idle")
    assert claimed_ids(claim_batch(engine)) == [job_id]
    assert key("idle") in budget_keys(engine)

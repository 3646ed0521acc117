"""Seams where coalescing meets concurrency limits, deploys, the app's transaction and
failures (issue 19, "seams promised by the seeds that no test holds"), on every backend: a
leftover concurrency key after a deploy removed the limit, deploys that switch ``on_conflict``
or change ``on_full``/``debounce``/``max_wait``/the key while calls wait, collecting and
``on_full="dispatch"`` against a concurrency limit and a locked scheduled execution, database
failures and deadlocks at enqueue, ``signals.enqueue``/``signals.coalesce``,
``perform_after_commit``, records and definitions that come back, and the README's monitoring
queries.

A deploy is simulated as the other coalescing tests do: the definition's declaration is
swapped (``support.redeclare``: a new declarations object) between enqueue and claim.
Jobs are claimed, performed and finished in-process (the helpers of
:mod:`tests.controls.concurrency.test_concurrency_controls`), on a real database.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import sqlite3
import threading
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import CoalesceStatus
from flask_solidq import CollectedJobMismatch
from flask_solidq import EnqueueError
from flask_solidq import coalesce
from flask_solidq import errors
from flask_solidq import signals
from flask_solidq.controls import concurrency
from flask_solidq.controls.coalesce import OnConflict
from flask_solidq.controls.coalesce import OnFull
from flask_solidq.controls.coalesce import coalesce_admission as coalesce_operation
from flask_solidq.controls.coalesce import coalesce_start
from flask_solidq.definitions import registry
from flask_solidq.models import CoalescedCall
from flask_solidq.models import FailedExecution
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import COALESCED_CALLS
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.operations import dispatch
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.storage import db as solidq_db
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import expire
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import coalesce_run as run_jobs
from tests.jobs import seams_coalesce as jobs
from tests.support.concurrency import BLOCKED
from tests.support.concurrency import SEMAPHORES
from tests.support.concurrency import job_state
from tests.support.concurrency import ready_ids
from tests.support.concurrency import semaphore

if t.TYPE_CHECKING:
    from flask import Flask

P = jobs.P
CREATED = CoalesceStatus.CREATED
DISCARDED = CoalesceStatus.DISCARDED
REPLACED = CoalesceStatus.REPLACED
COLLECTED = CoalesceStatus.COLLECTED

#: Slack for comparing a stored time with one computed in the test.
SLACK = dt.timedelta(seconds=2)
#: How long a call may take before a lock test calls it hung.
PROMPT = 5.0


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    for found in (jobs.PERFORMED, run_jobs.PERFORMED, run_jobs.CALLS, run_jobs.SEEN):
        found.clear()
    yield jobs.PERFORMED
    for found in (jobs.PERFORMED, run_jobs.PERFORMED, run_jobs.CALLS, run_jobs.SEEN):
        found.clear()


@pytest.fixture
def products(app: Flask, engine: sa.Engine) -> t.Iterator[type[run_jobs.Product]]:
    """The app's own table, in the queue's database."""
    run_jobs.Base.metadata.create_all(engine)
    yield run_jobs.Product
    run_jobs.Base.metadata.drop_all(engine)


# -- helpers ------------------------------------------------------------------------------------


def later(app: Flask, definition: t.Any, *args: t.Any, **options: t.Any) -> t.Any:
    """``definition.set(**options).perform_later(*args)``; returns the job instance."""
    with app.app_context():
        target = definition.set(**options) if options else definition
        return target.perform_later(*args)


def run(app: Flask, engine: sa.Engine, limit: int = 10) -> dict[int, t.Any]:
    """Claim up to ``limit`` ready jobs, perform them and store their outcomes; job id ->
    outcome kind."""
    outcomes = perform(app, claim(engine, limit))
    finish(engine, outcomes)
    return {outcome.claimed.id: outcome.kind for outcome in outcomes}


def deploy(monkeypatch: pytest.MonkeyPatch, definition: t.Any, **changes: t.Any) -> None:
    """A deploy that changes ``definition``'s ``coalesce`` declaration (the stored jobs keep
    what they were enqueued with)."""
    changed = dataclasses.replace(definition._coalesce, **changes)
    support.redeclare(monkeypatch, definition, coalesce=changed)


def key_rows(engine: sa.Engine) -> dict[str, tuple[int, int]]:
    """coalesce key -> (its open job, calls_count)."""
    return {row.key: (row.job_id, row.calls_count) for row in support.rows(engine, COALESCE_KEYS)}


def call_ids(engine: sa.Engine, job_id: int) -> list[int]:
    return [
        row.id for row in support.rows(engine, COALESCED_CALLS, COALESCED_CALLS.c.job_id == job_id)
    ]


def job_row(engine: sa.Engine, job_id: int) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return row


def scheduled_at(engine: sa.Engine, job_id: int) -> dt.datetime | None:
    found = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id == job_id)
    return found[0].scheduled_at if found else None


def failure_class(engine: sa.Engine, job_id: int) -> str:
    (row,) = support.rows(engine, FAILED, FAILED.c.job_id == job_id)
    return t.cast(str, json.loads(row.error)["exception_class"])


def class_path(error: type[BaseException]) -> str:
    return f"{error.__module__}.{error.__qualname__}"


def near(moment: dt.datetime | None, expected: dt.datetime) -> bool:
    return moment is not None and expected - SLACK <= moment <= expected + SLACK


def stored_counts(engine: sa.Engine) -> tuple[int, int, int]:
    """How many jobs, open keys and calls are stored, read without SQLite's write lock."""
    with solidq_db.read(engine) as connection:
        return tuple(  # type: ignore[return-value]
            int(connection.scalar(sa.select(sa.func.count()).select_from(table)) or 0)
            for table in (JOBS, COALESCE_KEYS, COALESCED_CALLS)
        )


@contextlib.contextmanager
def sent(signal: t.Any) -> t.Iterator[list[dict[str, t.Any]]]:
    """The payloads ``signal`` sends inside the block."""
    payloads: list[dict[str, t.Any]] = []

    def receiver(sender: t.Any, **payload: t.Any) -> None:
        payloads.append(payload)

    with signal.connected_to(receiver):
        yield payloads


# -- a. a leftover concurrency key --------------------------------------------------------------


def test_a_leftover_concurrency_key_is_released_when_its_holder_finishes_after_the_limit_went(
    app, engine, monkeypatch
):
    holder = later(app, jobs.limited, "holder")
    waiting = later(app, jobs.limited, "waiting")
    key = f"{P}limited/only"
    assert job_state(engine, holder.provider_job_id) == "ready"
    assert job_state(engine, waiting.provider_job_id) == "blocked"
    assert semaphore(engine, key).value == 0

    # A deploy removes limits_concurrency; both stored jobs keep their key.
    support.redeclare(monkeypatch, jobs.limited, concurrency_limit=None)
    assert run(app, engine) == {holder.provider_job_id: OutcomeKind.FINISHED}

    # Its key is still a concurrency key: the holder's finish hands the slot to the job it
    # blocked, which must not wait for the lease to run out.
    assert job_state(engine, waiting.provider_job_id) == "ready"


def test_a_leftover_blocked_job_is_released_by_maintenance_once_its_lease_runs_out(
    app, engine, monkeypatch
):
    holder = later(app, jobs.limited, "holder")
    waiting = later(app, jobs.limited, "waiting")
    support.redeclare(monkeypatch, jobs.limited, concurrency_limit=None)
    claimed = claim(engine)
    assert [job.id for job in claimed] == [holder.provider_job_id]

    key = f"{P}limited/only"
    # The lease runs out: the semaphore's and the blocked job's expiry pass.
    expire(engine, SEMAPHORES, sa.true())
    expire(engine, BLOCKED, sa.true())
    concurrency.maintain(engine, 100)

    released = semaphore(engine, key)
    assert released.value == 0 and released.expires_at > utcnow()  # a fresh lease: it holds it
    assert job_state(engine, waiting.provider_job_id) == "ready"
    finish(engine, perform(app, claimed))
    assert run(app, engine) == {waiting.provider_job_id: OutcomeKind.FINISHED}
    assert [note for _name, (note,) in jobs.PERFORMED] == ["holder", "waiting"]


# -- b. a deploy that switches on_conflict with jobs open ---------------------------------------


def test_collect_switched_to_discard_fails_the_open_job_with_its_calls_and_opens_a_new_one(
    app, engine, monkeypatch, performed
):
    first = later(app, jobs.collect, "k", 1)
    deploy(monkeypatch, jobs.collect, on_conflict=OnConflict.DISCARD, max_calls=None, on_full=None)

    opener = later(app, jobs.collect, "k", 2)
    joined = later(app, jobs.collect, "k", 3)

    assert opener.coalesce_status is CREATED
    assert opener.provider_job_id != first.provider_job_id
    assert (joined.coalesce_status, joined.provider_job_id) == (DISCARDED, opener.provider_job_id)
    assert len(call_ids(engine, first.provider_job_id)) == 1  # nothing counted on it
    assert run(app, engine) == {
        first.provider_job_id: OutcomeKind.FAILED,
        opener.provider_job_id: OutcomeKind.FINISHED,
    }
    assert failure_class(engine, first.provider_job_id) == class_path(CollectedJobMismatch)
    assert len(call_ids(engine, first.provider_job_id)) == 1  # kept
    assert performed == [(f"{P}collect", ("k", 2))]


def test_a_discard_limit_after_collect_was_removed_blocks_the_collected_job_which_fails_on_a_worker(
    app, engine, monkeypatch, performed
):
    """Seed 003, Changing a job's configuration: "Change limits_concurrency to on_conflict:
    :discard after removing :collect: a conflict blocks the job instead of destroying it, so
    it reaches a worker and fails with its calls"."""
    holder = later(app, jobs.collect_one_at_a_time, "k", 1)
    (running,) = claim(engine)  # the holder: it has the key's one slot
    assert running.id == holder.provider_job_id
    coalesce_start.release_key(engine, running.id)  # it starts: later calls open a new job
    waiting = later(app, jobs.collect_one_at_a_time, "k", 2, wait=60)
    later(app, jobs.collect_one_at_a_time, "k", 3, wait=60)  # collected into it
    deploy(
        monkeypatch,
        jobs.collect_one_at_a_time,
        on_conflict=OnConflict.DISCARD,
        max_calls=None,
        on_full=None,
    )
    limit = jobs.collect_one_at_a_time._concurrency_limit
    support.redeclare(
        monkeypatch,
        jobs.collect_one_at_a_time,
        concurrency_limit=dataclasses.replace(limit, on_conflict=concurrency.OnConflict.DISCARD),
    )

    support.make_due(engine, waiting.provider_job_id)
    dispatch.dispatch_due(engine, 10)

    assert job_state(engine, waiting.provider_job_id) == "blocked"
    assert len(call_ids(engine, waiting.provider_job_id)) == 2
    finish(engine, perform(app, [running]))  # its slot goes to the blocked job
    assert run(app, engine) == {waiting.provider_job_id: OutcomeKind.FAILED}
    assert failure_class(engine, waiting.provider_job_id) == class_path(CollectedJobMismatch)
    assert len(call_ids(engine, waiting.provider_job_id)) == 2  # kept


def test_collect_switched_to_replace_fails_the_open_job_with_its_calls_and_opens_a_new_one(
    app, engine, monkeypatch, performed
):
    first = later(app, jobs.collect, "k", 1)
    deploy(monkeypatch, jobs.collect, on_conflict=OnConflict.REPLACE, max_calls=None, on_full=None)

    opener = later(app, jobs.collect, "k", 2)
    replacing = later(app, jobs.collect, "k", 3)

    assert opener.coalesce_status is CREATED
    assert opener.provider_job_id != first.provider_job_id
    assert (replacing.coalesce_status, replacing.provider_job_id) == (
        REPLACED,
        opener.provider_job_id,
    )
    assert run(app, engine) == {
        first.provider_job_id: OutcomeKind.FAILED,
        opener.provider_job_id: OutcomeKind.FINISHED,
    }
    assert failure_class(engine, first.provider_job_id) == class_path(CollectedJobMismatch)
    assert len(call_ids(engine, first.provider_job_id)) == 1
    assert performed == [(f"{P}collect", ("k", 3))]


def test_discard_switched_to_replace_opens_a_new_job_and_the_old_one_runs_its_own_arguments(
    app, engine, monkeypatch, performed
):
    first = later(app, jobs.dedupe, "k", "a")
    deploy(monkeypatch, jobs.dedupe, on_conflict=OnConflict.REPLACE)

    opener = later(app, jobs.dedupe, "k", "b")
    replacing = later(app, jobs.dedupe, "k", "c")

    assert opener.coalesce_status is CREATED
    assert opener.provider_job_id != first.provider_job_id
    assert (replacing.coalesce_status, replacing.provider_job_id) == (
        REPLACED,
        opener.provider_job_id,
    )
    assert run(app, engine) == {
        first.provider_job_id: OutcomeKind.FINISHED,
        opener.provider_job_id: OutcomeKind.FINISHED,
    }
    assert sorted(performed) == [(f"{P}dedupe", ("k", "a")), (f"{P}dedupe", ("k", "c"))]


def test_replace_switched_to_discard_discards_calls_into_the_replacing_job(
    app, engine, monkeypatch, performed
):
    first = later(app, jobs.replace, "k", "a")
    latest = later(app, jobs.replace, "k", "b")
    assert latest.coalesce_status is REPLACED
    deploy(monkeypatch, jobs.replace, on_conflict=OnConflict.DISCARD)

    discarded = later(app, jobs.replace, "k", "c")

    assert (discarded.coalesce_status, discarded.provider_job_id) == (
        DISCARDED,
        first.provider_job_id,
    )
    assert support.count(engine, JOBS) == 1
    assert run(app, engine) == {first.provider_job_id: OutcomeKind.FINISHED}
    assert performed == [(f"{P}replace", ("k", "b"))]


@pytest.mark.parametrize(
    ("opened_by", "expected"),
    [(jobs.dedupe, ("k", "a")), (jobs.replace, ("k", "b"))],
    ids=["discard", "replace"],
)
def test_switched_to_collect_the_next_call_opens_a_new_job_and_the_old_one_runs_as_one_call(
    app, engine, monkeypatch, performed, opened_by, expected
):
    first = later(app, opened_by, "k", "a")
    later(app, opened_by, "k", "b")
    deploy(
        monkeypatch, opened_by, on_conflict=OnConflict.COLLECT, max_calls=100, on_full=OnFull.WAIT
    )

    opener = later(app, opened_by, "k", "c")
    joined = later(app, opened_by, "k", "d")

    assert opener.coalesce_status is CREATED
    assert opener.provider_job_id != first.provider_job_id
    assert (joined.coalesce_status, joined.provider_job_id) == (COLLECTED, opener.provider_job_id)
    assert call_ids(engine, first.provider_job_id) == []
    assert run(app, engine) == {
        first.provider_job_id: OutcomeKind.FINISHED,
        opener.provider_job_id: OutcomeKind.FINISHED,
    }
    ids = call_ids(engine, opener.provider_job_id)
    name = opened_by.job_name
    assert sorted(performed, key=str) == sorted(
        [(name, [(None, expected)]), (name, [(ids[0], ("k", "c")), (ids[1], ("k", "d"))])],
        key=str,
    )


# -- c. a collecting job blocked by its concurrency limit keeps collecting ----------------------


def test_a_collecting_job_blocked_by_its_limit_keeps_collecting_until_it_starts(
    app, engine, performed
):
    first = later(app, jobs.collect_one_at_a_time, "acct", "a")
    (running,) = claim(engine)
    (first_outcome,) = perform(app, [running])  # started (the key is free), slot still held

    second = later(app, jobs.collect_one_at_a_time, "acct", "b")
    assert second.coalesce_status is CREATED
    assert job_state(engine, second.provider_job_id) == "blocked"
    joined = later(app, jobs.collect_one_at_a_time, "acct", "c")
    assert (joined.coalesce_status, joined.provider_job_id) == (COLLECTED, second.provider_job_id)
    assert job_state(engine, second.provider_job_id) == "blocked"
    assert claim(engine) == []

    finish(engine, [first_outcome])  # the slot comes free: the collecting job is ready
    assert job_state(engine, second.provider_job_id) == "ready"
    assert semaphore(engine, f"{P}collect_one_at_a_time/acct").value == 0  # it took the slot
    after = later(app, jobs.collect_one_at_a_time, "acct", "d")
    assert (after.coalesce_status, after.provider_job_id) == (COLLECTED, second.provider_job_id)

    assert run(app, engine) == {second.provider_job_id: OutcomeKind.FINISHED}
    assert semaphore(engine, f"{P}collect_one_at_a_time/acct").value == 1
    ids = call_ids(engine, second.provider_job_id)
    assert performed[-1] == (
        f"{P}collect_one_at_a_time",
        [(ids[0], ("acct", "b")), (ids[1], ("acct", "c")), (ids[2], ("acct", "d"))],
    )
    assert first.provider_job_id != second.provider_job_id


# -- d. on_full="dispatch" with a concurrency limit ---------------------------------------------


def test_on_full_dispatch_with_its_slot_taken_blocks_the_full_job_instead_of_running_it(
    app, engine, performed
):
    later(app, jobs.collect_dispatch_limited, "acct", 1)
    (running,) = claim(engine)
    (first_outcome,) = perform(app, [running])  # started, slot held

    opener = later(app, jobs.collect_dispatch_limited, "acct", 2, wait=60)
    assert job_state(engine, opener.provider_job_id) == "scheduled"
    before = utcnow()
    filler = later(app, jobs.collect_dispatch_limited, "acct", 3, wait=60)

    assert (filler.coalesce_status, filler.provider_job_id) == (COLLECTED, opener.provider_job_id)
    assert job_state(engine, opener.provider_job_id) == "blocked"  # due now, but not beside it
    assert near(job_row(engine, opener.provider_job_id).scheduled_at, before)
    assert ready_ids(engine) == []
    assert claim(engine) == []

    key = f"{P}collect_dispatch_limited/acct"
    finish(engine, [first_outcome])
    assert job_state(engine, opener.provider_job_id) == "ready"
    assert semaphore(engine, key).value == 0  # it took the slot handed on
    assert run(app, engine) == {opener.provider_job_id: OutcomeKind.FINISHED}
    assert semaphore(engine, key).value == 1
    ids = call_ids(engine, opener.provider_job_id)
    assert performed[-1] == (
        f"{P}collect_dispatch_limited",
        [(ids[0], ("acct", 2)), (ids[1], ("acct", 3))],
    )


# -- e. on_full="dispatch" when the scheduled execution is locked -------------------------------


def _call_in_thread(
    app: Flask, definition: t.Any, *args: t.Any, **options: t.Any
) -> tuple[threading.Thread, dict[str, t.Any]]:
    outcome: dict[str, t.Any] = {}

    def make_the_call() -> None:
        try:
            outcome["called"] = later(app, definition, *args, **options)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            outcome["error"] = error

    caller = threading.Thread(target=make_the_call)
    caller.start()
    return caller, outcome


def test_on_full_dispatch_skips_a_locked_scheduled_execution_and_the_job_keeps_its_time(
    app, engine, database_url
):
    opener = later(app, jobs.collect_dispatch, "k", 1, wait=60)
    job_id = opener.provider_job_id
    due = scheduled_at(engine, job_id)

    if engine.dialect.name == "sqlite":
        # No row locks: the write lock of another connection holds everything, and the
        # filling call waits for it, then dispatches the job as usual.
        holder = sqlite3.connect(engine.url.database, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            caller, outcome = _call_in_thread(app, jobs.collect_dispatch, "k", 2, wait=60)
            caller.join(timeout=0.5)
            waited = caller.is_alive()
            holder.execute("ROLLBACK")
            caller.join(timeout=60)
        finally:
            holder.close()
        assert waited, "the filling call wrote past another connection's write lock"
        assert "error" not in outcome, outcome.get("error")
        assert outcome["called"].coalesce_status is COLLECTED
        assert job_state(engine, job_id) == "ready"
        return

    holder_engine = sa.create_engine(database_url)
    try:
        with holder_engine.connect() as connection:
            transaction = connection.begin()
            # What the dispatcher or a discard does: hold the scheduled execution's row.
            connection.execute(
                sa.select(SCHEDULED.c.id).where(SCHEDULED.c.job_id == job_id).with_for_update()
            ).one()
            caller, outcome = _call_in_thread(app, jobs.collect_dispatch, "k", 2, wait=60)
            caller.join(timeout=PROMPT)
            hung = caller.is_alive()
            transaction.rollback()
        caller.join(timeout=60)
    finally:
        holder_engine.dispose()

    assert not hung, "the filling call waited for the locked scheduled execution"
    assert "error" not in outcome, outcome.get("error")
    filler = outcome["called"]
    assert (filler.coalesce_status, filler.provider_job_id) == (COLLECTED, job_id)
    assert key_rows(engine) == {}  # sealed all the same: the next call opens a new job
    assert job_state(engine, job_id) == "scheduled"
    assert scheduled_at(engine, job_id) == due
    assert len(call_ids(engine, job_id)) == 2
    after = later(app, jobs.collect_dispatch, "k", 3, wait=60)
    assert after.coalesce_status is CREATED


# -- f. a database failure on a coalesced enqueue -----------------------------------------------


def _failing_store_for(account: str) -> t.Callable[..., None]:
    """``_store_calls`` that fails on the database (a statement on a table that doesn't
    exist) for the calls of ``account``."""
    original = coalesce_operation._store_calls

    def store(connection: sa.Connection, job_id: int, calls: list[t.Any], now: t.Any) -> None:
        if calls[0].job.arguments[0] == account:
            connection.execute(sa.text("SELECT missing FROM seams_coalesce_no_such_table"))
        original(connection, job_id, calls, now)

    return store


def test_a_database_failure_on_a_single_coalesced_enqueue_raises_enqueue_error_storing_nothing(
    app, engine, monkeypatch
):
    monkeypatch.setattr(coalesce_operation, "_store_calls", _failing_store_for("k"))
    with app.app_context():
        job = jobs.collect.new("k", 1)
        with sent(signals.coalesce) as coalesced, sent(signals.enqueue) as enqueued:
            with pytest.raises(EnqueueError) as raised:
                job.perform_later()

    assert isinstance(raised.value.__cause__, sa.exc.DBAPIError)
    assert (job.coalesce_status, job.provider_job_id, job.successfully_enqueued) == (
        None,
        None,
        False,
    )
    assert (coalesced, enqueued) == ([], [])
    assert stored_counts(engine) == (0, 0, 0)


def test_a_database_failure_in_a_bulk_coalesced_enqueue_raises_the_original_error(
    app, engine, monkeypatch
):
    monkeypatch.setattr(coalesce_operation, "_store_calls", _failing_store_for("b"))
    with app.app_context():
        batch = [jobs.collect.new("a", 1), jobs.collect.new("b", 1), jobs.collect.new("c", 1)]
        with pytest.raises(sa.exc.DBAPIError):
            support.solidq.perform_all_later(batch)

    admitted, failed, later_call = batch
    # The key before it is committed with its outcome; the failed one and those after have none.
    assert admitted.coalesce_status is CREATED
    assert job_state(engine, admitted.provider_job_id) == "ready"
    assert admitted.successfully_enqueued is True
    for job in (failed, later_call):
        assert (job.coalesce_status, job.provider_job_id) == (None, None)
        assert not job.successfully_enqueued
    assert stored_counts(engine) == (1, 1, 1)


# -- g. signals.enqueue and coalesce_status -----------------------------------------------------


def test_enqueue_receivers_read_each_single_calls_coalesce_status(app, engine):
    seen: list[tuple[t.Any, ...]] = []

    def receiver(sender: t.Any, job: t.Any) -> None:
        seen.append((job.job_id, job.coalesce_status, job.provider_job_id))

    with app.app_context(), signals.enqueue.connected_to(receiver):
        calls = [
            jobs.dedupe.perform_later("s", 1),
            jobs.dedupe.perform_later("s", 2),  # discarded, and still announced (single)
            jobs.collect.perform_later("s", 1),
            jobs.collect.perform_later("s", 2),
            jobs.replace.perform_later("s", 1),
            jobs.replace.perform_later("s", 2),
        ]

    assert seen == [(call.job_id, call.coalesce_status, call.provider_job_id) for call in calls]
    assert [status for _id, status, _job in seen] == [
        CREATED,
        DISCARDED,
        CREATED,
        COLLECTED,
        CREATED,
        REPLACED,
    ]


def test_enqueue_receivers_read_coalesce_status_in_bulk_for_the_calls_stored(app, engine):
    seen: list[tuple[t.Any, ...]] = []

    def receiver(sender: t.Any, job: t.Any) -> None:
        seen.append((job.job_id, job.coalesce_status))

    with app.app_context(), signals.enqueue.connected_to(receiver):
        batch = [
            jobs.dedupe.new("b", 1),
            jobs.dedupe.new("b", 2),
            jobs.replace.new("b", 1),
            jobs.replace.new("b", 2),
            jobs.collect.new("b", 1),
            jobs.collect.new("b", 2),
        ]
        support.solidq.perform_all_later(batch)

    stored = [job for job in batch if job.successfully_enqueued]
    assert [job.coalesce_status for job in stored] == [CREATED, CREATED, CREATED, COLLECTED]
    assert sorted(seen) == sorted((job.job_id, job.coalesce_status) for job in stored)


# -- h. perform_after_commit with coalesced jobs ------------------------------------------------


def test_perform_after_commit_admits_coalesced_calls_at_the_commit_and_none_on_rollback(
    app, engine, products
):
    with app.app_context(), sent(signals.coalesce) as coalesced:
        support.db.session.add(products(name="written"))
        support.db.session.flush()
        batch = [
            jobs.collect.new("k", 1),
            jobs.collect.new("k", 2),
            jobs.dedupe.new("d", "a"),
            jobs.dedupe.new("d", "b"),
        ]
        support.solidq.perform_after_commit(*batch)
        assert [(job.coalesce_status, job.provider_job_id) for job in batch] == [(None, None)] * 4
        assert stored_counts(engine) == (0, 0, 0)
        assert coalesced == []

        support.db.session.commit()

        assert [job.coalesce_status for job in batch] == [CREATED, COLLECTED, CREATED, DISCARDED]
        assert [job.successfully_enqueued for job in batch] == [True, True, True, False]
        assert [payload["status"] for payload in coalesced] == [
            "created",
            "collected",
            "created",
            "discarded",
        ]
        assert batch[0].provider_job_id == batch[1].provider_job_id
        assert batch[2].provider_job_id == batch[3].provider_job_id
        assert stored_counts(engine) == (2, 1, 2)  # the collecting job filled (max_calls 2)

        support.db.session.add(products(name="rolled back"))
        support.db.session.flush()
        dropped = jobs.collect.new("k", 3)
        support.solidq.perform_after_commit(dropped)
        support.db.session.rollback()

    assert (dropped.coalesce_status, dropped.provider_job_id) == (None, None)
    assert len(coalesced) == 4
    assert stored_counts(engine) == (2, 1, 2)


# -- i. a deleted record that comes back --------------------------------------------------------


def test_a_collected_calls_record_that_comes_back_runs_on_a_later_attempt(app, engine, products):
    with app.app_context():
        kept, gone = products(name="kept"), products(name="gone")
        support.db.session.add_all([kept, gone])
        support.db.session.commit()
        kept_id, gone_id = kept.id, gone.id
        first = run_jobs.collect_products_retried.perform_later(kept)
        run_jobs.collect_products_retried.perform_later(gone)
    ids = call_ids(engine, first.provider_job_id)
    table = products.__table__
    with engine.begin() as connection:
        connection.execute(table.delete().where(table.c.id == gone_id))

    with sent(signals.drop_coalesced_call) as dropped:
        assert run(app, engine) == {first.provider_job_id: OutcomeKind.RETRIED}
    assert [payload["call_id"] for payload in dropped] == [ids[1]]

    with engine.begin() as connection:  # the record comes back, with its id
        connection.execute(table.insert().values(id=gone_id, name="back"))
    with sent(signals.drop_coalesced_call) as dropped_again:
        assert run(app, engine) == {first.provider_job_id: OutcomeKind.FINISHED}

    assert dropped_again == []
    name = "coalesce_run_test.collect_products_retried"
    assert run_jobs.PERFORMED == [
        (name, [(ids[0], kept_id)]),
        (name, [(ids[0], kept_id), (ids[1], gone_id)]),
    ]


# -- j. a collecting job whose definition is gone -----------------------------------------------


def test_a_collecting_job_whose_definition_is_gone_fails_with_its_calls_and_runs_them_once_back(
    app, engine
):
    ran: list[list[t.Any]] = []

    # Defined inside the test: once forgotten, no import path can load it (a removed job).
    @support.solidq.job(name=f"{P}vanishing")
    @coalesce(key="all", on_conflict="collect")
    def vanishing(calls: list[t.Any]) -> None:
        ran.append([(call.id, call.args) for call in calls])

    try:
        first = later(app, vanishing, 1)
        later(app, vanishing, 2)
        ids = call_ids(engine, first.provider_job_id)
        registry.unregister(vanishing)  # the deploy removes it

        assert run(app, engine) == {first.provider_job_id: OutcomeKind.FAILED}
        assert ran == []
        assert failure_class(engine, first.provider_job_id) == class_path(errors.JobNotFound)
        assert call_ids(engine, first.provider_job_id) == ids
        assert key_rows(engine) == {}  # a call now opens a new job

        registry.register(vanishing)  # the next deploy brings it back
        with app.app_context():
            assert support.solidq.retry(first.provider_job_id) == 1
        assert run(app, engine) == {first.provider_job_id: OutcomeKind.FINISHED}
    finally:
        registry.unregister(vanishing)

    assert ran == [[(ids[0], (1,)), (ids[1], (2,))]]


# -- k. changing on_full, debounce, max_wait or the key while calls wait ------------------------


def test_on_full_switched_to_dispatch_dispatches_a_waiting_job_when_a_call_fills_it(
    app, engine, monkeypatch
):
    opener = later(app, jobs.collect, "k", 1, wait=60)
    assert job_state(engine, opener.provider_job_id) == "scheduled"
    deploy(monkeypatch, jobs.collect, on_full=OnFull.DISPATCH)

    filler = later(app, jobs.collect, "k", 2, wait=60)

    assert (filler.coalesce_status, filler.provider_job_id) == (COLLECTED, opener.provider_job_id)
    assert job_state(engine, opener.provider_job_id) == "ready"


def test_on_full_switched_to_wait_leaves_a_job_that_fills_waiting_for_its_time(
    app, engine, monkeypatch
):
    opener = later(app, jobs.collect_dispatch, "k", 1, wait=60)
    due = scheduled_at(engine, opener.provider_job_id)
    deploy(monkeypatch, jobs.collect_dispatch, on_full=OnFull.WAIT)

    filler = later(app, jobs.collect_dispatch, "k", 2, wait=60)

    assert (filler.coalesce_status, filler.provider_job_id) == (COLLECTED, opener.provider_job_id)
    assert key_rows(engine) == {}  # sealed
    assert job_state(engine, opener.provider_job_id) == "scheduled"
    assert scheduled_at(engine, opener.provider_job_id) == due


def test_debounce_added_by_a_deploy_moves_a_waiting_job_and_removed_again_keeps_its_time(
    app, engine, monkeypatch
):
    opener = later(app, jobs.dedupe, "k", "a", wait=60)
    job_id = opener.provider_job_id
    deploy(monkeypatch, jobs.dedupe, debounce=300.0)

    before = utcnow()
    moving = later(app, jobs.dedupe, "k", "b")
    assert (moving.coalesce_status, moving.provider_job_id) == (DISCARDED, job_id)
    moved_to = scheduled_at(engine, job_id)
    assert near(moved_to, before + dt.timedelta(seconds=300))

    monkeypatch.undo()  # the next deploy takes debounce away again
    kept = later(app, jobs.dedupe, "k", "c", wait=900)
    assert (kept.coalesce_status, kept.provider_job_id) == (DISCARDED, job_id)
    assert scheduled_at(engine, job_id) == moved_to


def test_max_wait_raised_by_a_deploy_lets_the_next_call_move_the_job_past_the_old_cap(
    app, engine, monkeypatch
):
    opener = later(app, jobs.debounced, "k", "a")
    job_id = opener.provider_job_id
    opened_at = job_row(engine, job_id).created_at
    capped = later(app, jobs.debounced, "k", "b", wait=100)
    assert capped.coalesce_status is DISCARDED
    assert near(scheduled_at(engine, job_id), opened_at + dt.timedelta(seconds=40))

    deploy(monkeypatch, jobs.debounced, max_wait=1000.0)
    before = utcnow()
    moving = later(app, jobs.debounced, "k", "c", wait=100)

    assert (moving.coalesce_status, moving.provider_job_id) == (DISCARDED, job_id)
    assert near(scheduled_at(engine, job_id), before + dt.timedelta(seconds=100))


def test_a_key_changed_by_a_deploy_opens_new_jobs_and_the_waiting_job_runs_its_calls(
    app, engine, monkeypatch, performed
):
    first = later(app, jobs.collect, "k", 1)
    old_key = f"{P}collect/k"
    assert key_rows(engine) == {old_key: (first.provider_job_id, 1)}
    deploy(monkeypatch, jobs.collect, key=lambda account, *_: f"v2-{account}")

    opener = later(app, jobs.collect, "k", 2)

    assert opener.coalesce_status is CREATED
    assert opener.provider_job_id != first.provider_job_id
    assert key_rows(engine) == {
        old_key: (first.provider_job_id, 1),
        f"{P}collect/v2-k": (opener.provider_job_id, 1),
    }
    assert run(app, engine) == {
        first.provider_job_id: OutcomeKind.FINISHED,
        opener.provider_job_id: OutcomeKind.FINISHED,
    }
    first_call = call_ids(engine, first.provider_job_id)
    opener_call = call_ids(engine, opener.provider_job_id)
    assert sorted(performed) == [
        (f"{P}collect", [(first_call[0], ("k", 1))]),
        (f"{P}collect", [(opener_call[0], ("k", 2))]),
    ]
    assert key_rows(engine) == {}


# -- l. a deadlock inside the caller's own transaction ------------------------------------------


def _server_session_id(session: t.Any) -> int:
    """The database server's id of the connection ``session``'s transaction runs on."""
    postgres = session.get_bind().dialect.name == "postgresql"
    query = "SELECT pg_backend_pid()" if postgres else "SELECT CONNECTION_ID()"
    return int(session.execute(sa.text(query)).scalar_one())


def _blocked(engine: sa.Engine, session_id: int) -> bool:
    """Whether the server session ``session_id`` is stuck in a statement: on PostgreSQL
    waiting for a lock; on MariaDB running one for over 200 ms (its own statements take a few
    milliseconds). Asked of that session alone: a count of the server's lock waits also
    counted the other test processes' (and MariaDB's ``innodb_trx`` once showed none for 20 s
    while the caller waited 50)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE pid = :id AND wait_event_type = 'Lock'"
        if engine.dialect.name == "postgresql"
        else "SELECT count(*) FROM information_schema.processlist"
        " WHERE id = :id AND command = 'Query' AND time_ms > 200"
    )
    with engine.connect() as connection:
        return bool(connection.execute(sa.text(query), {"id": session_id}).scalar())


def _deadlock_the_callers_transaction(
    app: Flask, engine: sa.Engine, database_url: str, products: t.Any, enqueue: t.Callable[[], None]
) -> BaseException | None:
    """Run ``enqueue`` inside the app session's transaction, which has updated a product
    row, while another transaction holds the coalesce key's row and then asks for that
    product: a real deadlock, whose victim is the caller (on PostgreSQL it waits first and
    checks first; on MariaDB the other transaction has written more, so it's the heavier).
    Returns what ``enqueue`` raised."""
    other = sa.create_engine(database_url)
    table = products.__table__
    problems: list[BaseException] = []
    with app.app_context():
        product = products(name="before")
        support.db.session.add(product)
        support.db.session.commit()
        product_id = product.id
    try:
        with other.connect() as connection:
            transaction = connection.begin()
            if engine.dialect.name == "postgresql":
                connection.exec_driver_sql("SET LOCAL deadlock_timeout = '20s'")
            connection.execute(table.insert(), [{"name": f"weight {i}"} for i in range(30)])
            connection.execute(
                sa.select(COALESCE_KEYS.c.id)
                .where(COALESCE_KEYS.c.key == f"{P}dedupe/k")
                .with_for_update()
            ).one()

            def close_the_circle(caller: int) -> None:
                try:
                    support.wait_until(lambda: _blocked(other, caller), timeout=20)
                    connection.execute(
                        table.update().where(table.c.id == product_id).values(name="other")
                    )
                    transaction.commit()
                except BaseException as error:  # noqa: BLE001 - reported by the test
                    problems.append(error)

            with app.app_context():
                session = support.db.session
                session.get(products, product_id).name = "caller"
                session.flush()  # the caller's transaction holds the product's row
                if engine.dialect.name == "postgresql":
                    session.execute(sa.text("SET LOCAL deadlock_timeout = '200ms'"))
                closer = threading.Thread(
                    target=close_the_circle, args=(_server_session_id(session),)
                )
                closer.start()
                raised: BaseException | None = None
                try:
                    enqueue()
                except BaseException as error:  # noqa: BLE001 - returned to the test
                    raised = error
                session.rollback()
            closer.join(timeout=60)
            if transaction.is_active:
                transaction.rollback()
    finally:
        other.dispose()
    assert problems == []
    with engine.connect() as connection:
        names = connection.scalars(sa.select(table.c.name).where(table.c.id == product_id)).all()
    assert names == ["other"]  # the other transaction went through
    return raised


@pytest.mark.parametrize("shape", ["single", "bulk"])
def test_a_deadlock_inside_the_callers_transaction_reaches_the_caller_and_stores_nothing_twice(
    app, engine, database_url, products, monkeypatch, shape
):
    pending = later(app, jobs.dedupe, "k", "pending")  # the key's open job
    call = jobs.dedupe.new("k", "in the caller's transaction")

    def enqueue() -> None:
        if shape == "single":
            call.perform_later()
        else:
            support.solidq.perform_all_later([call])

    if engine.dialect.name == "sqlite":
        # SQLite has no row locks: the caller's flush holds the only write lock, so nothing
        # can deadlock with it. The driver's error stands in for one, to hold the rule: inside
        # the caller's transaction an admission is tried once, never again.
        attempts: list[int] = []

        def deadlocked(*_args: t.Any) -> t.NoReturn:
            attempts.append(1)
            raise sa.exc.OperationalError(
                "SELECT", {}, sqlite3.OperationalError("database is locked")
            )

        monkeypatch.setattr(coalesce_operation, "_admit_in_transaction", deadlocked)
        with app.app_context():
            support.db.session.add(products(name="caller"))
            support.db.session.flush()
            with pytest.raises(Exception) as caught:
                enqueue()
            support.db.session.rollback()
        raised: BaseException | None = caught.value
        assert attempts == [1]
    else:
        raised = _deadlock_the_callers_transaction(app, engine, database_url, products, enqueue)

    if shape == "single":
        assert isinstance(raised, EnqueueError), raised
        assert solidq_db.is_deadlock(t.cast(BaseException, raised.__cause__))
        assert call.successfully_enqueued is False
    else:
        assert isinstance(raised, sa.exc.DBAPIError), raised
        assert solidq_db.is_deadlock(raised)
    assert (call.coalesce_status, call.provider_job_id) == (None, None)
    # Nothing stored twice, nothing half-stored: the key's one job, as before.
    assert [row.id for row in support.rows(engine, JOBS)] == [pending.provider_job_id]
    assert key_rows(engine) == {f"{P}dedupe/k": (pending.provider_job_id, 0)}


# -- m. the README's monitoring queries ---------------------------------------------------------


def readme_monitoring(session: t.Any) -> tuple[int, dt.datetime | None, int, int]:
    """The README's queries (Monitoring coalescing), as it shows them."""
    waiting = CoalescedCall.waiting().subquery()
    count, oldest_at = session.execute(
        sa.select(sa.func.count(), sa.func.min(waiting.c.created_at)).select_from(waiting)
    ).one()  # oldest_at is an aware UTC datetime, or None when nothing waits

    oldest_alone = session.scalar(  # the oldest alone, in milliseconds at any size
        sa.select(waiting.c.created_at).order_by(waiting.c.created_at).limit(1)
    )
    assert oldest_alone == oldest_at

    failed_jobs = session.scalar(  # failed collecting jobs...
        sa.select(sa.func.count())
        .select_from(FailedExecution)
        .where(FailedExecution.job_id.in_(sa.select(CoalescedCall.job_id)))
    )
    failed_calls = session.scalar(  # ...and the calls stuck in them
        sa.select(sa.func.count())
        .select_from(CoalescedCall)
        .where(CoalescedCall.job_id.in_(sa.select(FailedExecution.job_id)))
    )
    return count, oldest_at, failed_jobs, failed_calls


def test_the_readmes_monitoring_queries_return_what_it_says(app, engine):
    with app.app_context():
        assert readme_monitoring(support.db.session) == (0, None, 0, 0)

    waiting = later(app, jobs.collect, "w", 1, wait=600)  # scheduled
    later(app, jobs.collect, "w", 2, wait=600)
    failing = later(app, jobs.collect_failing, "f", 1)
    later(app, jobs.collect_failing, "f", 2)
    later(app, jobs.collect_failing, "f", 3)
    first_waiting_call = support.rows(
        engine, COALESCED_CALLS, COALESCED_CALLS.c.job_id == waiting.provider_job_id
    )[0]

    with app.app_context():
        count, oldest_at, failed_jobs, failed_calls = readme_monitoring(support.db.session)
    assert (count, failed_jobs, failed_calls) == (5, 0, 0)
    assert oldest_at is not None and oldest_at.utcoffset() == dt.timedelta(0)

    assert run(app, engine) == {failing.provider_job_id: OutcomeKind.FAILED}
    with app.app_context():
        count, oldest_at, failed_jobs, failed_calls = readme_monitoring(support.db.session)
    assert (count, failed_jobs, failed_calls) == (2, 1, 3)
    assert oldest_at == first_waiting_call.created_at
    assert oldest_at.utcoffset() == dt.timedelta(0)


# -- n. no coalesce signal on a retry or a start ------------------------------------------------


def test_no_coalesce_signal_is_sent_for_a_start_a_retry_or_a_manual_retry(app, engine):
    retried = later(app, jobs.collect_retried, "r", 1)
    failing = later(app, jobs.collect_failing, "f", 1)

    with sent(signals.coalesce) as coalesced:
        outcomes = run(app, engine)  # both start; one retries by its rule, one fails
        assert outcomes == {
            retried.provider_job_id: OutcomeKind.RETRIED,
            failing.provider_job_id: OutcomeKind.FAILED,
        }
        with app.app_context():
            assert support.solidq.retry(failing.provider_job_id) == 1
        assert run(app, engine) == {
            retried.provider_job_id: OutcomeKind.FINISHED,
            failing.provider_job_id: OutcomeKind.FAILED,
        }

    assert coalesced == []
    assert len(jobs.PERFORMED) == 4

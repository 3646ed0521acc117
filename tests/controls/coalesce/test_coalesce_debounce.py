"""Debounce and ``max_wait`` through the database, on every backend (seed 003: "Debouncing",
"Scheduling timelines", "Collecting jobs and scheduling", and the debounce steps of "Sync the
latest state one at a time, under an API quota").

No test waits real seconds. A call's own time is bracketed by ``utcnow()`` taken around it,
and elapsed time is simulated by moving every stored time back (:func:`pass_time`): the
job's schedule, its row's times and the key's ``created_at``, when the job opened.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import CoalesceStatus
from flask_solidq import models
from flask_solidq.operations import dispatch
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import coalesce_debounce as jobs
from tests.support import make_due
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
KEYS = t.cast(sa.Table, models.CoalesceKey.__table__)

#: Rounding slack when comparing a stored time with a bracket of ``utcnow()``.
SLACK = dt.timedelta(milliseconds=5)

#: How long a call may take before the lock test calls it hung.
PROMPT = 5.0

WINDOW = dt.timedelta(seconds=jobs.WINDOW)
CAP = dt.timedelta(seconds=jobs.CAP)

#: The stored times :func:`pass_time` moves back.
TIMES = (
    (SCHEDULED, ("scheduled_at",)),
    (JOBS, ("scheduled_at", "created_at", "updated_at")),
    (KEYS, ("created_at", "updated_at")),
)


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    jobs.PERFORMED.clear()
    yield jobs.PERFORMED
    jobs.PERFORMED.clear()


class Called(t.NamedTuple):
    """An enqueued call, and ``utcnow()`` just before and just after it."""

    job: t.Any
    before: dt.datetime
    after: dt.datetime

    @property
    def id(self) -> int:
        return t.cast(int, self.job.provider_job_id)

    @property
    def status(self) -> CoalesceStatus | None:
        return t.cast("CoalesceStatus | None", self.job.coalesce_status)


def call(app: Flask, definition: t.Any, *args: t.Any, **options: t.Any) -> Called:
    """``definition.set(**options).perform_later(*args)``, bracketed by ``utcnow()``."""
    with app.app_context():
        target = definition.set(**options) if options else definition
        before = utcnow()
        job = target.perform_later(*args)
        after = utcnow()
    return Called(job, before, after)


def call_all(app: Flask, batch: list[t.Any]) -> tuple[dt.datetime, dt.datetime]:
    """``perform_all_later(batch)``; returns ``utcnow()`` just before and just after."""
    with app.app_context():
        before = utcnow()
        support.solidq.perform_all_later(batch)
        after = utcnow()
    return before, after


def pass_time(engine: sa.Engine, seconds: float) -> None:
    """Pretend ``seconds`` went by: move every stored time the debounce rules read back."""
    delta = dt.timedelta(seconds=seconds)
    with engine.begin() as connection:
        for table, columns in TIMES:
            selected = [table.c[column] for column in columns]
            for row in connection.execute(sa.select(table.c.id, *selected)).all():
                values = {
                    column: getattr(row, column) - delta
                    for column in columns
                    if getattr(row, column) is not None
                }
                connection.execute(table.update().where(table.c.id == row.id).values(values))


def scheduled_at(engine: sa.Engine, job_id: int) -> dt.datetime | None:
    """When the job's scheduled execution comes due; None when it isn't scheduled."""
    found = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id == job_id)
    return found[0].scheduled_at if found else None


def job_row(engine: sa.Engine, job_id: int) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return row


def opened_at(engine: sa.Engine, job_id: int) -> dt.datetime:
    """When the open job ``job_id`` opened: its key's ``created_at``."""
    (row,) = support.rows(engine, KEYS, KEYS.c.job_id == job_id)
    return t.cast(dt.datetime, row.created_at)


def assert_due(
    engine: sa.Engine, job_id: int, earliest: dt.datetime, latest: dt.datetime
) -> dt.datetime:
    """Assert the job is scheduled, due between ``earliest`` and ``latest`` (its execution and
    its row agree); return that time."""
    due = scheduled_at(engine, job_id)
    assert due is not None, f"job {job_id} is {job_state(engine, job_id)}, not scheduled"
    assert earliest - SLACK <= due <= latest + SLACK, (due, earliest, latest)
    assert job_row(engine, job_id).scheduled_at == due
    return due


def assert_window_after(engine: sa.Engine, job_id: int, called: Called, window: dt.timedelta):
    """Assert the job comes due ``window`` after ``called``."""
    return assert_due(engine, job_id, called.before + window, called.after + window)


@contextlib.contextmanager
def scheduled_updates(engine: sa.Engine) -> t.Iterator[list[str]]:
    """Collect the UPDATE statements on solidq_scheduled_executions run inside the block."""
    seen: list[str] = []

    def listener(_conn: t.Any, _cursor: t.Any, statement: str, *_: t.Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE SOLIDQ_SCHEDULED_EXECUTIONS"):
            seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", listener)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", listener)


# Rule 1 and 2: set(wait=)/set(wait_until=) replaces the window; otherwise now + debounce.


def test_a_plain_call_on_a_debounced_definition_waits_for_the_window_instead_of_running(
    app, engine
):
    opened = call(app, jobs.capped, "k")

    assert opened.status is CoalesceStatus.CREATED
    assert job_state(engine, opened.id) == "scheduled"
    assert_window_after(engine, opened.id, opened, WINDOW)


def test_without_debounce_a_plain_call_opens_a_job_that_runs_right_away(app, engine):
    opened = call(app, jobs.fixed, "k")

    assert opened.status is CoalesceStatus.CREATED
    assert job_state(engine, opened.id) == "ready"


def test_set_wait_replaces_the_window_for_that_call(app, engine):
    opened = call(app, jobs.capped, "k", wait=5)

    assert_window_after(engine, opened.id, opened, dt.timedelta(seconds=5))


def test_set_wait_until_replaces_the_window_for_that_call(app, engine):
    moment = (utcnow() + dt.timedelta(seconds=12)).replace(microsecond=0)
    opened = call(app, jobs.capped, "k", wait_until=moment)

    assert_due(engine, opened.id, moment, moment)


def test_a_creating_call_asking_for_more_than_max_wait_is_capped_without_raising(app, engine):
    waiting = call(app, jobs.capped, "wait", wait=300)
    until = call(app, jobs.capped, "until", wait_until=utcnow() + dt.timedelta(hours=2))

    for opened in (waiting, until):
        assert opened.status is CoalesceStatus.CREATED
        due = assert_window_after(engine, opened.id, opened, CAP)
        assert due == opened_at(engine, opened.id) + CAP


def test_a_joining_call_cannot_move_the_job_past_max_wait_from_when_it_opened(app, engine):
    opened = call(app, jobs.capped, "k")
    pass_time(engine, 35)  # the job opened 35 s ago, and is due 5 s ago

    joined = call(app, jobs.capped, "k", "asks for now + 30")
    assert joined.status is CoalesceStatus.DISCARDED
    assert joined.id == opened.id
    # It asked for 30 s from now; held to 40 s after the opening, 5 s from now.
    assert job_state(engine, opened.id) == "scheduled"
    assert scheduled_at(engine, opened.id) == opened_at(engine, opened.id) + CAP
    assert job_row(engine, opened.id).scheduled_at == opened_at(engine, opened.id) + CAP

    # A longer set(wait=) is capped the same way, without raising.
    pass_time(engine, 2)
    longer = call(app, jobs.capped, "k", wait=600)
    assert longer.status is CoalesceStatus.DISCARDED
    assert scheduled_at(engine, opened.id) == opened_at(engine, opened.id) + CAP


def test_without_max_wait_a_joining_call_moves_the_job_as_far_as_it_asks(app, engine):
    opened = call(app, jobs.debounced, "k")
    pass_time(engine, 3600)

    joined = call(app, jobs.debounced, "k", wait=600)

    assert joined.status is CoalesceStatus.DISCARDED
    assert_window_after(engine, opened.id, joined, dt.timedelta(seconds=600))


def test_without_debounce_a_joining_call_does_not_move_the_job_even_asking_for_later(app, engine):
    opened = call(app, jobs.fixed, "k", wait=30)
    due = assert_window_after(engine, opened.id, opened, WINDOW)

    joined = call(app, jobs.fixed, "k", wait=300)

    assert joined.status is CoalesceStatus.DISCARDED
    assert scheduled_at(engine, opened.id) == due


# A job only moves later, by more than a second.


def test_a_call_with_a_shorter_wait_joins_without_pulling_the_job_forward(app, engine):
    opened = call(app, jobs.capped, "k")
    due = scheduled_at(engine, opened.id)

    joined = call(app, jobs.capped, "k", wait=5)

    assert joined.status is CoalesceStatus.DISCARDED
    assert joined.id == opened.id
    assert scheduled_at(engine, opened.id) == due


def test_set_wait_zero_on_a_waiting_job_does_not_run_it_sooner(app, engine):
    opened = call(app, jobs.capped, "k")
    pass_time(engine, 10)
    row = job_row(engine, opened.id)

    joined = call(app, jobs.capped, "k", wait=0)

    assert joined.status is CoalesceStatus.DISCARDED
    assert job_state(engine, opened.id) == "scheduled"
    assert scheduled_at(engine, opened.id) == row.scheduled_at
    assert job_row(engine, opened.id) == row


def test_set_wait_zero_opening_a_new_job_makes_it_ready_at_once_and_nothing_moves_it(app, engine):
    opened = call(app, jobs.capped, "k", wait=0)
    assert opened.status is CoalesceStatus.CREATED
    assert job_state(engine, opened.id) == "ready"
    row = job_row(engine, opened.id)

    joined = call(app, jobs.capped, "k")  # asks for now + 30

    assert joined.status is CoalesceStatus.DISCARDED
    assert joined.id == opened.id
    assert job_state(engine, opened.id) == "ready"
    assert job_row(engine, opened.id) == row


def test_a_move_less_than_a_second_later_writes_nothing(app, engine):
    opened = call(app, jobs.capped, "k")
    pass_time(engine, 0.5)
    row = job_row(engine, opened.id)
    due = scheduled_at(engine, opened.id)

    with scheduled_updates(engine) as updates:
        joined = call(app, jobs.capped, "k")  # asks for about 0.5 s later than the job's time

    assert joined.status is CoalesceStatus.DISCARDED
    assert updates == []
    assert scheduled_at(engine, opened.id) == due
    assert job_row(engine, opened.id) == row  # updated_at too


def test_a_move_more_than_a_second_later_is_written(app, engine):
    opened = call(app, jobs.capped, "k")
    pass_time(engine, 1.5)
    row = job_row(engine, opened.id)

    joined = call(app, jobs.capped, "k")

    assert joined.status is CoalesceStatus.DISCARDED
    assert_window_after(engine, opened.id, joined, WINDOW)
    moved = job_row(engine, opened.id)
    assert joined.before - SLACK <= moved.updated_at <= joined.after + SLACK
    assert moved.updated_at > row.updated_at


# Only a scheduled job moves.


def test_a_ready_job_stays_as_it_is_and_the_call_still_joins(app, engine):
    opened = call(app, jobs.capped, "k")
    make_due(engine, opened.id)
    assert dispatch.dispatch_due(engine, 10) == 1
    assert job_state(engine, opened.id) == "ready"
    row = job_row(engine, opened.id)

    joined = call(app, jobs.capped, "k")

    assert joined.status is CoalesceStatus.DISCARDED
    assert joined.id == opened.id
    assert job_state(engine, opened.id) == "ready"
    assert scheduled_at(engine, opened.id) is None
    assert job_row(engine, opened.id) == row


def test_a_blocked_job_stays_as_it_is_and_the_call_still_joins(app, engine):
    running = call(app, jobs.blocked, "a", wait=0)
    assert job_state(engine, running.id) == "ready"  # holds the one slot
    waiting = call(app, jobs.blocked, "b", wait=0)
    assert job_state(engine, waiting.id) == "blocked"
    row = job_row(engine, waiting.id)

    joined = call(app, jobs.blocked, "b")  # asks for now + 30

    assert joined.status is CoalesceStatus.DISCARDED
    assert joined.id == waiting.id
    assert job_state(engine, waiting.id) == "blocked"
    assert scheduled_at(engine, waiting.id) is None
    assert job_row(engine, waiting.id) == row


def test_a_claimed_job_stays_as_it_is_and_the_call_still_joins(app, engine, performed):
    opened = call(app, jobs.capped, "k", "first", wait=0)
    (claimed,) = claim(engine)
    assert claimed.id == opened.id
    row = job_row(engine, opened.id)

    # Claimed but not started: the key is still held, so the call joins.
    joined = call(app, jobs.capped, "k", "second")

    assert joined.status is CoalesceStatus.DISCARDED
    assert joined.id == opened.id
    assert job_state(engine, opened.id) == "claimed"
    assert scheduled_at(engine, opened.id) is None
    assert job_row(engine, opened.id) == row
    finish(engine, perform(app, [claimed]))
    assert performed == [("coalesce_debounce_test.capped", ("k", "first"))]


def test_a_call_skips_a_job_whose_scheduled_execution_is_locked(app, engine, database_url):
    opened = call(app, jobs.capped, "k")
    pass_time(engine, 5)
    row = job_row(engine, opened.id)

    if engine.dialect.name == "sqlite":
        # SQLite has no row locks (a writer holds the whole database): nothing can hold the
        # scheduled execution apart from the call, which moves the job as usual.
        joined = call(app, jobs.capped, "k")
        assert joined.status is CoalesceStatus.DISCARDED
        assert_window_after(engine, opened.id, joined, WINDOW)
        return

    holder = sa.create_engine(database_url)
    outcome: dict[str, t.Any] = {}

    def make_the_call() -> None:
        started = time.monotonic()
        try:
            outcome["called"] = call(app, jobs.capped, "k")
        except BaseException as error:  # noqa: BLE001 - reported by the test below
            outcome["error"] = error
        outcome["seconds"] = time.monotonic() - started

    try:
        with holder.connect() as connection:
            transaction = connection.begin()
            # What the dispatcher or a discard does: hold the scheduled execution's row.
            connection.execute(
                sa.select(SCHEDULED.c.id).where(SCHEDULED.c.job_id == opened.id).with_for_update()
            ).one()
            caller = threading.Thread(target=make_the_call)
            caller.start()
            caller.join(timeout=PROMPT)
            hung = caller.is_alive()
            transaction.rollback()
        caller.join(timeout=60)
    finally:
        holder.dispose()

    assert not hung, "the call waited for the locked scheduled execution"
    assert "error" not in outcome, outcome.get("error")
    joined = outcome["called"]
    assert joined.status is CoalesceStatus.DISCARDED
    assert joined.id == opened.id
    assert outcome["seconds"] < PROMPT
    # Skipped, not moved: the job may run up to a window early, and still covers the call.
    assert scheduled_at(engine, opened.id) == row.scheduled_at
    assert job_row(engine, opened.id) == row


# The seed's scheduling timelines: calls A, B and C at 0, 10 and 20 seconds.


def _seconds(delta: dt.timedelta) -> float:
    return delta.total_seconds()


def test_timeline_a_fixed_wait_comes_due_30_seconds_after_the_first_call(app, engine):
    a = call(app, jobs.fixed, "k", "A", wait=30)
    origin = job_row(engine, a.id).created_at
    pass_time(engine, 10)
    b = call(app, jobs.fixed, "k", "B", wait=30)
    pass_time(engine, 10)
    c = call(app, jobs.fixed, "k", "C", wait=30)

    assert [a.status, b.status, c.status] == [
        CoalesceStatus.CREATED,
        CoalesceStatus.DISCARDED,
        CoalesceStatus.DISCARDED,
    ]
    assert a.id == b.id == c.id
    origin -= dt.timedelta(seconds=20)
    assert job_row(engine, a.id).created_at == origin
    # Never moved: due at 30, whatever B and C asked for.
    assert _seconds(t.cast(dt.datetime, scheduled_at(engine, a.id)) - origin) == pytest.approx(
        30, abs=0.01
    )


def test_timeline_a_debounce_comes_due_30_seconds_after_the_last_call(app, engine):
    a = call(app, jobs.debounced, "k", "A")
    pass_time(engine, 10)
    b = call(app, jobs.debounced, "k", "B")
    assert_window_after(engine, a.id, b, WINDOW)  # due at 40
    pass_time(engine, 10)
    c = call(app, jobs.debounced, "k", "C")

    assert [b.status, c.status] == [CoalesceStatus.DISCARDED, CoalesceStatus.DISCARDED]
    assert_window_after(engine, a.id, c, WINDOW)  # due at 50
    origin = job_row(engine, a.id).created_at
    due = t.cast(dt.datetime, scheduled_at(engine, a.id))
    real_elapsed = _seconds(c.after - a.before)
    assert 50 - 0.01 <= _seconds(due - origin) <= 50 + real_elapsed + 0.01


def test_timeline_a_debounce_with_max_wait_40_holds_c_to_40_seconds(app, engine):
    a = call(app, jobs.capped, "k", "A")
    pass_time(engine, 10)
    b = call(app, jobs.capped, "k", "B")
    pass_time(engine, 10)
    origin = opened_at(engine, a.id)
    after_b = scheduled_at(engine, a.id)
    c = call(app, jobs.capped, "k", "C")  # asks for 50

    assert [b.status, c.status] == [CoalesceStatus.DISCARDED, CoalesceStatus.DISCARDED]
    due = t.cast(dt.datetime, scheduled_at(engine, a.id))
    assert due == origin + CAP
    assert due >= t.cast(dt.datetime, after_b)
    assert due < c.before + WINDOW


def test_timeline_collect_until_2_calls_or_30_seconds(app, engine):
    a = call(app, jobs.collect_dispatch, "k", "A", wait=30)
    assert_window_after(engine, a.id, a, WINDOW)
    pass_time(engine, 10)
    b = call(app, jobs.collect_dispatch, "k", "B", wait=30)
    pass_time(engine, 10)
    c = call(app, jobs.collect_dispatch, "k", "C", wait=30)

    assert [a.status, b.status, c.status] == [
        CoalesceStatus.CREATED,
        CoalesceStatus.COLLECTED,
        CoalesceStatus.CREATED,
    ]
    assert b.id == a.id
    assert c.id != a.id
    # B filled job 1: it became ready as B's call committed, and its time moved to then.
    assert job_state(engine, a.id) == "ready"
    moved_to = job_row(engine, a.id).scheduled_at + dt.timedelta(seconds=10)  # undo C's pass
    assert b.before - SLACK <= moved_to <= b.after + SLACK
    # C opened job 2 with its own wait.
    assert_window_after(engine, c.id, c, WINDOW)


# Collecting and debounced.


def test_with_on_full_wait_the_filling_call_moves_the_job_and_nothing_moves_it_once_sealed(
    app, engine
):
    a = call(app, jobs.collect_wait_debounced, "k", 1)
    pass_time(engine, 5)
    b = call(app, jobs.collect_wait_debounced, "k", 2)  # fills job 1
    assert b.status is CoalesceStatus.COLLECTED
    assert b.id == a.id
    sealed_due = assert_window_after(engine, a.id, b, WINDOW)
    assert support.rows(engine, KEYS) == []  # sealed: the key has no open job

    pass_time(engine, 10)
    sealed_due -= dt.timedelta(seconds=10)
    c = call(app, jobs.collect_wait_debounced, "k", 3)
    assert c.status is CoalesceStatus.CREATED
    assert c.id != a.id
    assert_window_after(engine, c.id, c, WINDOW)
    pass_time(engine, 5)
    sealed_due -= dt.timedelta(seconds=5)
    d = call(app, jobs.collect_wait_debounced, "k", 4)  # fills job 2
    assert d.status is CoalesceStatus.COLLECTED
    assert d.id == c.id
    assert_window_after(engine, c.id, d, WINDOW)

    # Nothing moved the sealed job 1: still scheduled, at the time B gave it.
    assert scheduled_at(engine, a.id) == sealed_due
    assert job_state(engine, a.id) == "scheduled"


def test_with_on_full_dispatch_the_filling_call_dispatches_the_job_instead_of_moving_it(
    app, engine
):
    a = call(app, jobs.collect_dispatch_debounced, "k", 1)
    assert_window_after(engine, a.id, a, WINDOW)
    pass_time(engine, 10)

    b = call(app, jobs.collect_dispatch_debounced, "k", 2)

    assert b.status is CoalesceStatus.COLLECTED
    assert b.id == a.id
    assert job_state(engine, a.id) == "ready"
    assert scheduled_at(engine, a.id) is None
    # Its time is the moment it filled, not B + 30.
    moved_to = job_row(engine, a.id).scheduled_at
    assert b.before - SLACK <= moved_to <= b.after + SLACK


# max_wait's clock is per open job.


def test_a_new_job_after_one_fills_gets_a_full_max_wait(app, engine):
    a = call(app, jobs.collect_wait_debounced, "k", 1)
    pass_time(engine, 35)
    first_opened = opened_at(engine, a.id)
    b = call(app, jobs.collect_wait_debounced, "k", 2)  # fills job 1, capped at its 40 s
    assert b.id == a.id
    assert scheduled_at(engine, a.id) == first_opened + CAP

    c = call(app, jobs.collect_wait_debounced, "k", 3)
    assert c.status is CoalesceStatus.CREATED
    assert c.id != a.id
    # A full window, not job 1's remaining 5 s.
    assert_window_after(engine, c.id, c, WINDOW)
    second_opened = opened_at(engine, c.id)
    assert c.before - SLACK <= second_opened <= c.after + SLACK

    pass_time(engine, 20)
    d = call(app, jobs.collect_wait_debounced, "k", 4)  # asks for 50 s after job 2 opened
    assert d.id == c.id
    assert scheduled_at(engine, c.id) == second_opened - dt.timedelta(seconds=20) + CAP


def test_a_new_job_after_one_starts_gets_a_full_max_wait(app, engine, performed):
    a = call(app, jobs.capped, "k", "A")
    pass_time(engine, 35)
    make_due(engine, a.id)
    assert dispatch.dispatch_due(engine, 10) == 1
    (claimed,) = claim(engine)
    finish(engine, perform(app, [claimed]))  # starting freed the key
    assert performed == [("coalesce_debounce_test.capped", ("k", "A"))]

    b = call(app, jobs.capped, "k", "B")
    assert b.status is CoalesceStatus.CREATED
    assert b.id != a.id
    assert_window_after(engine, b.id, b, WINDOW)
    second_opened = opened_at(engine, b.id)

    pass_time(engine, 20)
    c = call(app, jobs.capped, "k", "C")  # asks for 50 s after job 2 opened
    assert c.id == b.id
    assert scheduled_at(engine, b.id) == second_opened - dt.timedelta(seconds=20) + CAP


# Bulk enqueues: one admission moves a job once, to the latest time among its calls.


def test_bulk_calls_of_one_key_move_the_job_once_to_the_latest_time_among_them(app, engine):
    opened = call(app, jobs.capped, "k")
    pass_time(engine, 5)  # the cap is now 35 s away
    with app.app_context():
        batch = [
            jobs.capped.new("k", 1).set(wait=27),
            jobs.capped.new("k", 2),
            jobs.capped.new("k", 3).set(wait=33),
            jobs.capped.new("k", 4).set(wait=10),
        ]
    with scheduled_updates(engine) as updates:
        before, after = call_all(app, batch)

    assert [job.coalesce_status for job in batch] == [CoalesceStatus.DISCARDED] * 4
    assert {job.provider_job_id for job in batch} == {opened.id}
    assert len(updates) == 1
    assert_due(
        engine, opened.id, before + dt.timedelta(seconds=33), after + dt.timedelta(seconds=33)
    )


def test_a_bulk_admission_that_opens_a_job_takes_the_latest_time_capped_at_max_wait(app, engine):
    with app.app_context():
        latest_wins = [
            jobs.capped.new("latest", 1).set(wait=5),
            jobs.capped.new("latest", 2).set(wait=35),
            jobs.capped.new("latest", 3),
        ]
        capped = [
            jobs.capped.new("capped", 1).set(wait=0),
            jobs.capped.new("capped", 2).set(wait=300),
        ]
    before, after = call_all(app, latest_wins + capped)

    assert [job.coalesce_status for job in latest_wins] == [
        CoalesceStatus.CREATED,
        CoalesceStatus.DISCARDED,
        CoalesceStatus.DISCARDED,
    ]
    first = latest_wins[0].provider_job_id
    assert_due(engine, first, before + dt.timedelta(seconds=35), after + dt.timedelta(seconds=35))
    second = capped[0].provider_job_id
    assert capped[1].provider_job_id == second
    assert scheduled_at(engine, second) == opened_at(engine, second) + CAP


# The "Sync the latest state" recipe: replace, debounce 10 s, one run at a time per user.


def test_a_replacing_call_moves_the_scheduled_job_to_10_seconds_after_it_never_earlier(app, engine):
    opened = call(app, jobs.sync_contact, 1, {"name": "old"})
    assert_window_after(engine, opened.id, opened, dt.timedelta(seconds=jobs.SYNC_WINDOW))
    pass_time(engine, 5)

    replaced = call(app, jobs.sync_contact, 1, {"name": "new"})
    assert replaced.status is CoalesceStatus.REPLACED
    due = assert_window_after(engine, opened.id, replaced, dt.timedelta(seconds=jobs.SYNC_WINDOW))

    sooner = call(app, jobs.sync_contact, 1, {"name": "newest"}, wait=1)
    assert sooner.status is CoalesceStatus.REPLACED
    assert scheduled_at(engine, opened.id) == due


def test_a_blocked_sync_keeps_taking_replacements_without_moving_and_runs_the_latest(
    app, engine, performed
):
    first = call(app, jobs.sync_contact, 1, {"v": 1}, wait=0)
    (running,) = claim(engine)
    (first_outcome,) = perform(app, [running])  # started and ran; its slot is still held
    assert first_outcome.kind is OutcomeKind.FINISHED

    pending = call(app, jobs.sync_contact, 1, {"v": 2})
    assert pending.status is CoalesceStatus.CREATED
    assert pending.id != first.id
    make_due(engine, pending.id)
    assert dispatch.dispatch_due(engine, 10) == 1
    assert job_state(engine, pending.id) == "blocked"
    blocked_at = job_row(engine, pending.id).scheduled_at

    replaced = call(app, jobs.sync_contact, 1, {"v": 3})

    assert replaced.status is CoalesceStatus.REPLACED
    assert replaced.id == pending.id
    assert job_state(engine, pending.id) == "blocked"
    assert scheduled_at(engine, pending.id) is None
    assert job_row(engine, pending.id).scheduled_at == blocked_at

    finish(engine, [first_outcome])  # frees the slot: the blocked sync becomes ready
    assert job_state(engine, pending.id) == "ready"
    finish(engine, perform(app, claim(engine)))
    assert performed == [
        ("coalesce_debounce_test.sync_contact", (1, {"v": 1})),
        ("coalesce_debounce_test.sync_contact", (1, {"v": 3})),
    ]


# Retries don't coalesce.


def test_a_retry_of_a_debounced_job_waits_its_retry_wait_not_the_window(app, engine, performed):
    opened = call(app, jobs.retried, "k")
    make_due(engine, opened.id)
    assert dispatch.dispatch_due(engine, 10) == 1
    (claimed,) = claim(engine)

    before = utcnow()
    (outcome,) = perform(app, [claimed])
    finish(engine, [outcome])
    after = utcnow()

    assert outcome.kind is OutcomeKind.RETRIED
    retry_wait = dt.timedelta(seconds=jobs.RETRY_WAIT)
    due = assert_due(engine, opened.id, before + retry_wait, after + retry_wait)

    # Later calls can't join the retry, nor move it: the key was freed when it started.
    later = call(app, jobs.retried, "k")
    assert later.status is CoalesceStatus.CREATED
    assert later.id != opened.id
    assert_window_after(engine, later.id, later, WINDOW)
    assert scheduled_at(engine, opened.id) == due

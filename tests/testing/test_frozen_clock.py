"""``frozen_clock`` and ``work_off`` (API.md section 9) on the real database, every backend:
a test steps through a rate limit, a debounce window, a retry's wait and a scheduled job in
milliseconds, and the jobs go through the real dispatch and claim. The jobs are in
:mod:`tests.jobs.clock`; each notes the frozen time it ran at.
"""

from __future__ import annotations

import datetime as dt
import threading
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import timing
from flask_solidq.config import Adapter
from flask_solidq.operations import claim
from flask_solidq.storage import database_clock
from flask_solidq.testing import frozen_clock
from flask_solidq.testing import in_process as work_off_module
from flask_solidq.testing import work_off
from tests import support
from tests.jobs import clock as jobs
from tests.support.concurrency import BLOCKED
from tests.support.concurrency import JOBS
from tests.support.concurrency import PROCESSES
from tests.support.concurrency import SCHEDULED

if t.TYPE_CHECKING:
    from flask import Flask

#: The process that claims a job and never finishes it.
HUNG = 4545
START = dt.datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=dt.timezone.utc)


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, tuple[t.Any, ...], dt.datetime]]]:
    jobs.PERFORMED.clear()
    jobs.BLOCKED_WHILE_SERIAL_RAN.clear()
    jobs.FAILURES["left"] = 0
    yield jobs.PERFORMED
    jobs.PERFORMED.clear()


def names(performed: list[t.Any]) -> list[t.Any]:
    return [(name, args) for name, args, _at in performed]


def test_the_issue_recipe_two_a_minute(app: Flask) -> None:
    """Enqueue 10 under to=2 per minute (burst=2): work_off, 2 ran; advance 60 s, work_off,
    one more: a backlog drains at ``to - burst + 1`` a minute, so no minute holds more than 2
    (docs/rate-limits.md); the next runs a minute later."""
    with app.app_context(), frozen_clock(START) as clock:
        for n in range(10):
            jobs.call_api.perform_later(n)
        first = work_off()
        assert [job.arguments for job in first] == [(0,), (1,)]
        assert work_off() == []  # nothing more is admitted at the same moment
        clock.advance(59.999)
        assert work_off() == []
        clock.advance(0.001)
        assert [job.arguments for job in work_off()] == [(2,)]
        clock.advance(60)
        assert [job.arguments for job in work_off()] == [(3,)]
        assert support.count(app.extensions["solidq"].engine, SCHEDULED) == 6


def test_until_steps_through_the_limit(app: Flask) -> None:
    """work_off(until=) steps to each deferred job's slot: each of the 8 jobs past the burst
    runs at its minute, and the clock is left at ``until``."""
    with app.app_context(), frozen_clock(START) as clock:
        for n in range(10):
            jobs.call_api.perform_later(n)
        ran = work_off(until=dt.timedelta(minutes=10))
        assert [job.arguments[0] for job in ran] == list(range(10))
        assert clock.now() == START + dt.timedelta(minutes=10)
    minute = dt.timedelta(minutes=1)
    times = [at for _name, _args, at in jobs.PERFORMED]
    assert times == [START, START] + [START + n * minute for n in range(1, 9)]


def test_a_scheduled_job_runs_when_until_reaches_it(app: Flask) -> None:
    with app.app_context(), frozen_clock(START) as clock:
        jobs.plain.set(wait=30).perform_later("later")
        assert work_off() == []
        assert work_off(until=29) == []
        assert clock.now() == START + dt.timedelta(seconds=29)
        ran = work_off(until=START + dt.timedelta(minutes=1))
        assert [job.arguments for job in ran] == [("later",)]
        assert clock.now() == START + dt.timedelta(minutes=1)
    assert jobs.PERFORMED == [("clock_test.plain", ("later",), START + dt.timedelta(seconds=30))]


def test_a_debounce_window_stepped_through(app: Flask) -> None:
    """Each call moves the job to the window's end after it; it runs once, with the last
    call's arguments, when the clock reaches that."""
    with app.app_context(), frozen_clock(START) as clock:
        jobs.debounced.perform_later("contact", 1)
        clock.advance(10)
        jobs.debounced.perform_later("contact", 2)
        clock.advance(jobs.WINDOW - 1)
        assert work_off() == []  # 29 s after the last call: still in the window
        clock.advance(1)
        assert [job.arguments for job in work_off()] == [("contact", 2)]
        assert work_off(until=600) == []
    assert names(jobs.PERFORMED) == [("clock_test.debounced", ("contact", 2))]


def test_a_retry_wait_stepped_through(app: Flask) -> None:
    jobs.FAILURES["left"] = 2
    with app.app_context(), frozen_clock(START) as clock:
        job = jobs.flaky.perform_later("x")
        assert len(work_off()) == 1  # failed: its retry waits 5 s
        clock.advance(jobs.RETRY_WAIT - 0.001)
        assert work_off() == []
        assert len(work_off(until=START + dt.timedelta(seconds=60))) == 2
        assert clock.now() == START + dt.timedelta(seconds=60)
        row = _job_row(app, job.provider_job_id)
    wait = dt.timedelta(seconds=jobs.RETRY_WAIT)
    assert [at for _name, _args, at in jobs.PERFORMED] == [START, START + wait, START + 2 * wait]
    assert row.finished_at == START + 2 * wait


def test_concurrency_limit_respected(app: Flask) -> None:
    """Three jobs of a limit of one: each runs alone, the others blocked meanwhile, the next
    released as the one before it finished."""
    with app.app_context(), frozen_clock(START):
        for note in ("a", "b", "c"):
            jobs.serial.perform_later(note)
        ran = work_off()
    assert [job.arguments for job in ran] == [("a",), ("b",), ("c",)]
    assert jobs.BLOCKED_WHILE_SERIAL_RAN == [2, 1, 0]


def test_a_hung_holders_slot_frees_when_its_lease_runs_out_and_not_before(app: Flask) -> None:
    """A holder that never finishes (claimed by another process, never performed) keeps its
    slot for the limit's ``duration``; the dispatcher's maintenance, which work_off runs,
    frees it once the lease has run out by the frozen clock, and the blocked job runs."""
    engine = app.extensions["solidq"].engine
    support.register_claimers(engine, [HUNG])
    with app.app_context(), frozen_clock(START) as clock:
        jobs.serial.perform_later("held")
        (held,) = claim.claim(engine, claim.QueueSelector(("*",)), 1, HUNG)
        jobs.serial.perform_later("next")
        clock.advance(jobs.DURATION)
        assert work_off() == []  # the lease ends at START + duration, exclusive
        clock.advance(dt.timedelta(microseconds=1))
        assert [job.arguments for job in work_off()] == [("next",)]
    assert held.class_name == "clock_test.serial"
    assert [name for name, _args, _at in jobs.PERFORMED] == ["clock_test.serial"]


def test_frozen_time_in_the_rows(app: Flask) -> None:
    with app.app_context(), frozen_clock(START) as clock:
        job = jobs.plain.perform_later("stamped")
        clock.advance(3)
        work_off()
        row = _job_row(app, job.provider_job_id)
    assert (row.created_at, row.finished_at) == (START, START + dt.timedelta(seconds=3))


def test_work_off_leaves_no_process_row(app: Flask) -> None:
    with app.app_context():
        jobs.plain.perform_later("now")
        assert [job.arguments for job in work_off()] == [("now",)]
        assert support.count(app.extensions["solidq"].engine, PROCESSES) == 0
        assert support.count(app.extensions["solidq"].engine, BLOCKED) == 0


def test_queues_select_what_runs(app: Flask) -> None:
    with app.app_context():
        jobs.plain.set(queue="mail").perform_later("mail")
        jobs.plain.perform_later("default")
        assert [job.arguments for job in work_off("mail")] == [("mail",)]
        assert [job.arguments for job in work_off()] == [("default",)]


def test_every_reader_takes_the_frozen_time(app: Flask) -> None:
    """The host's clock, the database's (on PostgreSQL and MariaDB a query otherwise), and
    another thread's reading: process-wide."""
    engine = app.extensions["solidq"].engine
    seen: list[dt.datetime] = []
    with frozen_clock(START):
        reader = threading.Thread(target=lambda: seen.append(timing.utcnow()))
        reader.start()
        reader.join()
        assert database_clock.read_now(engine) == START
        with engine.connect() as connection:
            assert database_clock.now(connection) == START
    assert seen == [START]
    assert database_clock.read_now(engine) > START


def test_the_clock_comes_back(app: Flask) -> None:
    with frozen_clock(START) as clock:
        assert timing.utcnow() == START
        assert clock.advance(dt.timedelta(seconds=1.5)) == START + dt.timedelta(seconds=1.5)
        with pytest.raises(ValueError, match="zero or more"):
            clock.advance(-1)
    assert timing.frozen_at() is None
    assert timing.utcnow() > START
    with pytest.raises(RuntimeError, match="has ended"):
        clock.advance(1)


def test_nesting_is_refused() -> None:
    with frozen_clock(START), pytest.raises(RuntimeError, match="frozen clock is on already"):
        with frozen_clock():
            pass
    assert timing.frozen_at() is None


def test_a_job_that_enqueues_itself_for_ever_fails_the_call(
    app: Flask, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(work_off_module, "MAX_JOBS", 5)
    with app.app_context():
        jobs.forever.perform_later(0)
        with pytest.raises(RuntimeError, match="enqueue itself"):
            work_off()
        assert support.count(app.extensions["solidq"].engine, PROCESSES) == 0


def test_until_needs_a_frozen_clock(app: Flask) -> None:
    with app.app_context(), pytest.raises(RuntimeError, match="frozen_clock"):
        work_off(until=10)


def test_until_never_moves_the_clock_back(app: Flask) -> None:
    with app.app_context(), frozen_clock(START) as clock:
        with pytest.raises(ValueError, match="only moves forward"):
            work_off(until=START - dt.timedelta(seconds=1))
        with pytest.raises(ValueError, match="zero or more"):
            work_off(until=-1)
        assert work_off(until=0) == []
        assert clock.now() == START


def test_work_off_needs_the_database_queue(app: Flask) -> None:
    state = app.extensions["solidq"]
    adapter, state.adapter = state.adapter, Adapter.TEST
    try:
        with app.app_context(), pytest.raises(RuntimeError, match="perform_enqueued_jobs"):
            work_off()
    finally:
        state.adapter = adapter


def _job_row(app: Flask, job_id: int | None) -> sa.Row[t.Any]:
    with app.extensions["solidq"].engine.connect() as connection:
        row = connection.execute(sa.select(JOBS).where(JOBS.c.id == job_id)).one()
    return t.cast("sa.Row[t.Any]", row)

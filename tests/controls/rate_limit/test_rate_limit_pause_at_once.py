"""A back-off holds at once: the moment a job hears 429 (or code calls ``back_off``), its
process admits and starts no further job of the budget, and once the pause is committed no
process starts a job of it that was claimed before and hasn't started. Jobs already running
are not touched. On every backend, in this process: jobs claimed with
:func:`flask_solidq.operations.claim.claim_batch` as a worker claims them (charging ahead),
performed with :func:`flask_solidq.operations.execute.perform`, stored with
:func:`flask_solidq.operations.finalize.finalize_all`, under a frozen clock so that a claim
charged ahead lands on its moment exactly. The same with real worker processes is in
:mod:`tests.controls.rate_limit.test_rate_limit_429_processes`.
"""

from __future__ import annotations

import datetime as dt
import json
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import signals
from flask_solidq.controls.rate_limit import local_pauses
from flask_solidq.models.tables import BUDGETS
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOB_FAILURES
from flask_solidq.operations import claim
from flask_solidq.operations import dispatch
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.testing import frozen_clock
from tests import support
from tests.jobs import rate_limit_pauses as jobs
from tests.support import make_due
from tests.support.concurrency import CLAIMED
from tests.support.concurrency import JOBS
from tests.support.concurrency import SCHEDULED

if t.TYPE_CHECKING:
    from flask import Flask

PROCESS_ID = 4346
CLAIMERS = (PROCESS_ID,)
EVERY_QUEUE = claim.QueueSelector(("*",))
KEY = jobs.KEY
PAUSE = dt.timedelta(seconds=jobs.PAUSE)
#: 1 s / (20 - 5 + 1).
INTERVAL = dt.timedelta(microseconds=62_500)
START = dt.datetime(2026, 12, 5, 12, 0, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def _fresh_runs() -> t.Iterator[None]:
    jobs.PERFORMED.clear()
    yield
    jobs.PERFORMED.clear()


def later(app: Flask, note: str, answer: str = "ok") -> int:
    with app.app_context():
        return t.cast(int, jobs.call.perform_later(note, answer).provider_job_id)


def claim_batch(engine: sa.Engine) -> claim.ClaimBatch:
    """Claim as a worker does: charging ahead (it waits for a job's moment before its start)."""
    return claim.claim_batch(engine, EVERY_QUEUE, 20, PROCESS_ID, charge_ahead=True)


def perform(app: Flask, job: t.Any) -> Outcome:
    with app.app_context():
        return execute.perform(job)


def store(engine: sa.Engine, *outcomes: Outcome) -> list[Outcome]:
    return finalize.finalize_all(engine, PROCESS_ID, list(outcomes), preserve_finished=True)


def budget(engine: sa.Engine) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, BUDGETS, BUDGETS.c.key == KEY)
    return row


def scheduled_at(engine: sa.Engine, job_id: int) -> dt.datetime:
    (row,) = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id == job_id)
    return t.cast(dt.datetime, row.scheduled_at)


def spent_nothing(engine: sa.Engine, job_id: int) -> bool:
    """No failure, no attempt recorded, no run counted in the payload."""
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return (
        support.rows(engine, FAILED) == []
        and support.rows(engine, JOB_FAILURES, JOB_FAILURES.c.job_id == job_id) == []
        and json.loads(row.arguments).get("executions", 0) == 0
    )


def claimed_ids(engine: sa.Engine) -> list[int]:
    return sorted(row.job_id for row in support.rows(engine, CLAIMED))


def burst_then_one_ahead(
    app: Flask, engine: sa.Engine, clock: t.Any, answers: t.Sequence[str] = ()
) -> tuple[list[t.Any], t.Any]:
    """Claim a burst of five jobs at the clock's start; 20 ms on, enqueue and claim a sixth,
    which the budget admits 62.5 ms after the burst: charged ahead for it. Return the burst's
    claimed jobs and the sixth. ``answers`` are the API's answers to the burst's jobs, in
    order (``"ok"`` for the rest)."""
    for index in range(5):
        later(app, f"n{index}", answers[index] if index < len(answers) else "ok")
    burst = claim_batch(engine)
    assert len(burst.jobs) == 5 and burst.starts == {}
    clock.advance(0.02)
    later(app, "n5")
    ahead = claim_batch(engine)
    (sixth,) = ahead.jobs
    assert sixth.id in ahead.starts  # its worker would wait for its moment
    (row,) = support.rows(engine, CLAIMED, CLAIMED.c.job_id == sixth.id)
    assert row.created_at == START + INTERVAL
    return burst.jobs, sixth


def test_a_429_is_noted_and_written_at_once_before_its_outcome_is_stored(app, engine):
    with frozen_clock(start=START):
        job_id = later(app, "told", "429")
        (job,) = claim_batch(engine).jobs

        outcome = perform(app, job)

        assert outcome.kind is OutcomeKind.DEFERRED and not outcome.held_at_start
        assert local_pauses.BOARD.remaining([KEY]) == jobs.PAUSE
        # Written before the finisher stored anything: the claim is still held.
        assert claimed_ids(engine) == [job_id]
        assert budget(engine).backed_off_until == START + PAUSE
        store(engine, outcome)
        assert budget(engine).backed_off_until == START + PAUSE
        assert scheduled_at(engine, job_id) >= START + PAUSE
        assert spent_nothing(engine, job_id)


def test_a_pause_heard_but_not_yet_stored_stops_this_process_claims_which_store_it(app, engine):
    """A 429 noted in this process whose write hasn't happened (the database still says the
    budget is full): a claim admits none of the budget's jobs and commits the pause itself."""
    with frozen_clock(start=START):
        job_ids = [later(app, f"n{index}") for index in range(3)]
        local_pauses.BOARD.note([KEY], jobs.PAUSE)

        batch = claim_batch(engine)

        assert batch.jobs == []
        assert sorted(deferral.job.id for deferral in batch.deferrals) == job_ids
        assert all(deferral.until >= START + PAUSE for deferral in batch.deferrals)
        assert budget(engine).backed_off_until == START + PAUSE


def test_a_job_charged_ahead_is_held_at_its_start_by_a_back_off_committed_since(app, engine):
    """Another process's back-off (only the database knows of it) lands between the claim
    that charged a job ahead and that job's moment: the job doesn't start, spends nothing,
    gets its charge back and waits for a slot after the pause."""
    with frozen_clock(start=START) as clock:
        _burst, sixth = burst_then_one_ahead(app, engine, clock)
        tat_before = budget(engine).tat
        with app.app_context():
            until = support.solidq.rate_limiter.back_off(KEY, seconds=jobs.PAUSE)
        local_pauses.BOARD.forget()  # as in another process: the database alone knows
        clock.advance(0.0425)  # the sixth's moment

        outcome = perform(app, sixth)

        assert outcome.kind is OutcomeKind.DEFERRED and outcome.held_at_start
        assert outcome.pause is None  # the database's pause: nothing more to store
        assert jobs.performed() == []
        with support.signals_sent(signals.defer_rate_limited) as deferred:
            with support.signals_sent(signals.rate_limit_back_off) as backed_off:
                store(engine, outcome)
        assert scheduled_at(engine, sixth.id) >= until
        assert spent_nothing(engine, sixth.id)
        # Its charge is given back (the budget owed one interval more for it).
        assert budget(engine).tat == tat_before - INTERVAL
        assert [kwargs["job_ids"] for _sender, kwargs in deferred] == [[sixth.id]]
        assert backed_off == []  # it heard no 429


def test_a_429_holds_back_the_jobs_this_process_claimed_and_hasnt_started(app, engine):
    """The first of the burst hears 429: the four claimed with it that haven't started, and
    the one charged ahead, go back to wait; the ones in the burst that started first ran."""
    with frozen_clock(start=START) as clock:
        burst, sixth = burst_then_one_ahead(app, engine, clock, answers=["ok", "429"])
        first, told, *queued = burst

        outcomes = [perform(app, first), perform(app, told)]
        outcomes += [perform(app, job) for job in [*queued, sixth]]

        assert [o.kind for o in outcomes[:2]] == [OutcomeKind.FINISHED, OutcomeKind.DEFERRED]
        assert jobs.performed() == ["n0", "n1"]
        held = outcomes[2:]
        assert all(o.kind is OutcomeKind.DEFERRED and o.held_at_start for o in held)
        # Known here first: each carries the pause, in case the 429's write failed.
        assert all(o.pause == PAUSE for o in held)
        store(engine, *outcomes)
        until = budget(engine).backed_off_until
        assert until == START + dt.timedelta(seconds=0.02) + PAUSE  # from the 429
        for outcome in held:
            assert scheduled_at(engine, outcome.claimed.id) >= until
            assert spent_nothing(engine, outcome.claimed.id)


def test_back_off_called_in_a_run_lets_that_run_finish_and_holds_back_the_next(app, engine):
    """Code calling ``back_off`` inside a job: the job itself goes on (running jobs are not
    touched) and finishes; a job of the same budget claimed before it is held at its start."""
    with frozen_clock(start=START):
        later(app, "caller", "back_off")
        later(app, "next")
        caller, following = claim_batch(engine).jobs

        first = perform(app, caller)
        second = perform(app, following)

        assert first.kind is OutcomeKind.FINISHED
        assert second.kind is OutcomeKind.DEFERRED and second.held_at_start
        assert jobs.performed() == ["caller"]
        store(engine, first, second)
        assert scheduled_at(engine, following.id) >= START + PAUSE


def test_once_the_pause_is_over_the_held_job_runs_and_the_budget_admits_its_burst(app, engine):
    with frozen_clock(start=START) as clock:
        _burst, sixth = burst_then_one_ahead(app, engine, clock)
        with app.app_context():
            support.solidq.rate_limiter.back_off(KEY, seconds=jobs.PAUSE)
        store(engine, perform(app, sixth))
        others = [later(app, f"after-{index}") for index in range(5)]

        clock.advance(jobs.PAUSE)
        make_due(engine, sixth.id)
        assert dispatch.dispatch_due(engine, 10) == 1
        batch = claim_batch(engine)

        # The whole burst, the held job first (by id): its charge was given back, and the
        # budget admits five at once again, as a full one does.
        assert [job.id for job in batch.jobs] == sorted([sixth.id, *others])[:5]
        assert sixth.id in [job.id for job in batch.jobs]
        store(engine, *(perform(app, job) for job in batch.jobs))
        assert "n5" in jobs.performed()


def test_an_acquire_refused_in_a_run_defers_the_job_and_pauses_nothing(app, engine):
    """``RateLimited`` from our own limiter (``acquire`` timed out, so it names its budgets)
    is no API's 429: the job waits until the budget it asked would admit, and neither its own
    budget nor the one it asked is paused."""
    with frozen_clock(start=START):
        with app.app_context():
            with support.solidq.rate_limiter.acquire(jobs.OUTSIDE):  # spends the minute
                pass
            job_id = t.cast(int, jobs.acquiring.perform_later("refused").provider_job_id)
        (job,) = claim_batch(engine).jobs

        outcome = perform(app, job)

        assert outcome.kind is OutcomeKind.DEFERRED and not outcome.held_at_start
        assert local_pauses.BOARD.remaining([KEY, jobs.OUTSIDE]) == 0.0
        with support.signals_sent(signals.rate_limit_back_off) as backed_off:
            store(engine, outcome)
        assert backed_off == []
        assert all(row.backed_off_until is None for row in support.rows(engine, BUDGETS))
        assert scheduled_at(engine, job_id) >= START + dt.timedelta(seconds=60)
        assert spent_nothing(engine, job_id)

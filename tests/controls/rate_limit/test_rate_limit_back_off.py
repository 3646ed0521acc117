"""What an API says back: ``RateLimited`` raised by a job and ``rate_limiter.back_off``, on
every backend, without worker processes. Jobs are claimed with
:func:`flask_solidq.operations.claim.claim_batch`, performed with
:func:`flask_solidq.operations.execute.perform` and stored with
:func:`flask_solidq.operations.finalize.finalize_all`, as a worker would, and the rows read
back.

The jobs (:mod:`tests.jobs.rate_limit`) fake an API that answers 429 to their first
``fail_times`` calls with ``RateLimited(retry_after=0.5)``. A back-off's transaction writes
the database's clock it counted from as the budget's ``updated_at``, so its end is checked
to the microsecond; the short waits are on conditions with a deadline.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import RateLimited
from flask_solidq import signals
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit.limiter import RateLimiter
from flask_solidq.logging import fields as log_fields
from flask_solidq.logging import subscriber as log_subscriber
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
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import rate_limit as jobs
from tests.support import make_due
from tests.support import releases
from tests.support.concurrency import CLAIMED
from tests.support.concurrency import JOBS
from tests.support.concurrency import SCHEDULED
from tests.support.concurrency import SEMAPHORES
from tests.support.concurrency import job_state

if t.TYPE_CHECKING:
    from flask import Flask

PROCESS_ID = 4344
CLAIMERS = (PROCESS_ID,)
EVERY_QUEUE = claim.QueueSelector(("*",))

THROTTLED = "rate_test.throttled/global"
SERIAL = "rate_test.throttled_serial/global"
PAUSE = dt.timedelta(seconds=jobs.PAUSE)
#: ``rate_test.throttled``'s interval: 1 s / (4 - 2 + 1), rounded up.
INTERVAL = dt.timedelta(microseconds=333_334)


@pytest.fixture(autouse=True)
def _fresh_calls() -> t.Iterator[None]:
    jobs.THROTTLED_CALLS.clear()
    yield
    jobs.THROTTLED_CALLS.clear()


# -- helpers ---------------------------------------------------------------------------------


def later(app: Flask, definition: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(*args).provider_job_id)


def claim_batch(engine: sa.Engine) -> claim.ClaimBatch:
    return claim.claim_batch(engine, EVERY_QUEUE, 20, PROCESS_ID)


def perform_all(app: Flask, engine: sa.Engine, batch: claim.ClaimBatch) -> list[Outcome]:
    """Perform the claimed jobs and store their outcomes, as a worker and its finisher do."""
    with app.app_context():
        outcomes = [execute.perform(job) for job in batch.jobs]
        return finalize.finalize_all(engine, PROCESS_ID, outcomes, preserve_finished=True)


def budget(engine: sa.Engine, key: str) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, BUDGETS, BUDGETS.c.key == key)
    return row


def scheduled_at(engine: sa.Engine, job_id: int) -> dt.datetime:
    (row,) = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id == job_id)
    return t.cast(dt.datetime, row.scheduled_at)


def job_row(engine: sa.Engine, job_id: int) -> sa.Row[t.Any]:
    (row,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return row


def executions(engine: sa.Engine, job_id: int) -> int:
    """The runs the job's stored payload counts."""
    return int(json.loads(job_row(engine, job_id).arguments).get("executions", 0))


def bring_back(engine: sa.Engine, *job_ids: int) -> None:
    """Make the jobs' scheduled executions due and dispatch them to ready."""
    make_due(engine, *job_ids)
    assert dispatch.dispatch_due(engine, 500) == len(job_ids)


def wait_past(moment: dt.datetime) -> None:
    """Wait until this host's clock (SQLite's, and the test databases' host) passes
    ``moment``."""
    support.wait_until(lambda: utcnow() > moment, timeout=5, interval=0.02)


def waiting(engine: sa.Engine, key: str) -> int:
    """The deferred jobs waiting on ``key``, as the dashboard and ``status`` count them."""
    with engine.connect() as connection:
        found = budgets.waiting(connection, key)
    return found[0].size if found else 0


def spent_nothing(engine: sa.Engine, job_id: int) -> bool:
    """No failure and no attempt recorded, and no run counted in the payload."""
    return (
        support.rows(engine, FAILED) == []
        and support.rows(engine, JOB_FAILURES, JOB_FAILURES.c.job_id == job_id) == []
        and executions(engine, job_id) == 0
    )


def back_off_signals() -> t.ContextManager[list[tuple[t.Any, dict[str, t.Any]]]]:
    return support.signals_sent(signals.rate_limit_back_off)


# -- a job that raises RateLimited -----------------------------------------------------------


def test_a_job_told_429_twice_is_deferred_twice_never_failed_then_runs(app, engine):
    job_id = later(app, jobs.throttled, "twice", 2)
    enqueued_at = job_row(engine, job_id).scheduled_at

    for call in (1, 2):
        batch = claim_batch(engine)
        assert [job.id for job in batch.jobs] == [job_id]
        (outcome,) = perform_all(app, engine, batch)

        assert outcome.kind is OutcomeKind.DEFERRED
        row = budget(engine, THROTTLED)
        until = row.updated_at + PAUSE  # counted from the back-off's own clock reading
        assert row.backed_off_until == until
        # Its slot is the pause's end: the budget admits nothing before it.
        assert scheduled_at(engine, job_id) == until == outcome.retry.scheduled_at
        assert job_state(engine, job_id) == "scheduled"
        # Deferred as a claim defers: the job's own time stays, and it is counted waiting.
        assert job_row(engine, job_id).scheduled_at == enqueued_at
        assert waiting(engine, THROTTLED) == 1
        assert spent_nothing(engine, job_id)
        assert jobs.THROTTLED_CALLS["twice"] == call
        wait_past(until)
        bring_back(engine, job_id)

    (outcome,) = perform_all(app, engine, claim_batch(engine))
    assert outcome.kind is OutcomeKind.FINISHED
    assert job_state(engine, job_id) == "finished"
    assert ("rate_test.throttled", ("twice", 2)) in jobs.PERFORMED
    assert support.rows(engine, FAILED) == []
    assert support.rows(engine, JOB_FAILURES) == []


def test_a_retry_on_rule_never_sees_rate_limited(app, engine):
    job_id = later(app, jobs.throttled_retrying, "rule", 1)

    (outcome,) = perform_all(app, engine, claim_batch(engine))

    assert outcome.kind is OutcomeKind.DEFERRED
    assert "exception_executions" not in json.loads(job_row(engine, job_id).arguments)
    assert spent_nothing(engine, job_id)


def test_a_claim_during_the_pause_defers_the_job_again_past_it_and_spends_nothing(app, engine):
    # On a frozen clock: on a loaded machine the half-second pause could end before the claim.
    with frozen_clock(start=utcnow()):
        job_id = later(app, jobs.throttled, "once", 1)
        perform_all(app, engine, claim_batch(engine))
        until = budget(engine, THROTTLED).backed_off_until

        bring_back(engine, job_id)  # due again at once, inside the pause
        batch = claim_batch(engine)

    assert batch.jobs == []
    (deferral,) = batch.deferrals
    # The first slot after the pause went to it already: the next one is an interval on.
    assert deferral.until == until + INTERVAL == scheduled_at(engine, job_id)
    assert support.rows(engine, CLAIMED) == []
    assert spent_nothing(engine, job_id)
    assert jobs.THROTTLED_CALLS["once"] == 1


def test_other_jobs_of_the_budget_wait_for_the_pause_then_burst_then_one_per_interval(app, engine):
    """After the pause the budget admits as its times say: at most ``burst`` (2) at once,
    then one every interval; nothing is admitted during it (by the claims' rows). On a frozen
    clock: on a loaded machine the half-second pause could end before the second claim."""
    with frozen_clock(start=utcnow()) as clock:
        job_id = later(app, jobs.throttled, "first", 1)
        perform_all(app, engine, claim_batch(engine))
        until = budget(engine, THROTTLED).backed_off_until
        others = [later(app, jobs.throttled, f"other-{index}") for index in range(4)]

        batch = claim_batch(engine)  # during the pause: all refused, slots after it
        assert batch.jobs == []
        assert [d.until for d in batch.deferrals] == [until + INTERVAL * n for n in range(1, 5)]

        clock.advance((until - utcnow()).total_seconds() + 0.001)
        bring_back(engine, job_id, *others)
        batch = claim_batch(engine)

    assert len(batch.jobs) == 2  # the burst
    now = budget(engine, THROTTLED).updated_at
    assert now >= until
    assert all(row.created_at >= until for row in support.rows(engine, CLAIMED))
    # The rest one interval apart, after the slots handed out before (which came first).
    slots = [d.until for d in batch.deferrals]
    assert len(slots) == 3
    assert slots[0] >= now + INTERVAL
    assert [b - a for a, b in zip(slots, slots[1:], strict=False)] == [INTERVAL] * 2


def test_a_concurrency_limited_job_told_429_gives_its_slot_to_the_next_blocked_job(app, engine):
    first = later(app, jobs.throttled_serial, "acct", "first", 1)
    blocked = later(app, jobs.throttled_serial, "acct", "second")
    assert job_state(engine, blocked) == "blocked"

    with releases() as released:
        (outcome,) = perform_all(app, engine, claim_batch(engine))

    assert outcome.kind is OutcomeKind.DEFERRED
    assert job_state(engine, first) == "scheduled"
    assert job_state(engine, blocked) == "ready"
    assert released == [
        {"job_id": blocked, "concurrency_key": "rate_test.throttled_serial/acct", "released": True}
    ]
    (semaphore,) = support.rows(
        engine, SEMAPHORES, SEMAPHORES.c.key == "rate_test.throttled_serial/acct"
    )
    assert semaphore.value == 0  # handed on, still taken once
    # Back, it finds the slot taken and blocks, as a deferred job does.
    wait_past(budget(engine, SERIAL).backed_off_until)
    make_due(engine, first)
    dispatch.dispatch_due(engine, 500)
    assert job_state(engine, first) == "blocked"
    assert spent_nothing(engine, first)


def test_a_concurrency_limited_job_told_429_frees_its_slot_when_none_is_blocked(app, engine):
    job_id = later(app, jobs.throttled_serial, "acct", "alone", 1)

    perform_all(app, engine, claim_batch(engine))

    assert job_state(engine, job_id) == "scheduled"
    (semaphore,) = support.rows(
        engine, SEMAPHORES, SEMAPHORES.c.key == "rate_test.throttled_serial/acct"
    )
    assert semaphore.value == 1


def test_a_job_without_a_budget_told_429_waits_out_the_pause(app, engine):
    job_id = later(app, jobs.throttled_unlimited, "free", 1)

    with back_off_signals() as sent:
        (outcome,) = perform_all(app, engine, claim_batch(engine))

    assert outcome.kind is OutcomeKind.DEFERRED
    assert job_state(engine, job_id) == "scheduled"
    assert support.rows(engine, BUDGETS) == []
    ((_sender, payload),) = sent
    assert payload["keys"] == []
    assert scheduled_at(engine, job_id) == payload["until"]
    assert payload["until"] - utcnow() <= PAUSE
    assert spent_nothing(engine, job_id)


def test_rate_limited_sends_its_signal_after_the_commit_and_logs_a_line(app, engine, caplog):
    job_id = later(app, jobs.throttled, "signal", 1)
    caplog.set_level(logging.DEBUG, logger="flask_solidq")
    log_subscriber.connect()
    try:
        with back_off_signals() as sent:
            (outcome,) = perform_all(app, engine, claim_batch(engine))
        log_subscriber.log_performed(outcome, 0.25)
    finally:
        log_subscriber.disconnect()

    until = budget(engine, THROTTLED).backed_off_until
    ((sender, payload),) = sent
    assert sender is jobs.throttled
    assert payload == {
        "keys": [THROTTLED],
        "until": until,
        "job_id": job_id,
        "class_name": "rate_test.throttled",
    }
    lines = [r for r in caplog.records if "Back off" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in lines] == [
        (
            logging.INFO,
            f'SolidQ Back off rate limit class_name: "rate_test.throttled", job_id: {job_id},'
            f' keys: ["{THROTTLED}"], until: "{log_fields.utc_iso(until)}"',
        )
    ]
    (deferred,) = [r for r in caplog.records if r.getMessage().startswith("SolidQ Job deferred")]
    assert deferred.levelno == logging.INFO
    assert 'error_class: "flask_solidq.errors.RateLimited"' in deferred.getMessage()


# -- rate_limiter.back_off -------------------------------------------------------------------


def test_back_off_pauses_a_budget_from_anywhere_and_the_limiter_reports_it(app, engine):
    with app.app_context():
        limiter = RateLimiter()
        assert not limiter.is_limited(THROTTLED)
        with back_off_signals() as sent:
            # Long enough that a slow machine cannot outlive it before the last check.
            until = limiter.back_off(THROTTLED, seconds=60)
        row = budget(engine, THROTTLED)
        assert row.backed_off_until == until == row.updated_at + dt.timedelta(seconds=60)
        assert row.tat < row.updated_at and row.last_slot_at is None  # full, no slot ahead...
        assert limiter.clear_idle_in_batches() == 0  # ...but paused: not idle, kept
        assert limiter.is_limited(THROTTLED)
        assert 0 < limiter.time_until_available(THROTTLED) <= 60.0
        assert limiter.state(THROTTLED).next_admission_at == until
        assert limiter.state(THROTTLED).backed_off_until == until
        # A shorter pause keeps the longer one.
        assert limiter.back_off(THROTTLED, seconds=dt.timedelta(seconds=0.5)) == until

    assert budget(engine, THROTTLED).backed_off_until == until
    assert sent == [
        (None, {"keys": [THROTTLED], "until": until, "job_id": None, "class_name": None})
    ]
    job_id = later(app, jobs.throttled, "after")
    batch = claim_batch(engine)
    assert [d.until for d in batch.deferrals] == [until]
    assert spent_nothing(engine, job_id)


def test_jobs_deferred_before_a_back_off_get_new_slots_after_it(app, engine):
    admitted = [later(app, jobs.throttled, f"early-{index}") for index in range(2)]
    waiting_id = later(app, jobs.throttled, "waits")
    batch = claim_batch(engine)
    assert [job.id for job in batch.jobs] == admitted
    (old,) = batch.deferrals  # its slot: an interval on

    with app.app_context():
        until = RateLimiter().back_off(THROTTLED, seconds=60)
    assert old.until < until
    bring_back(engine, waiting_id)  # its old slot comes, inside the pause
    batch = claim_batch(engine)

    (deferral,) = batch.deferrals
    assert deferral.until >= until
    assert spent_nothing(engine, waiting_id)


def test_back_off_refuses_an_unknown_key_and_a_bad_length(app):
    with app.app_context():
        limiter = RateLimiter()
        with pytest.raises(ValueError, match="No job registered"):
            limiter.back_off("nobody/global", seconds=1)
        with pytest.raises(ValueError, match="more than 0 seconds"):
            limiter.back_off(THROTTLED, seconds=0)
        with pytest.raises(TypeError, match="seconds or a timedelta"):
            limiter.back_off(THROTTLED, seconds="30")  # type: ignore[arg-type]


# -- RateLimited itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry_after", "error"),
    [
        (0, ValueError),
        (-1.5, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (dt.timedelta(0), ValueError),
        (dt.datetime(2030, 1, 1), ValueError),  # naive
        (True, TypeError),
        ("30", TypeError),
        (None, TypeError),
    ],
)
def test_a_bad_retry_after_raises(retry_after, error):
    with pytest.raises(error, match=r"RateLimited\(retry_after=\)"):
        RateLimited(retry_after=retry_after)


def test_retry_after_takes_seconds_a_timedelta_or_an_aware_datetime():
    assert RateLimited(30).retry_after == dt.timedelta(seconds=30)
    assert RateLimited(dt.timedelta(minutes=1)).pause() == dt.timedelta(minutes=1)
    date = dt.datetime(2030, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    limited = RateLimited(date)
    assert limited.retry_after == dt.datetime(2030, 1, 1, 10, tzinfo=dt.timezone.utc)
    assert limited.pause(dt.datetime(2030, 1, 1, 9, 59, tzinfo=dt.timezone.utc)) == dt.timedelta(
        minutes=1
    )
    assert limited.pause(dt.datetime(2030, 1, 2, tzinfo=dt.timezone.utc)) == dt.timedelta(0)


def test_from_retry_after_reads_seconds_or_an_http_date_else_the_default():
    assert RateLimited.from_retry_after("120").retry_after == dt.timedelta(seconds=120)
    dated = RateLimited.from_retry_after("Wed, 21 Oct 2026 07:28:00 GMT")
    assert dated.retry_after == dt.datetime(2026, 10, 21, 7, 28, tzinfo=dt.timezone.utc)
    for header in (None, "", "soon", "0", "-5"):
        assert RateLimited.from_retry_after(header, default=5).retry_after == dt.timedelta(
            seconds=5
        )

"""The rate limit's seams that the seeds promise (issue 19), on every backend: where
``limits_rate`` meets coalescing (seed 003, and seed 000's recipes "A bulk API, with calls
batched while they wait" and "One pending and one running job for each account"), retries,
groups with mixed limits, the other adapters and the testing helpers, and the tools around
budgets (``solidq.rate_limiter``, ``flask solidq clear-idle-budgets``, ``flask solidq status``).

Jobs are claimed, performed and finished in-process (as in
:mod:`tests.controls.rate_limit.test_rate_limit_claims`) except in the one test about what a worker
process does after a claim deferred everything.
No test waits for a limit: time "passes" for a budget by moving its stored times back
(:func:`rewind`), and for a waiting job by making its scheduled execution due
(:func:`come_back`). The jobs are in :mod:`tests.jobs.seams_rate_limit`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import CoalesceStatus
from flask_solidq import models
from flask_solidq import testing
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.controls.rate_limit.gcra import MAX_AHEAD
from flask_solidq.operations import claim
from flask_solidq.operations import dispatch
from flask_solidq.operations import execute
from flask_solidq.operations import finalize
from flask_solidq.operations.outcomes import Outcome
from flask_solidq.operations.outcomes import OutcomeKind
from flask_solidq.processes import worker as worker_process
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.rate_limit.test_rate_limit_claims import budget
from tests.controls.rate_limit.test_rate_limit_claims import budget_keys
from tests.controls.rate_limit.test_rate_limit_claims import claim_clock
from tests.controls.rate_limit.test_rate_limit_claims import claimed_ids
from tests.controls.rate_limit.test_rate_limit_claims import deferred_ids
from tests.controls.rate_limit.test_rate_limit_claims import job_row
from tests.controls.rate_limit.test_rate_limit_claims import scheduled_at
from tests.jobs import seams_rate_limit as jobs
from tests.support import make_due
from tests.support.concurrency import job_state
from tests.support.runtime import WorkProcess
from tests.support.runtime import wait_for_kinds

if t.TYPE_CHECKING:
    import pathlib

    from flask import Flask

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)
BUDGETS = t.cast(sa.Table, models.RateLimitBudget.__table__)

#: The process id the in-process claims belong to.
PROCESS_ID = 4747
#: Registered by conftest's ``claimers``: a claim only takes jobs for a registered process.
CLAIMERS = (PROCESS_ID,)

EVERY_QUEUE = claim.QueueSelector(("*",))
MINUTE = dt.timedelta(minutes=1)
COLLECTED = CoalesceStatus.COLLECTED
CREATED = CoalesceStatus.CREATED

#: Slack when comparing a stored time with a bracket of ``utcnow()``.
SLACK = dt.timedelta(milliseconds=5)


@pytest.fixture(autouse=True)
def performed() -> t.Iterator[list[tuple[str, t.Any]]]:
    recorded: tuple[list[t.Any], ...] = (jobs.PERFORMED, jobs.ATTEMPTS, jobs.KEY_CALLS)
    for found in recorded:
        found.clear()
    yield jobs.PERFORMED
    for found in recorded:
        found.clear()


# -- helpers ---------------------------------------------------------------------------------


def call(app: Flask, definition: t.Any, *args: t.Any, **options: t.Any) -> t.Any:
    """``definition.set(**options).perform_later(*args)``; return the job instance."""
    with app.app_context():
        target = definition.set(**options) if options else definition
        return target.perform_later(*args)


def stored_id(job: t.Any) -> int:
    """The job row the call went to (its own, or the one it was collected into)."""
    return t.cast(int, job.provider_job_id)


def claim_batch(engine: sa.Engine, limit: int = 20) -> claim.ClaimBatch:
    return claim.claim_batch(engine, EVERY_QUEUE, limit, PROCESS_ID)


def run(app: Flask, engine: sa.Engine, claimed: claim.ClaimedJob) -> Outcome:
    """Perform one claimed job and store its outcome, as a worker would."""
    with app.app_context():
        outcome = execute.perform(claimed)
    assert finalize.finalize_all(engine, PROCESS_ID, [outcome], preserve_finished=True) == [outcome]
    return outcome


def spend(app: Flask, engine: sa.Engine, definition: t.Any, *args: t.Any) -> int:
    """Enqueue ``definition(*args)`` and claim it: its budget has admitted one, and is spent
    for a minute. Returns the claimed job's id (left claimed)."""
    job_id = stored_id(call(app, definition, *args))
    if job_state(engine, job_id) == "scheduled":  # a debounced job waits for its window
        come_back(engine, job_id)
    assert claimed_ids(claim_batch(engine)) == [job_id]
    return job_id


def come_back(engine: sa.Engine, job_id: int) -> None:
    """The job's time has come: the dispatcher makes its scheduled execution ready."""
    make_due(engine, job_id)
    assert dispatch.dispatch_due(engine, 500) == 1
    assert job_state(engine, job_id) == "ready"


def rewind(engine: sa.Engine, key: str) -> None:
    """Time has passed for budget ``key``: it is full again, with no slot handed out ahead."""
    past = utcnow() - dt.timedelta(seconds=1)
    with engine.begin() as connection:
        updated = connection.execute(
            BUDGETS.update().where(BUDGETS.c.key == key).values(tat=past, last_slot_at=None)
        )
    assert updated.rowcount == 1


def payload(engine: sa.Engine, job_id: int) -> dict[str, t.Any]:
    return t.cast("dict[str, t.Any]", json.loads(job_row(engine, job_id).arguments))


def call_rows(engine: sa.Engine, job_id: int) -> list[int]:
    """The ids of the calls job ``job_id`` holds, oldest first."""
    return [row.id for row in support.rows(engine, CALLS, CALLS.c.job_id == job_id)]


# -- a: calls keep joining a collecting job its rate limit deferred --------------------------


def test_calls_join_a_collecting_job_its_rate_limit_deferred_and_run_in_one_perform(
    app, engine, performed
):
    """Seed 000: "A job waiting on the rate hasn't started, so calls keep joining it, and
    batches grow as the budget runs out"; seed 003: a waiting job holds its key."""
    key = "seams_rate.collect/global"
    spend(app, engine, jobs.collect, "spender", 0)
    first = call(app, jobs.collect, "acct", 1)
    job_id = stored_id(first)
    assert first.coalesce_status is CREATED

    batch = claim_batch(engine)
    assert deferred_ids(batch) == [job_id]
    until = batch.deferrals[0].until
    assert job_state(engine, job_id) == "scheduled"

    second = call(app, jobs.collect, "acct", 2)
    assert (second.coalesce_status, stored_id(second)) == (COLLECTED, job_id)
    assert scheduled_at(engine, job_id) == until  # joining doesn't move it

    # Its slot comes, the budget is still spent: it waits again, and still collects.
    come_back(engine, job_id)
    assert deferred_ids(claim_batch(engine)) == [job_id]
    third = call(app, jobs.collect, "acct", 3)
    assert (third.coalesce_status, stored_id(third)) == (COLLECTED, job_id)
    assert support.count(engine, JOBS) == 2  # the spender's job and this one: no new job

    rewind(engine, key)
    come_back(engine, job_id)
    batch = claim_batch(engine)
    assert claimed_ids(batch) == [job_id]
    outcome = run(app, engine, batch.jobs[0])

    assert outcome.kind is OutcomeKind.FINISHED
    ids = call_rows(engine, job_id)
    assert performed == [
        (
            "seams_rate.collect",
            list(zip(ids, [("acct", 1), ("acct", 2), ("acct", 3)], strict=True)),
        )
    ]
    # It started, so the key is free: the next call opens the next job.
    fourth = call(app, jobs.collect, "acct", 4)
    assert fourth.coalesce_status is CREATED
    assert stored_id(fourth) != job_id


def test_bulk_calls_join_a_collecting_job_its_rate_limit_deferred(app, engine, performed):
    """The same through ``perform_all_later``: one admission stores the calls into the
    deferred job, which stays where its rate check put it."""
    key = "seams_rate.collect/global"
    spend(app, engine, jobs.collect, "spender", 0)
    job_id = stored_id(call(app, jobs.collect, "acct", 1))
    batch = claim_batch(engine)
    assert deferred_ids(batch) == [job_id]

    with app.app_context():
        bulk = [jobs.collect.new("acct", n) for n in (2, 3, 4)]
        support.solidq.perform_all_later(bulk)

    assert [(job.coalesce_status, stored_id(job)) for job in bulk] == [(COLLECTED, job_id)] * 3
    assert scheduled_at(engine, job_id) == batch.deferrals[0].until
    rewind(engine, key)
    come_back(engine, job_id)
    (claimed,) = claim_batch(engine).jobs
    run(app, engine, claimed)
    assert performed == [
        (
            "seams_rate.collect",
            list(
                zip(
                    call_rows(engine, job_id),
                    [("acct", n) for n in (1, 2, 3, 4)],
                    strict=True,
                )
            ),
        )
    ]


def test_calls_keep_replacing_the_arguments_of_a_job_its_rate_limit_deferred(
    app, engine, performed
):
    """Seed 003's "Sync the latest state" recipe: "A job that's blocked or waiting on the
    quota hasn't started, so calls keep replacing its arguments"."""
    key = "seams_rate.replace/global"
    spend(app, engine, jobs.replace, "spender", 0)
    job_id = stored_id(call(app, jobs.replace, "user", "v1"))
    assert deferred_ids(claim_batch(engine)) == [job_id]

    replaced = call(app, jobs.replace, "user", "v2")
    assert (replaced.coalesce_status, stored_id(replaced)) == (CoalesceStatus.REPLACED, job_id)
    come_back(engine, job_id)
    assert deferred_ids(claim_batch(engine)) == [job_id]
    call(app, jobs.replace, "user", "v3")

    rewind(engine, key)
    come_back(engine, job_id)
    (claimed,) = claim_batch(engine).jobs
    run(app, engine, claimed)
    assert performed == [("seams_rate.replace", ("user", "v3"))]


# -- b: on_full="dispatch" makes a deferred job ready; the next claim defers it again -------


def test_a_deferred_job_that_fills_is_dispatched_and_the_next_claim_defers_it_again(
    app, engine, performed
):
    """Seed 000: "With on_full: :dispatch, a full job that's waiting becomes ready, and the
    next claim sends it back to wait"."""
    key = "seams_rate.collect_dispatch/global"
    spend(app, engine, jobs.collect_dispatch, "spender", 0)
    spent_at = claim_clock(engine, key)
    job_id = stored_id(call(app, jobs.collect_dispatch, "acct", 1))
    batch = claim_batch(engine)
    assert deferred_ids(batch) == [job_id]
    first_slot = batch.deferrals[0].until
    assert first_slot == spent_at + MINUTE

    call(app, jobs.collect_dispatch, "acct", 2)
    assert job_state(engine, job_id) == "scheduled"
    before = utcnow()
    filling = call(app, jobs.collect_dispatch, "acct", 3)
    after = utcnow()

    assert (filling.coalesce_status, stored_id(filling)) == (COLLECTED, job_id)
    assert job_state(engine, job_id) == "ready"
    assert before - SLACK <= job_row(engine, job_id).scheduled_at <= after + SLACK

    # The limit still holds: the next claim sends it back, to the next free slot.
    batch = claim_batch(engine)
    assert claimed_ids(batch) == []
    assert [(d.job.id, d.key, d.until) for d in batch.deferrals] == [
        (job_id, key, first_slot + MINUTE)
    ]
    assert job_state(engine, job_id) == "scheduled"
    assert len(call_rows(engine, job_id)) == jobs.MAX_CALLS
    # It is sealed: a call now opens the next job.
    next_job = call(app, jobs.collect_dispatch, "acct", 4)
    assert next_job.coalesce_status is CREATED

    rewind(engine, key)
    come_back(engine, job_id)
    batch = claim_batch(engine)
    assert claimed_ids(batch) == [job_id]
    assert deferred_ids(batch) == [stored_id(next_job)]
    run(app, engine, batch.jobs[0])
    assert performed == [
        (
            "seams_rate.collect_dispatch",
            list(
                zip(call_rows(engine, job_id), [("acct", 1), ("acct", 2), ("acct", 3)], strict=True)
            ),
        )
    ]


# -- c: debounce only moves a deferred job later ---------------------------------------------


def test_debounce_never_moves_a_deferred_job_earlier_than_its_rate_check_only_later(app, engine):
    """Seed 000: "With debounce:, a call can move it later than its rate check, but never
    earlier"."""
    spend(app, engine, jobs.debounced, "spender", 0)
    job_id = stored_id(call(app, jobs.debounced, "acct", 1))
    come_back(engine, job_id)  # its window passed
    batch = claim_batch(engine)
    assert deferred_ids(batch) == [job_id]
    deferred_until = batch.deferrals[0].until
    kept_time = job_row(engine, job_id).scheduled_at

    # The call's window (now + 10 s) ends before the rate check (now + 60 s): no move.
    second = call(app, jobs.debounced, "acct", 2)
    assert (second.coalesce_status, stored_id(second)) == (COLLECTED, job_id)
    assert scheduled_at(engine, job_id) == deferred_until
    assert job_row(engine, job_id).scheduled_at == kept_time

    # Even a call asking to run at once doesn't pull it forward.
    third = call(app, jobs.debounced, "acct", 3, wait=0)
    assert stored_id(third) == job_id
    assert scheduled_at(engine, job_id) == deferred_until

    # A call asking for later than the rate check moves it there.
    before = utcnow()
    fourth = call(app, jobs.debounced, "acct", 4, wait=120)
    after = utcnow()
    assert stored_id(fourth) == job_id
    moved = scheduled_at(engine, job_id)
    assert before + dt.timedelta(seconds=120) - SLACK <= moved
    assert moved <= after + dt.timedelta(seconds=120) + SLACK
    assert moved > deferred_until

    # When that time comes, the rate is checked again: the budget is still spent.
    come_back(engine, job_id)
    assert deferred_ids(claim_batch(engine)) == [job_id]
    assert len(call_rows(engine, job_id)) == 4


def test_max_wait_caps_a_debounce_move_without_pulling_a_deferred_job_earlier(app, engine):
    """A call asking for later than the rate check, capped by ``max_wait`` (30 s after the
    job opened) to before it, leaves the job where the rate check put it."""
    spend(app, engine, jobs.debounced_capped, "spender", 0)
    job_id = stored_id(call(app, jobs.debounced_capped, "acct", 1))
    come_back(engine, job_id)
    batch = claim_batch(engine)
    assert deferred_ids(batch) == [job_id]

    joined = call(app, jobs.debounced_capped, "acct", 2, wait=600)

    assert stored_id(joined) == job_id
    assert scheduled_at(engine, job_id) == batch.deferrals[0].until


# -- d: waiting spends no attempt --------------------------------------------------------------


def test_waiting_on_the_rate_spends_no_attempt_before_or_after_a_retry(app, engine):
    """Seed 000: a job over the limit "doesn't take a worker thread, and Active Job doesn't
    see a retry": deferrals leave the job's attempt counters as they were, and a job allowed
    two attempts still gets its second one after waiting many times."""
    key = "seams_rate.attempted/global"
    spend(app, engine, jobs.attempted, "spender")
    job_id = stored_id(call(app, jobs.attempted, "flaky"))
    stored = payload(engine, job_id)
    for _ in range(3):
        batch = claim_batch(engine)
        assert deferred_ids(batch) == [job_id]
        assert payload(engine, job_id) == stored
        come_back(engine, job_id)
    assert payload(engine, job_id).get("executions", 0) == 0
    assert support.count(engine, FAILED) == 0

    rewind(engine, key)
    (claimed,) = claim_batch(engine).jobs
    assert run(app, engine, claimed).kind is OutcomeKind.RETRIED
    assert jobs.ATTEMPTS == [(1, {})]
    retried = payload(engine, job_id)
    assert retried["executions"] == 1
    assert list(retried["exception_executions"].values()) == [1]

    # The retry is ready at once, and the budget is spent by the run before: it waits.
    for _ in range(3):
        assert deferred_ids(claim_batch(engine)) == [job_id]
        assert payload(engine, job_id) == retried
        come_back(engine, job_id)

    rewind(engine, key)
    (claimed,) = claim_batch(engine).jobs
    assert run(app, engine, claimed).kind is OutcomeKind.FINISHED
    assert jobs.ATTEMPTS == [(1, {}), (2, dict(retried["exception_executions"]))]
    assert support.count(engine, FAILED) == 0


# -- e: a worker claims again after a claim deferred everything ------------------------------

#: The worker's polling interval in the process test: long enough that the claims of one poll
#: and the next are told apart by their clocks on a loaded machine.
POLL = 1.0


def test_a_worker_claims_again_up_to_five_times_a_poll_after_claims_that_defer_everything(
    app, engine, database_url, tmp_path: pathlib.Path
):
    """Seed 000: "When a claim deferred jobs and still has free threads, the worker claims
    again straight away, up to 5 times per poll". One thread claims one job at a time; its
    budget is spent for an hour, so each deferred job looks again in five minutes, and its
    scheduled execution tells the clock of the claim that deferred it."""
    assert worker_process.CLAIMS_PER_POLL == 5
    key = "seams_rate.hourly/global"
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            BUDGETS.insert().values(
                key=key,
                tat=now + dt.timedelta(hours=1),
                last_slot_at=None,
                created_at=now,
                updated_at=now,
            )
        )
    with app.app_context():
        batch = [jobs.hourly.new(index) for index in range(7)]
        batch.append(jobs.unlimited.new("behind").set(priority=1))
        support.solidq.perform_all_later(batch)
    limited = [stored_id(job) for job in batch[:-1]]
    unlimited = stored_id(batch[-1])

    work = WorkProcess(
        database_url,
        ["work"],
        config={
            "SOLIDQ_WORKERS": [
                {"queues": "*", "threads": 1, "processes": 1, "polling_interval": POLL}
            ],
            "SOLIDQ_DISPATCHERS": [{"polling_interval": 5}],
        },
        log_path=tmp_path / "work.log",
        app_module="tests.apps.seams_rate_limit_app",
    )
    try:
        wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
        support.wait_until(lambda: job_row(engine, unlimited).finished_at is not None, timeout=30)
    finally:
        work.kill()

    # Seven claims deferred one job each (none admitted), the eighth took the unlimited one.
    assert [job_state(engine, job_id) for job_id in limited] == ["scheduled"] * 7
    clocks = [scheduled_at(engine, job_id) - MAX_AHEAD for job_id in limited]
    gaps = [
        (later - earlier).total_seconds()
        for earlier, later in zip(clocks[:-1], clocks[1:], strict=True)
    ]
    # The first poll claims five times straight away; the sixth claim waits for the next poll.
    assert all(gap < POLL / 2 for gap in gaps[:4]), gaps
    assert gaps[4] >= POLL / 2, gaps
    assert gaps[5] < POLL / 2, gaps
    assert budget(engine, key).tat > utcnow() + dt.timedelta(minutes=50)  # nothing admitted


# -- f: a group whose jobs declare different limits -------------------------------------------


def test_each_job_of_a_group_is_charged_and_checked_with_its_own_limit(app, engine):
    """Seed 000: "Each job is charged with its own class's settings against the shared
    budget, so with mixed settings a group can admit more than the stricter one allows"."""
    key = f"{jobs.MIXED}/global"
    loose_first = stored_id(call(app, jobs.loose, "l1"))
    loose_second = stored_id(call(app, jobs.loose, "l2"))
    strict_first = stored_id(call(app, jobs.strict, "s1"))

    batch = claim_batch(engine)

    # Two at once by the loose limit (burst 2), each charging its 20 s: the strict one, with
    # no tolerance, waits until the budget is back on time, 40 s on (not 60 or 120).
    now = claim_clock(engine, key)
    loose_interval = dt.timedelta(seconds=20)
    assert claimed_ids(batch) == [loose_first, loose_second]
    assert [(d.job.id, d.key, d.until) for d in batch.deferrals] == [
        (strict_first, key, now + 2 * loose_interval)
    ]
    assert budget(engine, key).tat == now + 2 * loose_interval
    assert budget_keys(engine) == [key]

    # A strict admission charges its own 60 s...
    rewind(engine, key)
    come_back(engine, strict_first)
    assert claimed_ids(claim_batch(engine)) == [strict_first]
    then = claim_clock(engine, key)
    assert budget(engine, key).tat == then + MINUTE

    # ...and a loose job is checked with its own limit against that debt: capped at its
    # burst of intervals (40 s), admitted once 20 s of it are left, so it waits 20 s, where
    # the strict limit would make it wait the whole minute.
    loose_third = stored_id(call(app, jobs.loose, "l3"))
    batch = claim_batch(engine)
    later = claim_clock(engine, key)
    assert [(d.job.id, d.until) for d in batch.deferrals] == [(loose_third, later + loose_interval)]


def shift_budget(engine: sa.Engine, key: str, seconds: float) -> None:
    """``seconds`` pass for budget ``key``: its stored times move back by that much."""
    delta = dt.timedelta(seconds=seconds)
    row = budget(engine, key)
    with engine.begin() as connection:
        connection.execute(
            BUDGETS.update()
            .where(BUDGETS.c.key == key)
            .values(
                tat=row.tat - delta,
                last_slot_at=None if row.last_slot_at is None else row.last_slot_at - delta,
            )
        )


def test_a_group_with_mixed_limits_can_admit_more_than_the_stricter_one_allows(app, engine):
    """Seed 000, Rules and limitations: "Each job is charged with its own class's settings
    against the shared budget, so with mixed settings a group can admit more than the
    stricter one allows." Here the looser job's check caps the debt the strict admission left
    at its own burst (as a limit changed to a looser one does), so the next strict job is
    admitted 45 s after the first, inside the strict minute. README says to declare the same
    limit in every definition of a group."""
    key = f"{jobs.MIXED}/global"
    strict_first = stored_id(call(app, jobs.strict, "s1"))
    assert claimed_ids(claim_batch(engine)) == [strict_first]
    charged = budget(engine, key).tat

    loose_refused = stored_id(call(app, jobs.loose, "l1"))
    assert deferred_ids(claim_batch(engine)) == [loose_refused]
    assert budget(engine, key).tat < charged  # capped at the looser job's burst

    shift_budget(engine, key, 45)  # 45 s on: the strict minute isn't over
    strict_second = stored_id(call(app, jobs.strict, "s2"))
    assert claimed_ids(claim_batch(engine)) == [strict_second]


# -- g: perform_now and the other adapters skip the check and the key callable ---------------


def test_perform_now_runs_over_a_spent_budget_without_calling_the_key_callable(
    app, engine, performed
):
    spend(app, engine, jobs.counted, "acct", "spender")
    assert jobs.KEY_CALLS == [("acct", "spender")]  # the database queue's enqueue computed it
    before = support.rows(engine, BUDGETS)

    with app.app_context():
        jobs.counted.perform_now("acct", "now")
        jobs.counted.perform_now("acct", "again")

    assert performed == [
        ("seams_rate.counted", ("acct", "now")),
        ("seams_rate.counted", ("acct", "again")),
    ]
    assert jobs.KEY_CALLS == [("acct", "spender")]
    assert support.rows(engine, BUDGETS) == before


@pytest.fixture
def adapter_app(request, database_url, engine) -> t.Iterator[Flask]:
    """An app on ``database_url`` with the adapter ``request.param``; ``engine`` (of the
    ``app`` fixture, same database) reads the tables it must not touch."""
    app = support.create_app(database_url, SOLIDQ_ADAPTER=request.param)
    with app.app_context():
        yield app
        app.extensions["solidq"].dispose()
        support.db.engines[None].dispose()


def assert_no_queue_rows(engine: sa.Engine) -> None:
    assert [support.count(engine, table) for table in (JOBS, BUDGETS, SCHEDULED, CLAIMED)] == [
        0,
        0,
        0,
        0,
    ]


@pytest.mark.parametrize("adapter_app", ["inline"], indirect=True)
def test_the_inline_adapter_runs_every_call_at_once_without_the_check_or_the_key_callable(
    adapter_app, engine, performed
):
    for note in range(3):
        jobs.counted.perform_later("acct", note)
    jobs.attempted.perform_later("any")

    assert performed == [
        ("seams_rate.counted", ("acct", 0)),
        ("seams_rate.counted", ("acct", 1)),
        ("seams_rate.counted", ("acct", 2)),
        ("seams_rate.attempted", ("any",)),
    ]
    assert jobs.KEY_CALLS == []
    assert_no_queue_rows(engine)


@pytest.mark.parametrize("adapter_app", ["test"], indirect=True)
def test_the_test_adapter_records_and_performs_without_the_check_or_the_key_callable(
    adapter_app, engine, performed
):
    for note in range(3):
        jobs.counted.perform_later("acct", note)

    assert [job.arguments for job in testing.enqueued_jobs()] == [("acct", n) for n in range(3)]
    assert testing.perform_enqueued_jobs() == 3
    assert performed == [("seams_rate.counted", ("acct", n)) for n in range(3)]
    assert jobs.KEY_CALLS == []
    assert_no_queue_rows(engine)


# -- k: assert_enqueued_with / perform_enqueued_jobs with rate-limited jobs ------------------


@pytest.mark.parametrize("adapter_app", ["test"], indirect=True)
def test_assert_enqueued_with_and_perform_enqueued_jobs_work_with_rate_limited_jobs_as_before(
    adapter_app, engine, performed
):
    """Seed 000: "With the test adapter, assert_enqueued_with and perform_enqueued_jobs work
    as before, and jobs run as soon as you perform them" (five jobs of a one-a-minute limit,
    a collecting one among them)."""
    with testing.assert_enqueued_with(job=jobs.attempted, args=("b",), queue="default"):
        jobs.attempted.perform_later("a")
        jobs.attempted.perform_later("b")
    with testing.assert_enqueued_with(job=jobs.collect, args=("shop", 1)):
        jobs.collect.perform_later("shop", 1)
        jobs.collect.perform_later("shop", 2)
    with pytest.raises(AssertionError, match="No job enqueued"):
        with testing.assert_enqueued_with(job=jobs.attempted, args=("c",)):
            jobs.attempted.perform_later("d")

    assert testing.perform_enqueued_jobs(only=[jobs.attempted]) == 3
    assert testing.perform_enqueued_jobs() == 2
    assert performed == [
        ("seams_rate.attempted", ("a",)),
        ("seams_rate.attempted", ("b",)),
        ("seams_rate.attempted", ("d",)),
        ("seams_rate.collect", [(None, ("shop", 1))]),
        ("seams_rate.collect", [(None, ("shop", 2))]),
    ]
    assert [counters for counters in jobs.ATTEMPTS] == [(1, {})] * 3
    assert_no_queue_rows(engine)


# -- h: clearing idle budgets, by the API and the command ------------------------------------


def _three_budgets(engine: sa.Engine) -> dict[str, str]:
    """Budgets in each state clearing tells apart: two idle (full, no slot ahead), one spent,
    one full but holding a slot handed out ahead. Returns state -> key."""
    now = utcnow()
    past, ahead = now - dt.timedelta(seconds=5), now + MINUTE
    rows = {
        "idle": (past, None),
        "idle_slot_passed": (past, past),
        "spent": (ahead, None),
        "holding": (past, ahead),
    }
    keys = {state: f"seams_rate.counted/{state}" for state in rows}
    with engine.begin() as connection:
        connection.execute(
            BUDGETS.insert(),
            [
                {
                    "key": keys[state],
                    "tat": tat,
                    "last_slot_at": slot,
                    "created_at": now,
                    "updated_at": now,
                }
                for state, (tat, slot) in rows.items()
            ],
        )
    return keys


def test_rate_limiter_clear_idle_in_batches_deletes_only_idle_budgets(app, engine, monkeypatch):
    keys = _three_budgets(engine)
    sleeps: list[float] = []
    monkeypatch.setattr(budgets.time, "sleep", sleeps.append)

    with app.app_context():
        cleared = support.solidq.rate_limiter.clear_idle_in_batches(
            batch_size=1, sleep_between_batches=0.25
        )
        again = support.solidq.rate_limiter.clear_idle_in_batches()

    assert (cleared, again) == (2, 0)
    assert budget_keys(engine) == sorted([keys["spent"], keys["holding"]])
    assert sleeps and set(sleeps) == {0.25}


@pytest.mark.parametrize("batch_size", [0, -1])
def test_rate_limiter_clear_idle_in_batches_refuses_a_batch_size_below_one(app, batch_size):
    with app.app_context(), pytest.raises(ValueError, match="batch_size"):
        support.solidq.rate_limiter.clear_idle_in_batches(batch_size=batch_size)


def test_the_clear_idle_budgets_command_deletes_only_idle_budgets_and_says_how_many(app, engine):
    keys = _three_budgets(engine)
    runner = app.test_cli_runner()

    result = runner.invoke(args=["solidq", "clear-idle-budgets", "--batch-size", "1"])
    assert (result.exit_code, result.output) == (0, "Deleted 2 idle budgets.\n"), result.output
    assert budget_keys(engine) == sorted([keys["spent"], keys["holding"]])

    rewind(engine, keys["spent"])
    result = runner.invoke(args=["solidq", "clear-idle-budgets", "--sleep-between-batches", "0"])
    assert (result.exit_code, result.output) == (0, "Deleted 1 idle budget.\n"), result.output
    assert budget_keys(engine) == [keys["holding"]]

    refused = runner.invoke(args=["solidq", "clear-idle-budgets", "--batch-size", "0"])
    assert refused.exit_code == 2
    assert "--batch-size" in refused.output
    assert budget_keys(engine) == [keys["holding"]]


# -- i: rate_limiter.is_limited --------------------------------------------------------------


def test_is_limited_says_whether_a_claim_now_would_be_deferred(app, engine):
    key = "seams_rate.counted/acct"
    limiter = support.solidq.rate_limiter
    with app.app_context():
        assert limiter.is_limited(key) is False  # no row yet: a missing budget is full
        assert limiter.time_until_available(key) == 0.0

    spend(app, engine, jobs.counted, "acct", "spender")
    with app.app_context():
        assert limiter.is_limited(key) is True
        assert 58 < limiter.time_until_available(key) <= 60
        # Another account's budget is untouched.
        assert limiter.is_limited("seams_rate.counted/other") is False

    rewind(engine, key)
    with app.app_context():
        assert limiter.is_limited(key) is False


@pytest.mark.parametrize(
    "key",
    [
        "seams_rate.nobody/global",  # no such job
        "seams_rate.unlimited/global",  # a job without a limit
        "global",  # a bare key, without its job's name
    ],
)
def test_is_limited_raises_value_error_for_a_key_no_registered_job_declares(app, engine, key):
    with app.app_context():
        with pytest.raises(ValueError, match="declares a rate limit"):
            support.solidq.rate_limiter.is_limited(key)
        with pytest.raises(ValueError, match="declares a rate limit"):
            support.solidq.rate_limiter.time_until_available(key)


# -- j: the "Rate-limited jobs" table of `flask solidq status` --------------------------------


def test_status_lists_each_budget_with_jobs_deferred_on_it(app, engine):
    spend(app, engine, jobs.attempted, "spender")
    spend(app, engine, jobs.counted, "acct", "spender")
    for note in ("a", "b"):
        call(app, jobs.attempted, note)
    for note in ("c", "d"):
        call(app, jobs.counted, "acct", note)
    assert len(claim_batch(engine).deferrals) == 4
    # Scheduled with wait=, not deferred: not counted as waiting on its budget.
    call(app, jobs.attempted, "later", wait=600)

    result = app.test_cli_runner().invoke(args=["solidq", "status"])

    assert result.exit_code == 0, result.output
    section = result.output.split("Rate-limited jobs\n", 1)[1].split("\n\n", 1)[0]
    lines = [re.split(r"\s{2,}", line.strip()) for line in section.strip().splitlines()]
    assert lines[0] == ["KEY", "LIMIT", "AVAILABLE", "DEFERRED", "NEXT ADMISSION", "NEXT SLOT"]
    rows = {line[0]: line[1:] for line in lines[1:]}
    assert sorted(rows) == ["seams_rate.attempted/global", "seams_rate.counted/acct"]
    assert rows["seams_rate.attempted/global"][2] == "2"
    assert rows["seams_rate.counted/acct"][2] == "2"
    for cells in rows.values():
        # Spent: none available; next admission and next slot both about a minute on (the
        # first slot).
        assert cells[1] == "0"
        when = " ".join(cells[3:])
        assert re.fullmatch(r"in (5\ds|1m00s) in (5\ds|1m00s)", when), when
    # The queues table counts the four deferred apart from the one scheduled with wait=.
    queues = result.output.split("Queues\n", 1)[1].split("\n\n", 1)[0].splitlines()
    header = queues[0].split()
    columns = [header.index("SCHEDULED"), header.index("DEFERRED")]
    counted = [[int(line.split()[column]) for column in columns] for line in queues[1:]]
    assert [sum(column) for column in zip(*counted, strict=True)] == [1, 4]

"""Acting on jobs from Python, on every backend: ``solidq.retry`` / ``retry_all`` (failed jobs
back to ready, keeping their ids, attempt counters and calls), ``solidq.discard`` /
``discard_all`` (failed, scheduled, ready and blocked jobs deleted with their executions and
calls; never a running or finished one), ``solidq.run_now``, two processes retrying the same
jobs at once, and reading jobs (``browse.list_jobs`` / ``job_detail.find_job``).

Jobs fail for real: they are claimed, performed and finished in this process (the helpers of
tests/controls/concurrency/test_concurrency_controls.py), raising what
:data:`job_action_jobs.FAILURES` says.
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import CoalesceStatus
from flask_solidq import models
from flask_solidq.operations import actions
from flask_solidq.operations import claim as claim_operation
from flask_solidq.reads import browse
from flask_solidq.reads import job_detail
from flask_solidq.timing import utcnow
from tests import support
from tests.controls.concurrency.test_concurrency_controls import claim
from tests.controls.concurrency.test_concurrency_controls import finish
from tests.controls.concurrency.test_concurrency_controls import perform
from tests.jobs import job_action as jobs
from tests.jobs import rate_limit as rate_limit_jobs
from tests.support import runtime as runtime_support
from tests.support import solidq
from tests.support.concurrency import job_state
from tests.support.concurrency import ready_ids
from tests.support.concurrency import semaphore

if t.TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from flask import Flask

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
BLOCKED = t.cast(sa.Table, models.BlockedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
KEYS = t.cast(sa.Table, models.CoalesceKey.__table__)
CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)

EXECUTIONS = (READY, SCHEDULED, CLAIMED, BLOCKED, FAILED)

#: Jobs of the bulk tests: more than two batches of :data:`actions.BATCH_SIZE`.
MANY = 1_100

#: Slack for comparing a stored time with the moments around the call that wrote it.
SLACK = dt.timedelta(milliseconds=10)

CONTEXT = multiprocessing.get_context("spawn")


@pytest.fixture(autouse=True)
def clean_job_module() -> t.Iterator[None]:
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()
    yield
    jobs.FAILURES.clear()
    jobs.PERFORMED.clear()


# Making jobs in each state.


def enqueue(app: Flask, definition: t.Any, *args: t.Any, **options: t.Any) -> int:
    """Enqueue ``definition(*args)`` with ``set(**options)``; return its provider_job_id."""
    with app.app_context():
        target = definition.set(**options) if options else definition
        return t.cast(int, target.perform_later(*args).provider_job_id)


def run_ready(app: Flask, engine: sa.Engine) -> None:
    """Claim, perform and finish every ready job (retries due at once included)."""
    while claimed := claim(engine, 1000):
        finish(engine, perform(app, claimed))


def failed_job(
    app: Flask,
    engine: sa.Engine,
    note: str,
    definition: t.Any = jobs.task,
    error: type[Exception] = ValueError,
    **options: t.Any,
) -> int:
    """A job of ``definition`` that ran and failed with ``error``; its provider_job_id."""
    jobs.FAILURES[note] = error
    job_id = enqueue(app, definition, note, **options)
    run_ready(app, engine)
    assert job_state(engine, job_id) == "failed"
    return job_id


def fail_many(
    app: Flask, engine: sa.Engine, count: int, errors: list[type[Exception]]
) -> list[int]:
    """``count`` failed jobs, enqueued in bulk and failed together, the n-th with
    ``errors[n % len(errors)]``; their provider_job_ids."""
    notes = [f"many-{index}" for index in range(count)]
    for index, note in enumerate(notes):
        jobs.FAILURES[note] = errors[index % len(errors)]
    with app.app_context():
        enqueued = [jobs.task.new(note) for note in notes]
        solidq.perform_all_later(enqueued)
    run_ready(app, engine)
    ids = [t.cast(int, job.provider_job_id) for job in enqueued]
    assert support.count(engine, FAILED) == count
    return ids


def scheduled_job(app: Flask, note: str, definition: t.Any = jobs.task, **options: t.Any) -> int:
    return enqueue(app, definition, note, wait=3600, **options)


def deferred_job(app: Flask, engine: sa.Engine, note: str) -> int:
    """A rate-limited job its budget deferred: stored as a claim defers one, its scheduled
    execution moved past the job's own ``scheduled_at``."""
    job_id = scheduled_job(app, note, rate_limit_jobs.global_job)
    with engine.begin() as connection:
        due = connection.scalar(
            sa.select(SCHEDULED.c.scheduled_at).where(SCHEDULED.c.job_id == job_id)
        )
        connection.execute(
            SCHEDULED.update()
            .where(SCHEDULED.c.job_id == job_id)
            .values(scheduled_at=due + dt.timedelta(minutes=5))
        )
    return job_id


def claimed_job(app: Flask, engine: sa.Engine, note: str) -> int:
    """A job claimed by process :data:`PROCESS_ID` (running, as far as the queue knows)."""
    job_id = enqueue(app, jobs.task, note)
    assert [job.id for job in claim(engine)] == [job_id]
    return job_id


def finished_job(app: Flask, engine: sa.Engine, note: str) -> int:
    job_id = enqueue(app, jobs.task, note)
    run_ready(app, engine)
    assert job_state(engine, job_id) == "finished"
    return job_id


def blocked_job(
    app: Flask, account: str, definition: t.Any = jobs.limited, **options: t.Any
) -> tuple[int, int]:
    """A ready concurrency-limited job holding ``account``'s slot, and a blocked one waiting
    for it; their provider_job_ids."""
    holder = enqueue(app, definition, account, f"{account}-holder")
    blocked = enqueue(app, definition, account, f"{account}-blocked", **options)
    return holder, blocked


# Reading the queue.


def row(engine: sa.Engine, job_id: int) -> sa.Row[t.Any]:
    (found,) = support.rows(engine, JOBS, JOBS.c.id == job_id)
    return found


def executions_of(engine: sa.Engine, job_id: int) -> int:
    """How many execution rows, of any state, point at ``job_id``."""
    return sum(len(support.rows(engine, table, table.c.job_id == job_id)) for table in EXECUTIONS)


def calls_of(engine: sa.Engine, job_id: int) -> int:
    return len(support.rows(engine, CALLS, CALLS.c.job_id == job_id))


def detail(engine: sa.Engine, reference: int | str) -> job_detail.JobDetail:
    with engine.connect() as connection:
        found = job_detail.find_job(connection, reference)
    assert found is not None, reference
    return found


def listed(engine: sa.Engine, state: browse.State, **options: t.Any) -> list[int]:
    with engine.connect() as connection:
        return [job.id for job in browse.list_jobs(connection, state, **options)]


def retry(app: Flask, jobs_: t.Any) -> int:
    with app.app_context():
        return solidq.retry(jobs_)


def retry_all(app: Flask, **filters: t.Any) -> int:
    with app.app_context():
        return solidq.retry_all(**filters)


def discard(app: Flask, jobs_: t.Any) -> int:
    with app.app_context():
        return solidq.discard(jobs_)


def discard_all(app: Flask, state: str = "failed", **filters: t.Any) -> int:
    with app.app_context():
        return solidq.discard_all(state, **filters)


def run_now(app: Flask, jobs_: t.Any) -> int:
    with app.app_context():
        return solidq.run_now(jobs_)


def set_failed_at(engine: sa.Engine, job_id: int, moment: dt.datetime) -> None:
    with engine.begin() as connection:
        connection.execute(
            FAILED.update().where(FAILED.c.job_id == job_id).values(created_at=moment)
        )


# Retry.


def test_a_retried_job_is_ready_again_with_its_ids_and_history_and_its_rules_attempts_back(
    app, engine
):
    jobs.FAILURES["again"] = jobs.Flaky
    job_id = enqueue(app, jobs.retried, "again")
    run_ready(app, engine)  # a retry_on retry, then the failure that exhausts it
    assert [name for name, _ in jobs.PERFORMED] == ["job_action_test.retried"] * 2
    before = row(engine, job_id)
    failed = detail(engine, job_id)
    assert failed.summary.state is browse.State.FAILED
    assert failed.executions == 2  # its two runs: the retry_on retry's and the failing one

    assert retry(app, job_id) == 1

    after = row(engine, job_id)
    assert job_state(engine, job_id) == "ready"
    assert after.active_job_id == before.active_job_id
    # The history stays (executions), and the retry_on rule gets its attempts back, as
    # Solid Queue's retry resets the per-rule counters.
    assert json.loads(before.arguments)["exception_executions"] == {"[Flaky]": 1}
    assert "exception_executions" not in json.loads(after.arguments)
    # Its history counts the failed run too: the next run is its third.
    assert json.loads(after.arguments) == {
        **{k: v for k, v in json.loads(before.arguments).items() if k != "exception_executions"},
        "executions": 2,
    }
    assert detail(engine, job_id).executions == 2
    assert support.rows(engine, FAILED) == []
    assert executions_of(engine, job_id) == 1

    # Failing again, it is retried by its rule once more before it fails.
    run_ready(app, engine)
    assert job_state(engine, job_id) == "failed"
    assert len(jobs.PERFORMED) == 4

    assert retry(app, job_id) == 1
    jobs.FAILURES.clear()
    run_ready(app, engine)
    assert job_state(engine, job_id) == "finished"
    assert len(jobs.PERFORMED) == 5


def test_retrying_a_job_that_is_not_failed_counts_nothing(app, engine):
    failed = failed_job(app, engine, "failed")
    finished = finished_job(app, engine, "finished")
    claimed = claimed_job(app, engine, "claimed")
    ready = enqueue(app, jobs.task, "ready")
    scheduled = scheduled_job(app, "scheduled")

    for job_id in (finished, claimed, ready, scheduled, 999_999):
        assert retry(app, job_id) == 0
    assert retry(app, [ready, failed, finished, scheduled, claimed]) == 1
    assert retry(app, failed) == 0  # no longer failed
    assert {job_id: job_state(engine, job_id) for job_id in (failed, ready, scheduled)} == {
        failed: "ready",
        ready: "ready",
        scheduled: "scheduled",
    }
    assert job_state(engine, claimed) == "claimed"
    assert job_state(engine, finished) == "finished"


def test_a_job_is_retried_by_its_job_id(app, engine):
    job_id = failed_job(app, engine, "by-uuid")
    active_job_id = row(engine, job_id).active_job_id

    assert retry(app, active_job_id) == 1
    assert job_state(engine, job_id) == "ready"
    assert retry(app, [str(job_id), active_job_id]) == 0


def test_a_limited_job_retried_while_its_slot_is_taken_is_blocked_until_it_frees(app, engine):
    jobs.FAILURES["first"] = ValueError
    first = enqueue(app, jobs.limited, "acct", "first")
    run_ready(app, engine)
    assert job_state(engine, first) == "failed"
    second = enqueue(app, jobs.limited, "acct", "second")  # takes the slot the failure freed
    assert ready_ids(engine) == [second]

    assert retry(app, first) == 1
    assert job_state(engine, first) == "blocked"

    jobs.FAILURES.clear()
    run_ready(app, engine)  # the second finishes, gives the slot to the first, which runs
    assert job_state(engine, second) == "finished"
    assert job_state(engine, first) == "finished"
    assert [note for _, note in jobs.PERFORMED] == ["first", "second", "first"]


def test_a_retried_collecting_job_keeps_its_calls_and_runs_them_all(app, engine):
    with app.app_context():
        calls = [jobs.collect.perform_later("acct", index) for index in range(3)]
    job_id = t.cast(int, calls[0].provider_job_id)
    assert {call.provider_job_id for call in calls} == {job_id}
    jobs.FAILURES["acct"] = ValueError
    run_ready(app, engine)
    assert job_state(engine, job_id) == "failed"
    assert calls_of(engine, job_id) == 3

    assert retry(app, job_id) == 1
    assert calls_of(engine, job_id) == 3
    assert detail(engine, job_id).calls == 3
    with app.app_context():  # a retried job doesn't coalesce: a new call opens a new job
        later = jobs.collect.perform_later("acct", 9)
    assert later.coalesce_status is CoalesceStatus.CREATED
    assert later.provider_job_id != job_id

    jobs.FAILURES.clear()
    run_ready(app, engine)
    assert job_state(engine, job_id) == "finished"
    runs = [args for name, args in jobs.PERFORMED]
    assert runs[-2:] == [[("acct", 0), ("acct", 1), ("acct", 2)], [("acct", 9)]] or runs[-2:] == [
        [("acct", 9)],
        [("acct", 0), ("acct", 1), ("acct", 2)],
    ]


# Retry all, by filter.


def test_retry_all_by_queue(app, engine):
    one = failed_job(app, engine, "one", queue="one")
    two = failed_job(app, engine, "two", queue="two")

    assert retry_all(app, queue="one") == 1
    assert (job_state(engine, one), job_state(engine, two)) == ("ready", "failed")
    assert retry_all(app, queue="nowhere") == 0


def test_retry_all_by_job_name_or_definition(app, engine):
    task = failed_job(app, engine, "task")
    other = failed_job(app, engine, "other", definition=jobs.other)
    third = failed_job(app, engine, "third", definition=jobs.retried)

    assert retry_all(app, job="job_action_test.task") == 1
    assert job_state(engine, task) == "ready"
    assert retry_all(app, job=jobs.other) == 1
    assert job_state(engine, other) == "ready"
    assert job_state(engine, third) == "failed"


@pytest.mark.parametrize("spelled", ["KeyError", "builtins.KeyError"])
def test_retry_all_by_error_class_by_its_name_or_its_full_name(app, engine, spelled):
    value_error = failed_job(app, engine, "value", error=ValueError)
    key_error = failed_job(app, engine, "key", error=KeyError)
    flaky = failed_job(app, engine, "flaky", error=jobs.Flaky)

    assert retry_all(app, error_class="Error") == 0  # a class, not a substring
    assert retry_all(app, error_class=spelled) == 1
    assert job_state(engine, key_error) == "ready"
    assert retry_all(app, error_class="tests.jobs.job_action.Flaky") == 1
    assert job_state(engine, flaky) == "ready"
    assert job_state(engine, value_error) == "failed"


def test_retry_all_by_when_it_failed(app, engine):
    now = utcnow()
    oldest, middle, newest = (failed_job(app, engine, note) for note in ("a", "b", "c"))
    for job_id, hours in ((oldest, 3), (middle, 2), (newest, 1)):
        set_failed_at(engine, job_id, now - dt.timedelta(hours=hours))

    assert retry_all(app, failed_after=now - dt.timedelta(minutes=90)) == 1
    assert job_state(engine, newest) == "ready"
    assert retry_all(app, failed_before=now - dt.timedelta(minutes=150)) == 1
    assert job_state(engine, oldest) == "ready"
    window = {
        "failed_after": now - dt.timedelta(hours=4),
        "failed_before": now - dt.timedelta(minutes=150),
    }
    assert retry_all(app, **window) == 0
    assert job_state(engine, middle) == "failed"


def test_retry_all_takes_every_failed_job_over_several_batches(app, engine):
    ids = fail_many(app, engine, MANY, [ValueError, KeyError])
    keys = ids[1::2]
    with app.app_context():
        assert actions.count(engine, actions.Waiting.FAILED, actions.Filters()) == MANY

    # The filter applies in every batch: half of each matches.
    assert retry_all(app, error_class="KeyError") == len(keys)
    assert ready_ids(engine) == sorted(keys)
    assert retry_all(app) == MANY - len(keys)
    assert ready_ids(engine) == sorted(ids)
    assert support.count(engine, FAILED) == 0


# Two processes retrying the same failed jobs.


RETRIERS = {
    "retry_all twice": (None, None),
    "retry_all and retry by id": (None, "ids"),
}


@pytest.mark.processes
@pytest.mark.parametrize("shape", RETRIERS, ids=list(RETRIERS))
def test_two_processes_retrying_the_same_jobs_retry_each_once(
    app, engine, database_url, monkeypatch, shape
):
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", runtime_support.PYCACHE)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    ids = fail_many(app, engine, MANY, [ValueError])
    how = [None if kind is None else ids for kind in RETRIERS[shape]]

    counts = race_retries(database_url, how)

    left = [row.job_id for row in support.rows(engine, FAILED)]
    assert sum(counts) == MANY, (counts, left, support.count(engine, READY))
    assert support.count(engine, FAILED) == 0
    with engine.connect() as connection:
        query = sa.select(READY.c.job_id, sa.func.count()).group_by(READY.c.job_id)
        per_job = {job_id: size for job_id, size in connection.execute(query)}
    assert sorted(per_job) == sorted(ids)
    assert set(per_job.values()) == {1}


def race_retries(database_url: str, how: list[list[int] | None]) -> list[int]:
    """Start a spawned process per entry of ``how`` (None: ``retry_all()``; ids: ``retry``
    them a few at a time, newest first), let them go at once, return how many each
    retried."""
    go = CONTEXT.Event()
    readers: list[Connection] = []
    children = []
    try:
        for ids in how:
            reader, writer = CONTEXT.Pipe(duplex=False)
            child = CONTEXT.Process(
                target=jobs.retry_in_process, args=(database_url, ids, go, writer), daemon=True
            )
            child.start()
            writer.close()
            readers.append(reader)
            children.append(child)
        for reader in readers:
            assert reader.poll(30), "a retrying process didn't start"
            assert (message := reader.recv()) == "ready", message
        go.set()
        results = []
        for reader in readers:
            assert reader.poll(60), "a retrying process hung"
            results.append(reader.recv())
        for child in children:
            child.join(10)
        assert [child.exitcode for child in children] == [0] * len(how)
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(10)
        for reader in readers:
            reader.close()
    failures = [result[1] for result in results if isinstance(result, tuple)]
    assert not failures, "\n".join(failures)
    return t.cast(list[int], results)


# Discard.


def test_failed_scheduled_ready_and_blocked_jobs_are_discarded_with_their_executions(app, engine):
    failed = failed_job(app, engine, "failed")
    scheduled = scheduled_job(app, "scheduled")
    ready = enqueue(app, jobs.task, "ready")
    holder, blocked = blocked_job(app, "acct")
    assert job_state(engine, blocked) == "blocked"
    kept = enqueue(app, jobs.task, "kept")

    assert discard(app, [failed, scheduled, ready, blocked]) == 4

    for job_id in (failed, scheduled, ready, blocked):
        assert job_state(engine, job_id) == "gone"
        assert executions_of(engine, job_id) == 0
    assert ready_ids(engine) == [holder, kept]


def test_a_running_or_finished_job_is_never_discarded(app, engine):
    finished = finished_job(app, engine, "finished")
    claimed = claimed_job(app, engine, "claimed")

    assert discard(app, claimed) == 0
    assert discard(app, [finished, claimed, 999_999]) == 0
    for state in ("ready", "scheduled", "blocked", "failed"):
        assert discard_all(app, state) == 0

    assert job_state(engine, claimed) == "claimed"
    assert job_state(engine, finished) == "finished"
    assert support.count(engine, JOBS) == 2


def test_a_discarded_ready_limited_job_gives_its_slot_to_the_next_blocked_one(app, engine):
    holder, blocked = blocked_job(app, "acct")
    key = row(engine, holder).concurrency_key
    assert semaphore(engine, key).value == 0

    with support.releases() as released:
        assert discard(app, holder) == 1

    assert job_state(engine, holder) == "gone"
    assert job_state(engine, blocked) == "ready"
    assert len(released) == 1
    assert semaphore(engine, key).value == 0  # taken again, by the job it unblocked


def test_discarding_a_keys_ready_job_and_its_blocked_one_together_discards_both(app, engine):
    # Discarding the ready one gives its slot back, which unblocks the next: that job must
    # still be discarded, not escape to ready.
    holder, blocked = blocked_job(app, "acct")

    assert discard(app, [holder, blocked]) == 2

    assert job_state(engine, holder) == "gone"
    assert job_state(engine, blocked) == "gone"


def test_a_discarded_pending_coalesced_job_frees_its_key_and_its_calls_go(app, engine):
    with app.app_context():
        first = jobs.dedupe.perform_later("acct", "first")
        joined = jobs.dedupe.perform_later("acct", "joined")
        collected = [jobs.collect.perform_later("bulk", index) for index in range(3)]
    assert joined.coalesce_status is CoalesceStatus.DISCARDED
    collecting = t.cast(int, collected[0].provider_job_id)
    assert calls_of(engine, collecting) == 3

    assert discard(app, [first.provider_job_id, collecting]) == 2

    assert support.rows(engine, KEYS) == []
    assert support.rows(engine, CALLS) == []
    with app.app_context():
        after = jobs.dedupe.perform_later("acct", "after")
        collect_after = jobs.collect.perform_later("bulk", 9)
    assert after.coalesce_status is CoalesceStatus.CREATED
    assert collect_after.coalesce_status is CoalesceStatus.CREATED


def make_in_state(
    app: Flask, engine: sa.Engine, state: str, definition: t.Any, note: str, queue: str
) -> int:
    """A job of ``definition`` in ``state`` (blocked: a limited definition's, behind a holder
    of its key). Making a failed job runs every ready job: make failed ones first."""
    if state == "failed":
        return failed_job(app, engine, note, definition=definition, queue=queue)
    if state == "scheduled":
        return scheduled_job(app, note, definition=definition, queue=queue)
    if state == "ready":
        return enqueue(app, definition, note, queue=queue)
    return blocked_job(app, note, definition=definition, queue=queue)[1]


#: state -> the definition a discard_all names, and another one.
DEFINITIONS = {
    "failed": (jobs.task, jobs.other),
    "scheduled": (jobs.task, jobs.other),
    "ready": (jobs.task, jobs.other),
    "blocked": (jobs.limited, jobs.limited_other),
}


@pytest.mark.parametrize("state", [state.value for state in actions.Waiting])
def test_discard_all_takes_the_jobs_of_one_state_that_match_the_filters(app, engine, state):
    named, other = DEFINITIONS[state]
    states = sorted(DEFINITIONS, key=lambda each: each != "failed")
    elsewhere = [
        make_in_state(app, engine, each, DEFINITIONS[each][0], f"in-{each}", "one")
        for each in states
        if each != state
    ]
    wanted = make_in_state(app, engine, state, named, "wanted", "one")
    other_queue = make_in_state(app, engine, state, named, "other-queue", "two")
    other_job = make_in_state(app, engine, state, other, "other-job", "one")

    assert discard_all(app, state, queue="one", job=named) == 1

    assert job_state(engine, wanted) == "gone"
    assert job_state(engine, other_queue) == state
    assert job_state(engine, other_job) == state
    assert "gone" not in {job_state(engine, job_id) for job_id in elsewhere}


def test_discard_all_failed_by_error_class_and_time(app, engine):
    now = utcnow()
    value_error = failed_job(app, engine, "value", error=ValueError)
    key_error = failed_job(app, engine, "key", error=KeyError)
    old = failed_job(app, engine, "old", error=ValueError)
    set_failed_at(engine, old, now - dt.timedelta(days=2))

    assert discard_all(app, error_class="KeyError") == 1
    assert job_state(engine, key_error) == "gone"
    assert discard_all(app, error_class="ValueError", failed_before=now - dt.timedelta(days=1)) == 1
    assert job_state(engine, old) == "gone"
    assert job_state(engine, value_error) == "failed"


def test_discard_all_rejects_an_unknown_state_and_an_unknown_filter(app, engine):
    with pytest.raises(ValueError, match="bogus"):
        discard_all(app, "bogus")
    with pytest.raises(TypeError, match="colour"):
        discard_all(app, "failed", colour="red")
    with pytest.raises(TypeError, match="colour"):
        retry_all(app, colour="red")
    with pytest.raises(TypeError, match="failed_before"):
        retry_all(app, failed_before="yesterday")


def test_discard_all_refuses_failure_filters_for_jobs_that_have_not_failed(app, engine):
    # error_class/failed_before/failed_after only mean something for failed jobs: applied to
    # scheduled jobs, ignoring them would discard every scheduled job instead of none.
    scheduled = scheduled_job(app, "scheduled")

    with pytest.raises((ValueError, TypeError)):
        discard_all(app, "scheduled", error_class="ValueError")
    with pytest.raises((ValueError, TypeError)):
        discard_all(app, "ready", failed_before=utcnow())

    assert job_state(engine, scheduled) == "scheduled"


# Run now.


def test_run_now_makes_a_scheduled_job_due_now(app, engine):
    scheduled = scheduled_job(app, "later")
    holder, _ = blocked_job(app, "acct")
    limited = enqueue(app, jobs.limited, "acct", "limited-later", wait=3600)

    before = utcnow()
    assert run_now(app, [scheduled, limited]) == 2
    after = utcnow()

    assert job_state(engine, scheduled) == "ready"
    moment = row(engine, scheduled).scheduled_at
    assert before - SLACK <= moment <= after + SLACK
    assert job_state(engine, limited) == "blocked"  # its key's slot is taken
    assert job_state(engine, holder) == "ready"


def test_run_now_counts_only_scheduled_jobs(app, engine):
    failed = failed_job(app, engine, "failed")
    ready = enqueue(app, jobs.task, "ready")
    finished = finished_job(app, engine, "finished")
    _, blocked = blocked_job(app, "acct")

    assert run_now(app, [failed, ready, finished, blocked, 999_999]) == 0
    assert job_state(engine, failed) == "failed"
    assert job_state(engine, blocked) == "blocked"
    assert run_now(app, row(engine, ready).active_job_id) == 0


# Browsing.


def one_job_per_state(app: Flask, engine: sa.Engine) -> dict[browse.State, int]:
    finished = finished_job(app, engine, "finished")
    failed = failed_job(app, engine, "failed")
    claimed = claimed_job(app, engine, "claimed")
    _, blocked = blocked_job(app, "acct")
    return {
        browse.State.FINISHED: finished,
        browse.State.FAILED: failed,
        browse.State.CLAIMED: claimed,
        browse.State.BLOCKED: blocked,
        browse.State.SCHEDULED: scheduled_job(app, "scheduled"),
        browse.State.DEFERRED: deferred_job(app, engine, "deferred"),
        browse.State.READY: enqueue(app, jobs.task, "ready", queue="other"),
    }


def test_list_jobs_lists_each_state(app, engine):
    by_state = one_job_per_state(app, engine)
    holder = ready_ids(engine)[0]

    for state, job_id in by_state.items():
        expected = [job_id, holder] if state is browse.State.READY else [job_id]
        assert listed(engine, state) == sorted(expected, reverse=True), state
        with engine.connect() as connection:
            (summary, *_) = browse.list_jobs(connection, state)
        assert summary.state is state
    assert listed(engine, browse.State.READY, queue="other") == [by_state[browse.State.READY]]
    assert listed(engine, browse.State.READY, job="job_action_test.limited") == [holder]
    assert listed(engine, browse.State.READY, job="job_action_test.other") == []


def test_list_jobs_pages_newest_first_without_overlap(app, engine):
    ids = [
        failed_job(app, engine, f"job-{index}", queue="q" if index % 3 else "r")
        for index in range(8)
    ]
    failed_job(app, engine, "other", definition=jobs.other, queue="q")

    pages: list[list[int]] = []
    before = None
    while page := listed(
        engine, browse.State.FAILED, job="job_action_test.task", before=before, limit=3
    ):
        pages.append(page)
        before = page[-1]

    assert [len(page) for page in pages] == [3, 3, 2]
    assert [job_id for page in pages for job_id in page] == sorted(ids, reverse=True)
    in_q = [job_id for index, job_id in enumerate(ids) if index % 3]
    assert listed(engine, browse.State.FAILED, queue="q", job="job_action_test.task") == sorted(
        in_q, reverse=True
    )


def test_find_job_by_its_id_or_its_job_id(app, engine):
    job_id = enqueue(app, jobs.task, "find me", queue="mail", priority=3)
    active_job_id = row(engine, job_id).active_job_id

    for reference in (job_id, str(job_id), active_job_id):
        found = detail(engine, reference)
        assert found.summary.id == job_id
        assert found.summary.active_job_id == active_job_id
        assert (found.summary.queue_name, found.summary.priority) == ("mail", 3)
        assert found.summary.class_name == "job_action_test.task"
        assert found.summary.state is browse.State.READY
        assert found.payload["args"] == ["find me"]
    with engine.connect() as connection:
        assert job_detail.find_job(connection, 999_999) is None
        assert job_detail.find_job(connection, "00000000-0000-0000-0000-000000000000") is None


def test_a_failed_job_shows_its_error_with_its_backtrace(app, engine):
    before = utcnow()
    job_id = failed_job(app, engine, "broken", error=KeyError)
    after = utcnow()

    found = detail(engine, job_id)
    assert found.summary.state is browse.State.FAILED
    error = t.cast(job_detail.Error, found.error)
    assert error.exception_class == "builtins.KeyError"
    assert "failed on purpose for broken" in error.message
    assert before - SLACK <= error.failed_at <= after + SLACK
    stored = json.loads(support.rows(engine, FAILED)[0].error)
    assert error.backtrace == stored["backtrace"]
    assert error.backtrace[0].startswith("Traceback")
    assert any("jobs/job_action.py" in line for line in error.backtrace)
    assert found.executions == 1  # the failing run, as its error recorded it
    assert found.claimed_by is None


def test_a_failed_job_found_whole_sums_up_as_it_does_in_a_list(app, engine):
    job_id = failed_job(app, engine, "broken", error=KeyError)
    with engine.connect() as connection:
        (listed_summary,) = browse.list_jobs(connection, browse.State.FAILED)
    assert listed_summary.error_class == "builtins.KeyError"
    assert "failed on purpose for broken" in (listed_summary.error_message or "")

    assert detail(engine, job_id).summary == listed_summary


def test_a_claimed_job_shows_which_process_runs_it(app, engine):
    with engine.begin() as connection:
        process_id = connection.execute(
            PROCESSES.insert().values(
                kind="Worker",
                name="worker-ab12",
                pid=4321,
                hostname="box",
                last_heartbeat_at=utcnow(),
            )
        ).inserted_primary_key[0]
    job_id = enqueue(app, jobs.task, "running")
    claim_operation.claim(engine, claim_operation.QueueSelector(("*",)), 1, process_id)

    found = detail(engine, job_id)
    assert found.summary.state is browse.State.CLAIMED
    assert found.claimed_by == "worker-ab12 (pid 4321 on box)"
    assert found.error is None


def test_a_pending_coalesced_job_shows_its_key_and_calls_and_a_blocked_one_its_expiry(app, engine):
    with app.app_context():
        calls = [jobs.collect.perform_later("acct", index) for index in range(2)]
    job_id = t.cast(int, calls[0].provider_job_id)
    _, blocked = blocked_job(app, "acct")

    found = detail(engine, job_id)
    assert found.coalesce_key == support.rows(engine, KEYS)[0].key
    assert "acct" in t.cast(str, found.coalesce_key)
    assert found.calls == 2
    waiting = detail(engine, blocked)
    assert waiting.summary.state is browse.State.BLOCKED
    assert waiting.concurrency_key == row(engine, blocked).concurrency_key
    assert waiting.blocked_until == support.rows(engine, BLOCKED)[0].expires_at
    assert waiting.coalesce_key is None
    assert waiting.calls == 0


def test_a_scheduled_job_shows_when_it_is_due(app, engine):
    job_id = scheduled_job(app, "later")

    found = detail(engine, job_id)
    assert found.summary.state is browse.State.SCHEDULED
    assert found.summary.scheduled_at == support.rows(engine, SCHEDULED)[0].scheduled_at
    assert found.summary.scheduled_at > utcnow() + dt.timedelta(minutes=59)

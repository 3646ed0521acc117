"""Claiming ahead of idle threads (a worker's ``prefetch``) without weakening a guarantee.

* The pool and its start ledger, alone: capacity, the front of the queue, a job unlisted
  before it starts, queued jobs handed back at close.
* The claim's cap on rate-limited jobs (every backend, no worker process): a claim admits at
  most ``limited_cap`` of them, leaves the rest ready and uncharged, and claims a prefix of
  the queue order; a late-imported limited definition past the cap goes back to ready.
* Real `flask solidq work` processes (every backend): a worker SIGKILLed with jobs claimed
  ahead has them put back to ready by its supervisor while its running job follows
  ``SOLIDQ_ON_WORKER_DEATH``; SIGTERM puts them back at once and lets the running job
  finish; rate-limited jobs start within a hand-off of their admission though the worker
  claims ahead; two prefetching workers run every job of a backlog exactly once.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import threading
import time
import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask

from flask_solidq import coalesce
from flask_solidq import controls
from flask_solidq import limits_rate
from flask_solidq.definitions import registry
from flask_solidq.operations import claim
from flask_solidq.processes.pool import Pool
from flask_solidq.processes.pool import StartLedger
from tests import support
from tests.jobs import rate_limit_process as rate_limit_process_jobs
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support import solidq
from tests.support.runtime import CLAIMED
from tests.support.runtime import FAILED
from tests.support.runtime import JOBS
from tests.support.runtime import READY
from tests.support.runtime import WorkProcess

if t.TYPE_CHECKING:
    import pathlib

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

PROCESS_ID = 5151
EVERY_QUEUE = claim.QueueSelector(("*",))
QUEUE = "prefetch"
ALL_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker"]

#: How much later than its admission a rate-limited job may start: the hand-off to an idle
#: thread takes milliseconds; a job claimed ahead would wait a whole job (a second here).
HANDOFF = 0.5
#: Seconds each rate-limited job of the process test runs.
LIMITED_SECONDS = 1.0


def claim_ten(engine: sa.Engine, **options: t.Any) -> claim.ClaimBatch:
    """Claim up to ten jobs as :data:`PROCESS_ID` (registered first)."""
    support.register_claimers(engine, [PROCESS_ID])
    return claim.claim_batch(engine, EVERY_QUEUE, 10, PROCESS_ID, **options)


# Jobs. Their names start with ``prefetch_test.`` (job names are process-wide).


@solidq.job(name="prefetch_test.roomy")
@limits_rate(to=100, per=60, burst=3, key="global")
def roomy(note: object = None) -> None:
    """A rate-limited job whose budget admits 3 at once."""


@solidq.job(name="prefetch_test.plain")
def plain(note: object = None) -> None:
    """A job without a limit."""


@solidq.job(name="prefetch_test.collecting")
@coalesce(key=lambda account, *_: account, on_conflict="collect", max_calls=2)
def collecting(account: object, note: object = None) -> None:
    """A collecting job: two calls fill it."""


@solidq.job(name="prefetch_test.limited_sleep")
@limits_rate(to=100, per=60, burst=100, key="global")
def limited_sleep(value: object, seconds: float) -> None:
    """A rate-limited job whose budget never runs out here: records its admission and start
    (see :mod:`tests.jobs.rate_limit_process`), then runs ``seconds``."""
    rate_limit_process_jobs.record_run("prefetch_test.limited_sleep", value)
    time.sleep(seconds)


def create_app() -> Flask:
    """The app of this module's own `flask solidq work` (it imports the jobs above):
    ``flask --app tests.processes.test_prefetch:create_app``."""
    from tests.apps import worker_app

    return worker_app.create_app()


# -- the pool and its start ledger -----------------------------------------------------------


class Gate:
    """Jobs for a pool that block until released, and say who started, in order."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = threading.Event()
        self.seen_listed: dict[str, list[int]] = {}
        self.ledger: StartLedger | None = None

    def job(self, name: str) -> None:
        if self.ledger is not None:
            self.seen_listed[name] = self.ledger.listed()
        self.started.append(name)
        assert self.release.wait(10)


def test_a_pool_holds_threads_plus_prefetch_jobs_and_runs_the_front_first():
    gate = Gate()
    wakes: list[int] = []
    pool = Pool(1, lambda: wakes.append(1))
    pool.set_ahead(2, limit=2)
    try:
        assert (pool.idle_threads, pool.free_slots) == (1, 3)
        pool.post(gate.job, "first")
        support.wait_until(lambda: gate.started == ["first"], timeout=5)
        pool.post(gate.job, "second")
        pool.post(gate.job, "urgent", front=True)
        assert (pool.idle_threads, pool.free_slots, pool.queued) == (0, 0, 2)
        gate.release.set()
        support.wait_until(lambda: len(gate.started) == 3, timeout=5)
        assert gate.started == ["first", "urgent", "second"]
    finally:
        gate.release.set()
        assert pool.shutdown(5)
    # The ends woke the worker: the free slots reached the refill mark, the thread went idle.
    assert wakes


def test_a_pool_wakes_its_worker_once_per_refill_and_as_a_thread_goes_idle():
    gate = Gate()
    wakes: list[int] = []
    pool = Pool(1, lambda: wakes.append(pool.free_slots))
    pool.set_ahead(4, limit=10)  # 5 slots; a refill once 2 are free
    try:
        for name in ("a", "b", "c", "d", "e"):
            pool.post(gate.job, name)
        gate.release.set()
        support.wait_until(lambda: len(gate.started) == 5 and pool.idle_threads == 1, timeout=5)
    finally:
        gate.release.set()
        assert pool.shutdown(5)
    # Free slots 1, 2 (the refill mark: a wake), 3, 4, then 5 with the thread idle (a wake);
    # not once per job past the mark.
    assert len(wakes) == 2


def test_what_a_pool_holds_ahead_is_capped_by_the_ledger_s_prefetch():
    pool = Pool(2, lambda: None)
    try:
        pool.set_ahead(50, limit=3)
        assert (pool.capacity, pool.refill_at) == (5, 2)
        pool.set_ahead(0, limit=3)
        assert (pool.capacity, pool.refill_at, pool.free_slots) == (2, 1, 2)
    finally:
        assert pool.shutdown(5)


def test_a_queued_job_is_listed_until_just_before_it_starts():
    ledger = StartLedger(3)
    gate = Gate()
    gate.ledger = ledger
    pool = Pool(1, lambda: None, ledger=ledger)
    pool.set_ahead(2, limit=2)
    try:
        pool.post(gate.job, "a", job_id=11)
        support.wait_until(lambda: gate.started == ["a"], timeout=5)
        pool.post(gate.job, "b", job_id=12)
        pool.post(gate.job, "c", job_id=13)
        assert sorted(ledger.listed()) == [12, 13]
        gate.release.set()
        support.wait_until(lambda: len(gate.started) == 3, timeout=5)
    finally:
        gate.release.set()
        assert pool.shutdown(5)
    # Each job saw itself unlisted as it started, and the ones queued behind it listed.
    assert gate.seen_listed == {"a": [], "b": [13], "c": []}
    assert ledger.listed() == []
    ledger.close()


def test_jobs_posted_together_queue_in_order_listed_and_wake_every_idle_thread():
    ledger = StartLedger(6)
    gate = Gate()
    pool = Pool(3, lambda: None, ledger=ledger)
    pool.set_ahead(3, limit=3)
    try:
        pool.post(gate.job, "urgent", job_id=10, front=True)
        support.wait_until(lambda: gate.started == ["urgent"], timeout=5)
        pool.post_each(gate.job, ["a", "b", "c", "d", "e"], [11, 12, 13, 14, 15])
        # The two idle threads took the first two at once; the rest wait, listed.
        support.wait_until(lambda: len(gate.started) == 3, timeout=5)
        assert gate.started == ["urgent", "a", "b"]
        assert sorted(ledger.listed()) == [13, 14, 15]
        assert (pool.queued, pool.free_slots) == (3, 0)
        gate.release.set()
        support.wait_until(lambda: len(gate.started) == 6, timeout=5)
        assert gate.started[3:] == ["c", "d", "e"]
    finally:
        gate.release.set()
        assert pool.shutdown(5)
    assert ledger.listed() == []
    ledger.close()


def test_closing_a_pool_hands_back_its_queued_jobs_listed_until_unlisted():
    ledger = StartLedger(3)
    gate = Gate()
    pool = Pool(1, lambda: None, ledger=ledger)
    pool.set_ahead(2, limit=2)
    try:
        pool.post(gate.job, "running", job_id=1)
        support.wait_until(lambda: gate.started == ["running"], timeout=5)
        pool.post(gate.job, "queued", job_id=2)
        pool.post(gate.job, "queued too", job_id=3)

        queued = pool.close()

        assert [task.job_id for task in queued] == [2, 3]
        assert sorted(ledger.listed()) == [2, 3]  # until they are back to ready
        pool.unlist(queued)
        assert ledger.listed() == []
        gate.release.set()
        assert pool.shutdown(5)
        assert gate.started == ["running"]  # the queued jobs never started
    finally:
        gate.release.set()
        ledger.close()


def test_a_ledger_slot_written_halfway_reads_as_not_listed():
    ledger = StartLedger(2)
    slot = ledger.enter(42)
    assert slot is not None
    assert ledger.listed() == [42]
    # A process killed between the id and its check word: the id alone doesn't count.
    ledger._memory[slot * 16 + 8 : slot * 16 + 16] = bytes(8)
    assert ledger.listed() == []
    ledger.close()


def test_a_ledger_is_shared_with_a_forked_child():
    ledger = StartLedger(2)
    pid = os.fork()
    if pid == 0:  # the child: list a job, as a worker's pool does, and die without cleanup
        ledger.enter(77)
        os._exit(0)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert ledger.listed() == [77]
    ledger.close()


# -- the claim's cap on rate-limited jobs ----------------------------------------------------


def enqueue(app: Flask, definition: t.Any, *args: t.Any, **options: t.Any) -> int:
    with app.app_context():
        target = definition.set(**options) if options else definition
        return t.cast(int, target.perform_later(*args).provider_job_id)


def ready_ids(engine: sa.Engine) -> list[int]:
    return sorted(row.job_id for row in support.rows(engine, READY))


def test_a_claim_admits_no_more_limited_jobs_than_its_cap_and_charges_none_beyond(app, engine):
    limited = [enqueue(app, roomy, index) for index in range(10)]

    batch = claim_ten(engine, limited_cap=2)

    assert [job.id for job in batch.jobs] == limited[:2]
    assert sorted(batch.limited) == limited[:2]
    assert (batch.deferrals, batch.held_back) == ([], 8)
    # The rest stay ready as they were: not deferred, not claimed.
    assert ready_ids(engine) == limited[2:]
    assert support.count(engine, CLAIMED) == 2
    # Not charged: the budget's burst of 3 has exactly one admission left.
    after = claim_ten(engine)
    assert [job.id for job in after.jobs] == limited[2:3]
    assert [deferral.job.id for deferral in after.deferrals] == limited[3:]


def test_a_capped_claim_takes_the_queue_order_up_to_the_first_limited_job_past_the_cap(app, engine):
    first_plain = enqueue(app, plain, "p1")
    first_limited = enqueue(app, roomy, "l1")
    second_limited = enqueue(app, roomy, "l2")
    second_plain = enqueue(app, plain, "p2")

    batch = claim_ten(engine, limited_cap=1)

    assert [job.id for job in batch.jobs] == [first_plain, first_limited]
    assert batch.limited == (first_limited,)
    assert batch.held_back == 2
    assert ready_ids(engine) == [second_limited, second_plain]


def test_a_cap_of_zero_claims_only_what_comes_before_the_first_limited_job(app, engine):
    before = enqueue(app, plain, "before")
    limited = enqueue(app, roomy, "limited")
    enqueue(app, plain, "after")

    batch = claim_ten(engine, limited_cap=0)

    assert [job.id for job in batch.jobs] == [before]
    assert batch.held_back == 2
    assert limited in ready_ids(engine)


def test_a_capped_claim_takes_collecting_jobs_only_for_its_idle_threads(app, engine):
    """A collecting job claimed is one starting now, never one queued in a worker's pool
    behind its threads: ``CoalescedCall.waiting()`` counts a claimed job's calls only while it
    holds its key, which a full one (as here) no longer does (issue 19, item 7)."""
    before = enqueue(app, plain, "before")
    full = [enqueue(app, collecting, account, "a") for account in ("x", "y")]
    for account in ("x", "y"):
        enqueue(app, collecting, account, "b")  # fills it: its key is freed
    after = enqueue(app, plain, "after")

    batch = claim_ten(engine, limited_cap=1)

    assert [job.id for job in batch.jobs] == [before, full[0]]
    assert batch.limited == (full[0],)
    assert batch.held_back == 2
    assert ready_ids(engine) == [full[1], after]


def test_a_claim_without_limited_jobs_ignores_the_cap(app, engine):
    jobs = [enqueue(app, plain, index) for index in range(5)]
    batch = claim_ten(engine, limited_cap=0)
    assert [job.id for job in batch.jobs] == jobs
    assert (batch.limited, batch.held_back) == ((), 0)


@pytest.fixture
def late_definition(tmp_path, monkeypatch):
    """A rate-limited job (with room for all) defined in a module the test forgets after enqueueing
    (see support.late_definition). Yields (module, job name)."""
    with support.late_definition(
        tmp_path, monkeypatch, "prefetch", 'to=100, per=60, burst=100, key="global"'
    ) as late:
        yield late


def test_late_imported_limited_jobs_past_the_cap_go_back_to_ready(app, engine, late_definition):
    module, job_name = late_definition
    late = [enqueue(app, module.late, index) for index in range(3)]
    other = enqueue(app, plain, "plain")
    registry.unregister(module.late)
    sys.modules.pop(module.__name__)
    assert not registry.is_registered(job_name)
    # No definition this process knows is checked at claim: a claim without hooks.
    checked = controls.checked_at_claim()
    known = [definition for definition in registry.definitions() if definition.job_name in checked]
    for definition in known:
        registry.unregister(definition)
    try:
        batch = claim_ten(engine, limited_cap=1)
    finally:
        for definition in known:
            registry.register(definition)

    assert [job.id for job in batch.jobs] == [late[0], other]
    assert batch.limited == (late[0],)
    assert batch.held_back == 2
    assert ready_ids(engine) == late[1:]
    assert sorted(row.job_id for row in support.rows(engine, CLAIMED)) == [late[0], other]


def test_a_late_imported_limited_definition_counts_against_the_cap_whatever_the_path(
    app, engine, late_definition
):
    # Known limited definitions stay registered: on PostgreSQL the one-statement claim takes
    # the batch (the late jobs aren't known to be checked), elsewhere the checked path does.
    module, job_name = late_definition
    late = [enqueue(app, module.late, index) for index in range(3)]
    enqueue(app, plain, "plain")
    registry.unregister(module.late)
    sys.modules.pop(module.__name__)

    batch = claim_ten(engine, limited_cap=1)

    assert batch.limited == (late[0],)
    assert batch.held_back == 2 if engine.dialect.name == "postgresql" else 3
    claimed_late = [row.job_id for row in support.rows(engine, CLAIMED) if row.job_id in late]
    assert claimed_late == [late[0]]
    assert set(late[1:]) <= set(ready_ids(engine))


# -- real worker processes -------------------------------------------------------------------


def started_values(engine: sa.Engine) -> list[str]:
    return [run.value for run in runtime_support.runs(engine, "worker_test.sleep")]


#: Quick jobs a worker runs before the slow ones arrive: it claims ahead only as many jobs as
#: its threads get through in a few milliseconds, by the runs it timed. No-op jobs, so the
#: mean stays well under that on a loaded machine too (jobs that commit a row took long
#: enough under CI's load that the worker claimed fewer than three ahead).
WARM_UP_JOBS = 30


def start_one_thread_three_ahead(app: Flask, engine: sa.Engine, launcher, seconds: float, **config):
    """A worker of one thread claiming up to three ahead, warmed up with quick jobs, then four
    slow jobs in one enqueue: once all four are claimed and the first started, return (the
    work process, the slow jobs' ids, the worker row)."""
    quick = [worker_jobs.noop.new(index) for index in range(WARM_UP_JOBS)]
    with app.app_context():
        solidq.perform_all_later(quick)
    work = launcher.start(
        "--queues", f"default,{QUEUE}", "--threads", "1", "--prefetch", "3", config=config or None
    )
    quick_ids = {job.provider_job_id for job in quick}
    support.wait_until(
        lambda: quick_ids <= runtime_support.finished_ids(engine),
        timeout=runtime_support.START_TIMEOUT,
    )
    slow = [worker_jobs.sleep.set(queue=QUEUE).new(f"s{index}", seconds) for index in range(4)]
    with app.app_context():
        solidq.perform_all_later(slow)  # one commit: the worker sees the four at once
    jobs = [t.cast(int, job.provider_job_id) for job in slow]
    support.wait_until(
        lambda: support.count(engine, CLAIMED) == 4 and started_values(engine) == ["s0"],
        timeout=runtime_support.START_TIMEOUT,
    )
    runtime_support.wait_for_kinds(engine, ALL_KINDS)
    (worker,) = runtime_support.processes(engine, "Worker")
    return work, jobs, worker


@pytest.mark.processes
def test_a_killed_worker_s_jobs_claimed_ahead_go_back_to_ready_and_its_running_one_fails(
    app, engine, launcher
):
    work, jobs, worker = start_one_thread_three_ahead(app, engine, launcher, 30)
    with app.app_context():
        solidq.pause(QUEUE)  # the replacement worker must not claim them again

    os.kill(worker.pid, signal.SIGKILL)

    errors = support.wait_until(lambda: runtime_support.failures(engine), timeout=15)
    assert list(errors) == [jobs[0]]
    assert errors[jobs[0]]["exception_class"] == "flask_solidq.ProcessExitError"
    support.wait_until(lambda: ready_ids(engine) == jobs[1:], timeout=5)
    assert support.count(engine, CLAIMED) == 0
    assert started_values(engine) == ["s0"]  # the jobs claimed ahead never ran
    assert "died before starting them" in work.output()


@pytest.mark.processes
def test_with_release_a_killed_worker_s_jobs_all_go_back_to_ready(app, engine, launcher):
    _work, jobs, worker = start_one_thread_three_ahead(
        app, engine, launcher, 30, SOLIDQ_ON_WORKER_DEATH="release"
    )
    with app.app_context():
        solidq.pause(QUEUE)

    os.kill(worker.pid, signal.SIGKILL)

    support.wait_until(lambda: ready_ids(engine) == jobs, timeout=15)
    assert support.count(engine, FAILED) == 0
    assert support.count(engine, CLAIMED) == 0


@pytest.mark.processes
def test_sigterm_puts_the_jobs_claimed_ahead_back_at_once_and_lets_the_running_one_finish(
    app, engine, launcher
):
    seconds = 6
    work, jobs, _worker = start_one_thread_three_ahead(
        app, engine, launcher, seconds, SOLIDQ_SHUTDOWN_TIMEOUT=seconds * 4
    )

    work.signal(signal.SIGTERM)

    # At once: while the running job still runs.
    support.wait_until(lambda: ready_ids(engine) == jobs[1:], timeout=seconds / 2)
    (run,) = runtime_support.runs(engine, "worker_test.sleep")
    assert run.finished_at is None
    assert work.wait(seconds * 4) == 0, work.output()
    assert jobs[0] in runtime_support.finished_ids(engine)
    assert not set(jobs[1:]) & runtime_support.finished_ids(engine)
    assert ready_ids(engine) == jobs[1:]
    assert support.count(engine, CLAIMED) == 0
    assert support.count(engine, FAILED) == 0
    assert started_values(engine) == ["s0"]
    assert "claimed ahead back to ready" in work.output()


@pytest.fixture
def rate_runs(database_url: str) -> t.Iterator[sa.Table]:
    with runtime_support.emptied_table(database_url, rate_limit_process_jobs.RUNS) as table:
        yield table


@pytest.mark.processes
def test_rate_limited_jobs_start_as_they_are_admitted_though_the_worker_claims_ahead(
    app, engine, database_url, rate_runs, runs_table, tmp_path: pathlib.Path
):
    # Two threads claiming ten ahead, a limit that never refuses: only the cap keeps the
    # worker from admitting all eight at once, to start them a second or more later.
    with app.app_context():
        jobs = [
            limited_sleep.perform_later(index, LIMITED_SECONDS).provider_job_id
            for index in range(8)
        ]
        fillers = [plain.perform_later(index).provider_job_id for index in range(20)]
    work = WorkProcess(
        database_url,
        ["work", "--only", "worker", "--threads", "2", "--prefetch", "10"],
        log_path=tmp_path / "work.log",
        app_module="tests.processes.test_prefetch:create_app",
    )
    try:
        support.wait_until(
            lambda: (
                support.count(engine, rate_runs) == len(jobs)
                and set(jobs + fillers) <= runtime_support.finished_ids(engine)
            ),
            timeout=60,
            interval=0.2,
        )
        work.signal(signal.SIGTERM)
        assert work.wait(20) == 0, work.output()
    finally:
        work.kill()
    runs = support.rows(engine, rate_runs)
    assert sorted(run.job_id for run in runs) == sorted(jobs)
    lags = [(run.started_at - run.admitted_at).total_seconds() for run in runs]
    assert max(lags) < HANDOFF, lags
    assert runtime_support.failures(engine) == {}


@pytest.mark.processes
def test_a_worker_claims_no_slow_job_ahead_of_its_threads(app, engine, launcher):
    # A prefetch of 100, and jobs of a third of a second: what the threads get through in
    # the worker's horizon (a few ms) is less than one job, so it claims for idle threads.
    slow = [worker_jobs.sleep.set(queue=QUEUE).new(f"s{index}", 0.3) for index in range(8)]
    with app.app_context():
        solidq.perform_all_later(slow)
    launcher.start("--queues", QUEUE, "--threads", "2", "--prefetch", "100")
    ids = {job.arguments[0]: t.cast(int, job.provider_job_id) for job in slow}
    most_waiting = 0

    def drained() -> bool:
        """Track the most jobs claimed and not started yet; True once all finished."""
        nonlocal most_waiting
        claimed = {row.job_id for row in support.rows(engine, CLAIMED)}
        started = {ids[value] for value in started_values(engine)}
        most_waiting = max(most_waiting, len(claimed - started))
        return set(ids.values()) <= runtime_support.finished_ids(engine)

    support.wait_until(drained, timeout=60, interval=0.02)
    # Only claims for idle threads, each job starting as it is claimed: never more claimed
    # and waiting than the threads (the first claim's two, before their threads start them).
    # Claimed ahead, the other six would have waited 0.3 s or more: seen by any sample.
    assert most_waiting <= 2


@pytest.mark.processes
def test_two_prefetching_workers_run_every_job_of_a_backlog_exactly_once(app, engine, launcher):
    count = 600
    launcher.start("--processes", "2", "--threads", "2", "--prefetch", "6")
    runtime_support.wait_for_kinds(engine, [*ALL_KINDS, "Worker"])
    with app.app_context():
        solidq.perform_all_later([worker_jobs.record.new(index) for index in range(count)])

    support.wait_until(
        lambda: len(runtime_support.finished_ids(engine)) == count, timeout=90, interval=0.2
    )

    runs = runtime_support.runs(engine, "worker_test.record")
    performed = collections.Counter(run.value for run in runs)
    assert sorted(performed) == sorted(str(index) for index in range(count))
    assert set(performed.values()) == {1}
    assert support.count(engine, JOBS) == count
    assert support.count(engine, READY) == 0
    assert support.count(engine, CLAIMED) == 0
    assert runtime_support.failures(engine) == {}
    assert len({run.pid for run in runs}) == 2

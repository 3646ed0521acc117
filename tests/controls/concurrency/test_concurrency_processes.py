"""``limits_concurrency`` in real `flask solidq work` processes, on every backend.

One `flask solidq work --processes 2 --threads 3 --queues default` (fork mode, with a
dispatcher) serves the module's tests; each job records the interval it ran in
(``tests.jobs.concurrency.RUNS``), so the tests can check which runs overlapped. The test of a
killed holder runs workers of its own on the ``lease`` queue, which the shared worker ignores.
Every process here has a long ``SOLIDQ_PROCESS_ALIVE_THRESHOLD``: nobody prunes a killed
worker (which would give its slot back) before the lease runs out.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from tests import support
from tests.jobs import concurrency as concurrency_jobs
from tests.jobs.concurrency import RUNS
from tests.support import concurrency as concurrency_support
from tests.support.concurrency import BLOCKED
from tests.support.concurrency import CLAIMED
from tests.support.concurrency import JOBS
from tests.support.concurrency import PROCESSES
from tests.support.concurrency import READY
from tests.support.concurrency import SCHEDULED
from tests.support.concurrency import Work
from tests.support.concurrency import most_at_once
from tests.support.concurrency import overlap
from tests.support.concurrency import overlapping_pairs
from tests.support.concurrency import runs
from tests.support.concurrency import semaphore

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes

#: Nobody is pruned while a test runs.
CONFIG: dict[str, t.Any] = {"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 60}

SHARED_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker", "Worker"]

START_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def shared_worker(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Work]:
    """One `flask solidq work --processes 2 --threads 3 --queues default` per backend."""
    concurrency_support.create_runs_table(database_url)
    engine = sa.create_engine(database_url)
    support.delete_all_rows(engine)
    log = tmp_path_factory.mktemp("concurrency-worker") / "work.log"
    args = ["--processes", "2", "--threads", "3", "--queues", "default"]
    worker = Work(database_url, args, config=CONFIG, log_path=log)
    try:
        support.wait_until(
            lambda: concurrency_support.kinds_of(engine, worker.pid) == SHARED_KINDS,
            timeout=START_TIMEOUT,
        )
        yield worker
        assert worker.stop() == 0, worker.output()
    finally:
        worker.kill()
        support.delete_all_rows(engine)
        with engine.begin() as connection:
            connection.execute(RUNS.delete())
        engine.dispose()


@dataclasses.dataclass
class Queue:
    app: Flask
    engine: sa.Engine
    worker: Work
    started: list[Work]
    directory: pathlib.Path

    def start(self, *args: str, config: dict[str, t.Any] | None = None) -> Work:
        """Start another `flask solidq work` (killed, with its group, after the test)."""
        log = self.directory / f"work-{len(self.started)}.log"
        work = Work(self.app.config["SQLALCHEMY_DATABASE_URI"], args, config=config, log_path=log)
        self.started.append(work)
        return work


@pytest.fixture
def queue(database_url: str, shared_worker: Work, tmp_path: pathlib.Path) -> t.Iterator[Queue]:
    """An app on the shared worker's database. Afterwards: every process the test started is
    killed, and every row but the shared worker's processes is deleted."""
    app = support.create_app(database_url)
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    assert shared_worker.alive(), shared_worker.output()
    queue = Queue(app, engine, shared_worker, [], tmp_path)
    try:
        yield queue
    finally:
        for work in queue.started:
            work.kill()
        registered = support.rows(engine, PROCESSES)
        supervisor = {row.id for row in registered if row.pid == shared_worker.pid}
        shared = {row.id for row in registered if {row.id, row.supervisor_id} & supervisor}
        with engine.begin() as connection:
            for table in reversed(models.TABLES):
                if table is not PROCESSES:
                    connection.execute(table.delete())
            connection.execute(PROCESSES.delete().where(PROCESSES.c.id.not_in(shared)))
            connection.execute(RUNS.delete())
        engine.dispose()
        with app.app_context():
            support.db.engines[None].dispose()


def enqueue(queue: Queue, definition: t.Any, *args: t.Any, **options: t.Any) -> t.Any:
    """Enqueue ``definition(*args)`` with ``set(**options)``; return the job."""
    with queue.app.app_context():
        target = definition.set(**options) if options else definition
        return target.perform_later(*args)


def finished_runs(engine: sa.Engine, job_name: str, count: int) -> list[t.Any] | None:
    """The runs of ``job_name`` once ``count`` of them finished, else None."""
    found = runs(engine, job_name)
    done = [run for run in found if run.finished is not None]
    return found if len(done) == count else None


def idle(engine: sa.Engine) -> bool:
    """Nothing is ready, scheduled, claimed or blocked."""
    return not any(support.count(engine, table) for table in (READY, SCHEDULED, CLAIMED, BLOCKED))


def started_run(engine: sa.Engine, job_name: str, value: str) -> t.Any:
    """The run of ``value`` once it started, else None."""
    found = [run for run in runs(engine, job_name) if run.value == value]
    return found[0] if found else None


def test_jobs_of_one_key_never_overlap_while_jobs_of_other_keys_run_alongside(queue):
    engine = queue.engine
    keys = ["serial-a", "serial-b", "serial-c"]
    # In one transaction: every job is waiting before the first finishes.
    with queue.app.app_context():
        support.solidq.perform_all_later(
            [concurrency_jobs.serial.new(key, index, 0.3) for index in range(4) for key in keys]
        )

    found = support.wait_until(
        lambda: finished_runs(engine, "concurrency_test.serial", 12), timeout=30, interval=0.1
    )
    # The slots come back after each outcome is stored; wait for the last one.
    support.wait_until(
        lambda: all(semaphore(engine, f"concurrency_test.serial/{key}").value == 1 for key in keys)
    )

    assert len(found) == 12
    for key in keys:
        of_key = [run for run in found if run.key == key]
        assert overlapping_pairs(of_key) == [], key
        # Released one at a time, in the order they were enqueued.
        assert [run.value for run in of_key] == ["0", "1", "2", "3"]
    across = overlapping_pairs(found)
    assert across, "jobs of different keys never ran at the same time"
    assert all(first.key != second.key for first, second in across)
    assert idle(engine)
    finished = support.rows(engine, JOBS, JOBS.c.finished_at.is_not(None))
    assert len(finished) == 12
    assert support.count(engine, models.FailedExecution) == 0


def test_a_limit_of_two_runs_exactly_two_jobs_of_a_key_at_once_never_three(queue):
    engine = queue.engine
    for index in range(6):
        enqueue(queue, concurrency_jobs.pair, "pair", index, 0.4)

    found = support.wait_until(
        lambda: finished_runs(engine, "concurrency_test.pair", 6), timeout=30, interval=0.1
    )
    support.wait_until(lambda: semaphore(engine, "concurrency_test.pair/pair").value == 2)

    assert most_at_once(found) == 2
    assert idle(engine)


def test_discard_drops_an_enqueue_while_a_job_of_its_key_runs_and_accepts_one_after(queue):
    engine = queue.engine
    key = "concurrency_test.discarding/only"
    first = enqueue(queue, concurrency_jobs.discarding, "only", "first", 1.0)
    support.wait_until(lambda: started_run(engine, "concurrency_test.discarding", "first"))

    dropped = enqueue(queue, concurrency_jobs.discarding, "only", "dropped", 0)

    assert (dropped.successfully_enqueued, dropped.provider_job_id) == (False, None)
    assert [row.id for row in support.rows(engine, JOBS)] == [first.provider_job_id]
    support.wait_until(lambda: semaphore(engine, key).value == 1, timeout=10)
    after = enqueue(queue, concurrency_jobs.discarding, "only", "after", 0)
    assert after.successfully_enqueued is True
    found = support.wait_until(
        lambda: finished_runs(engine, "concurrency_test.discarding", 2), timeout=10
    )
    assert [run.value for run in found] == ["first", "after"]
    assert support.count(engine, models.FailedExecution) == 0


def test_jobs_enqueued_while_others_of_their_key_finish_are_never_left_blocked(queue):
    engine = queue.engine
    count = 30
    for index in range(count):
        enqueue(queue, concurrency_jobs.serial, "stream", index, 0.01 * (index % 3))
        # Enqueues keep coming while the worker finishes jobs of the key and releases others.
        time.sleep(0.01 * (index % 4))

    # Maintenance runs every 600 s here: a job blocked while nobody was left to release it
    # would stay blocked, and this would time out.
    found = support.wait_until(
        lambda: finished_runs(engine, "concurrency_test.serial", count), timeout=30, interval=0.1
    )
    support.wait_until(lambda: semaphore(engine, "concurrency_test.serial/stream").value == 1)

    assert overlapping_pairs(found) == []
    assert sorted(int(run.value) for run in found) == list(range(count))
    assert idle(engine)


def test_a_scheduled_job_of_a_running_key_is_scheduled_not_blocked_until_it_comes_due(queue):
    engine = queue.engine
    enqueue(queue, concurrency_jobs.serial, "sched", "running", 2.0)
    support.wait_until(lambda: started_run(engine, "concurrency_test.serial", "running"))

    scheduled = enqueue(queue, concurrency_jobs.serial.set(wait=1), "sched", "scheduled", 0)
    scheduled_id = support.rows(engine, JOBS, JOBS.c.active_job_id == scheduled.job_id)[0].id
    assert [row.job_id for row in support.rows(engine, SCHEDULED)] == [scheduled_id]
    assert support.count(engine, BLOCKED) == 0

    # Due while the first still runs: the dispatcher finds its key taken and blocks it.
    support.wait_until(
        lambda: [row.job_id for row in support.rows(engine, BLOCKED)] == [scheduled_id],
        timeout=5,
    )
    running = started_run(engine, "concurrency_test.serial", "running")
    assert running.finished is None
    assert support.count(engine, SCHEDULED) == 0

    first, second = support.wait_until(
        lambda: finished_runs(engine, "concurrency_test.serial", 2), timeout=10
    )
    assert (first.value, second.value) == ("running", "scheduled")
    assert not overlap(first, second)
    (job,) = support.rows(engine, JOBS, JOBS.c.id == scheduled_id)
    assert second.started >= job.scheduled_at.timestamp()


def test_the_slot_of_a_killed_holder_frees_when_its_duration_runs_out_and_not_before(queue):
    engine = queue.engine
    key = "concurrency_test.short_lease/lease"
    holder_work = queue.start("--queues", "lease", "--only", "worker", config=CONFIG)
    support.wait_until(
        lambda: (
            concurrency_support.kinds_of(engine, holder_work.pid) == ["Supervisor(fork)", "Worker"]
        ),
        timeout=START_TIMEOUT,
    )
    holder_job = enqueue(queue, concurrency_jobs.short_lease, "lease", "holder", 30)
    waiting = enqueue(queue, concurrency_jobs.short_lease, "lease", "waiting", 0)
    waiting_id = support.rows(engine, JOBS, JOBS.c.active_job_id == waiting.job_id)[0].id
    expires_at = semaphore(engine, key).expires_at.timestamp()
    holder = support.wait_until(
        lambda: started_run(engine, "concurrency_test.short_lease", "holder"), timeout=10
    )

    # The whole group at once: no supervisor, worker or finisher is left to give the slot back.
    holder_work.kill()
    support.wait_until(lambda: not concurrency_support.group_pids(holder_work.pid))
    assert time.time() < expires_at, "the holder was killed after its lease ran out already"
    assert [row.job_id for row in support.rows(engine, BLOCKED)] == [waiting_id]
    assert semaphore(engine, key).value == 0

    releasing = queue.start(
        "--queues",
        "lease",
        config={
            **CONFIG,
            "SOLIDQ_DISPATCHERS": [
                {"polling_interval": 0.1, "concurrency_maintenance_interval": 0.5}
            ],
        },
    )
    found = support.wait_until(
        lambda: finished_runs(engine, "concurrency_test.short_lease", 1), timeout=20
    )

    assert [run.value for run in found] == ["holder", "waiting"]
    killed, released = found
    assert killed.finished is None
    assert released.started >= expires_at
    assert released.started > holder.started
    assert released.pid in concurrency_support.group_pids(releasing.pid)
    # Its outcome is stored and its slot given back; the killed worker was never pruned, so
    # its claim is still there.
    support.wait_until(lambda: semaphore(engine, key).value == 1)
    (waiting_row,) = support.rows(engine, JOBS, JOBS.c.id == waiting_id)
    assert waiting_row.finished_at is not None
    assert [row.job_id for row in support.rows(engine, CLAIMED)] == [holder_job.provider_job_id]
    assert support.count(engine, BLOCKED) == 0


def test_a_run_that_ends_as_the_next_begins_does_not_overlap_it_and_an_unfinished_one_does():
    first = concurrency_support.Interval("k", "1", 1, 1.0, 2.0)
    second = concurrency_support.Interval("k", "2", 1, 2.0, 3.0)
    third = concurrency_support.Interval("k", "3", 1, 1.5, None)
    assert not overlap(first, second)
    assert overlap(first, third) and overlap(second, third)
    assert most_at_once([first, second]) == 1
    assert most_at_once([first, second, third]) == 2

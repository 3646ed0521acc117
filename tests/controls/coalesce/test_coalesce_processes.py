"""Coalescing's guarantees with several OS processes at once, on every backend (seed 003).

Enqueuing processes are started with the ``spawn`` method and each builds its own app
(:mod:`tests.jobs.coalesce_process`); workers are real `flask solidq work` processes on
``tests.apps.coalesce_process_app``.

* Racing processes, no worker: every call reports one outcome, a key has one pending job
  (discard) or full jobs and at most one open one (collect, ``max_calls``), every collected
  call is stored once, in the job it reported, and each key row points at a pending job.
* The same races while a worker drains the jobs: every job runs once, a discarded call's job
  ran, every collected call is performed exactly once, in the job it reported.
* Two processes on one key: an enqueue inside a transaction (``solidq.transaction()`` or the
  app session's, after it wrote) holds the key until that commits; a call from another
  process waits, then joins the committed job, or opens a new one if the first rolled back.
  On SQLite it waits for the database's write lock instead, with the same outcomes.
* Outside a transaction a deadlock is retried: no race may raise (MariaDB/MySQL deadlocks on
  the key's row and unique index under these races).

Each race prints its wall time and calls per second (``[coalesce]``, seen with ``pytest -s``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import multiprocessing
import signal
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import CoalesceStatus
from flask_solidq import models
from tests import support
from tests.jobs import coalesce_process as jobs
from tests.jobs.coalesce_process import MAX_CALLS
from tests.jobs.coalesce_process import RUNS
from tests.jobs.coalesce_process import Outcome
from tests.support import runtime as runtime_support
from tests.support.runtime import WorkProcess

if t.TYPE_CHECKING:
    import pathlib
    from multiprocessing.connection import Connection

pytestmark = pytest.mark.processes

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
KEYS = t.cast(sa.Table, models.CoalesceKey.__table__)
CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)

DEDUPE = "coalesce_process_test.dedupe"
COLLECT = "coalesce_process_test.collect"

CONTEXT = multiprocessing.get_context("spawn")

#: The races: processes, calls each, keys.
PROCESSES = 4
CALLS_EACH = 200
RACE_KEYS = ["k1", "k2", "k3"]
SHAPES = {
    "four processes on three keys": (PROCESSES, RACE_KEYS),
    "two processes on one key": (2, ["only"]),
}

#: Deadlines (not expectations): a spawned process imports and builds its app; a race of
#: 200 calls a process; a worker drains what a race left.
START_TIMEOUT = 30.0
RACE_TIMEOUT = 60.0
DRAIN_TIMEOUT = 40.0

#: SQLite shows no lock waits: there, a call "waits" if it hasn't come back this long after
#: it started while the other process holds the write lock (an uncontended enqueue takes
#: milliseconds).
SQLITE_HOLD = 1.0

WORK_ARGS = ["--processes", "2", "--threads", "3", "--polling-interval", "0.05"]
WORK_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker", "Worker"]
#: Nobody is pruned while the machine is busy with the race.
WORK_CONFIG: dict[str, t.Any] = {"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 60}


@pytest.fixture(autouse=True)
def spawn_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned processes reuse the compiled modules the worker processes cache (the
    environment may forbid bytecode caches in the tree), instead of compiling flask-solidq
    again each."""
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", runtime_support.PYCACHE)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)


def backend_of(database_url: str) -> str:
    return sa.make_url(database_url).get_backend_name()


# Racing processes.


class Race(t.NamedTuple):
    outcomes: list[Outcome]
    wall: float


def run_race(database_url: str, job_name: str, keys: list[str], processes: int = PROCESSES) -> Race:
    """Start ``processes`` spawned processes, each with its own app; once all are ready, let
    them enqueue :data:`CALLS_EACH` calls of ``job_name`` on ``keys`` at once. Returns every
    call's outcome and the wall time from the first call to the last."""
    go = CONTEXT.Event()
    readers: list[Connection] = []
    children = []
    try:
        for index in range(processes):
            reader, writer = CONTEXT.Pipe(duplex=False)
            child = CONTEXT.Process(
                target=jobs.race,
                args=(database_url, job_name, keys, CALLS_EACH, f"p{index}", go, writer),
                daemon=True,
            )
            child.start()
            writer.close()
            readers.append(reader)
            children.append(child)
        for reader in readers:
            assert reader.poll(START_TIMEOUT), "an enqueuing process didn't start"
            assert (message := reader.recv()) == "ready", message
        go.set()
        reports = []
        for reader in readers:
            assert reader.poll(RACE_TIMEOUT), "an enqueuing process hung"
            reports.append(reader.recv())
        for child in children:
            child.join(10)
        assert [child.exitcode for child in children] == [0] * processes
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(10)
        for reader in readers:
            reader.close()
    failed = [sent[1] for sent in reports if sent[0] == "failed"]
    assert not failed, "\n".join(failed)
    outcomes = [outcome for sent in reports for outcome in sent[2]]
    wall = max(sent[1] for sent in reports) - min(sent[0] for sent in reports)
    return Race(outcomes, wall)


def report(database_url: str, what: str, race: Race, processes: int = PROCESSES) -> None:
    """The race's throughput (seen with ``pytest -s``)."""
    count = len(race.outcomes)
    print(
        f"\n[coalesce] {backend_of(database_url)} {what}: {count} calls by {processes}"
        f" processes in {race.wall:.2f} s ({count / race.wall:.0f} calls/s)"
    )


def check_outcomes(race: Race, statuses: set[str]) -> None:
    """No call raised (no deadlock escaped its retries), and each reported exactly one of
    ``statuses`` and the job that holds it."""
    errors = [outcome for outcome in race.outcomes if outcome.error]
    assert errors == [], f"{len(errors)} calls raised, first: {errors[:3]}"
    assert len({outcome.value for outcome in race.outcomes}) == len(race.outcomes)
    wrong = [
        outcome
        for outcome in race.outcomes
        if outcome.status not in statuses or outcome.job_id is None
    ]
    assert wrong == [], wrong[:5]


# Reading the queue.


def stored_jobs(engine: sa.Engine, job_name: str) -> dict[int, sa.Row[t.Any]]:
    """job row id -> row, for ``job_name``'s jobs."""
    return {row.id: row for row in support.rows(engine, JOBS, JOBS.c.class_name == job_name)}


def stored_args(row: sa.Row[t.Any]) -> list[t.Any]:
    return json.loads(row.arguments)["args"]


def key_rows(engine: sa.Engine) -> list[sa.Row[t.Any]]:
    return support.rows(engine, KEYS)


def coalesce_key(definition: t.Any, key: str) -> str:
    return t.cast(str, definition.coalesce_key_for(key, "any"))


def stored_calls(engine: sa.Engine) -> dict[str, int]:
    """The stored collected calls: value -> the job row that holds it; fails on a value
    stored twice."""
    found: dict[str, int] = {}
    for row in support.rows(engine, CALLS):
        value = json.loads(row.arguments)["args"][1]
        assert value not in found, f"call {value} stored twice"
        found[value] = row.job_id
    return found


def pending(engine: sa.Engine, job_id: int) -> bool:
    """Whether a job is stored, unfinished, and ready or scheduled (not running, not
    failed)."""
    with engine.connect() as connection:
        job = connection.execute(sa.select(JOBS).where(JOBS.c.id == job_id)).first()
        waiting = [
            connection.scalar(sa.select(sa.func.count()).where(table.c.job_id == job_id))
            for table in (READY, SCHEDULED)
        ]
    return job is not None and job.finished_at is None and sum(waiting) == 1


def check_key_rows(engine: sa.Engine, definition: t.Any, keys: list[str]) -> dict[str, t.Any]:
    """At most one key row per key, each pointing at a pending job; returns key -> row."""
    rows = key_rows(engine)
    counts = collections.Counter(row.key for row in rows)
    assert all(count == 1 for count in counts.values()), counts
    assert set(counts) <= {coalesce_key(definition, key) for key in keys}, counts
    assert all(pending(engine, row.job_id) for row in rows), rows
    return {row.key: row for row in rows}


# The races, no worker.


def test_racing_processes_leave_one_pending_job_per_key_and_every_discarded_call_points_at_it(
    app, engine, database_url
):
    race = run_race(database_url, DEDUPE, RACE_KEYS)
    report(database_url, "discard", race)

    check_outcomes(race, {CoalesceStatus.CREATED.value, CoalesceStatus.DISCARDED.value})
    created = [outcome for outcome in race.outcomes if outcome.status == "created"]
    used = {outcome.key for outcome in race.outcomes}
    # No job started, so no key was released: one job per key, created by one call.
    assert collections.Counter(outcome.key for outcome in created) == dict.fromkeys(used, 1)
    stored = stored_jobs(engine, DEDUPE)
    assert set(stored) == {outcome.job_id for outcome in created}
    for outcome in created:  # the job runs with its first call's arguments
        assert stored_args(stored[outcome.job_id]) == [outcome.key, outcome.value]
    for outcome in race.outcomes:
        assert stored_args(stored[t.cast(int, outcome.job_id)])[0] == outcome.key, outcome
    rows = check_key_rows(engine, jobs.dedupe, RACE_KEYS)
    assert {key: row.job_id for key, row in rows.items()} == {
        coalesce_key(jobs.dedupe, outcome.key): outcome.job_id for outcome in created
    }


def test_racing_processes_store_every_collected_call_once_in_full_jobs_and_one_open_job_per_key(
    app, engine, database_url
):
    race = run_race(database_url, COLLECT, RACE_KEYS)
    report(database_url, "collect", race)

    check_outcomes(race, {CoalesceStatus.CREATED.value, CoalesceStatus.COLLECTED.value})
    calls = stored_calls(engine)
    assert len(calls) == len(race.outcomes) == PROCESSES * CALLS_EACH
    # Each call is stored in the job it reported.
    assert calls == {outcome.value: outcome.job_id for outcome in race.outcomes}
    stored = stored_jobs(engine, COLLECT)
    created = [outcome for outcome in race.outcomes if outcome.status == "created"]
    assert set(stored) == {outcome.job_id for outcome in created}
    sizes = collections.Counter(calls.values())
    assert max(sizes.values()) <= MAX_CALLS, sizes
    rows = check_key_rows(engine, jobs.collect, RACE_KEYS)

    for key in {outcome.key for outcome in race.outcomes}:
        of_key = [outcome for outcome in race.outcomes if outcome.key == key]
        job_ids = {outcome.job_id for outcome in of_key}
        assert all(stored_args(stored[t.cast(int, job_id)])[0] == key for job_id in job_ids)
        assert sum(1 for outcome in of_key if outcome.status == "created") == len(job_ids)
        # Nothing started: every job but the key's open one was sealed full.
        not_full = {job_id for job_id in job_ids if sizes[job_id] < MAX_CALLS}
        assert len(not_full) <= 1, {job_id: sizes[job_id] for job_id in job_ids}
        assert len(job_ids) == -(-len(of_key) // MAX_CALLS)
        row = rows.get(coalesce_key(jobs.collect, key))
        if not_full:
            assert row is not None and {row.job_id} == not_full
            assert row.calls_count == sizes[row.job_id]
        else:
            assert row is None  # the last job filled up and was sealed


# The races while a worker drains them.


@pytest.fixture
def coalesce_runs(database_url: str) -> t.Iterator[sa.Table]:
    """``solidq_test_coalesce_runs``, emptied after the test."""
    with runtime_support.emptied_table(database_url, RUNS) as table:
        yield table


@pytest.fixture
def work(
    app, engine: sa.Engine, coalesce_runs: sa.Table, database_url: str, tmp_path: pathlib.Path
) -> t.Iterator[WorkProcess]:
    """`flask solidq work` with two worker processes of three threads, registered; it must
    stop on SIGTERM with status 0, and is killed with its group in any case (before ``app``
    empties the tables)."""
    process = WorkProcess(
        database_url,
        ["work", *WORK_ARGS],
        config=WORK_CONFIG,
        log_path=tmp_path / "work.log",
        app_module="tests.apps.coalesce_process_app",
    )
    try:
        runtime_support.wait_for_kinds(engine, WORK_KINDS)
        yield process
        process.signal(signal.SIGTERM)
        assert process.wait(20) == 0, process.output()
    finally:
        process.kill()


def drained(engine: sa.Engine, job_name: str) -> bool:
    """Whether every job of ``job_name`` finished or failed, and none is waiting or
    running."""
    with engine.connect() as connection:
        unfinished = connection.scalar(
            sa.select(sa.func.count())
            .select_from(JOBS)
            .where(JOBS.c.class_name == job_name, JOBS.c.finished_at.is_(None))
        )
        failed = connection.scalar(sa.select(sa.func.count()).select_from(FAILED))
        busy = sum(
            connection.scalar(sa.select(sa.func.count()).select_from(table)) or 0
            for table in (READY, SCHEDULED, CLAIMED)
        )
    return bool(unfinished == failed and not busy)


def wait_for_drain(engine: sa.Engine, job_name: str, work: WorkProcess) -> list[sa.Row[t.Any]]:
    """Wait until the worker ran everything; check nothing failed and no key is held; return
    the run rows of ``job_name``."""
    support.wait_until(lambda: drained(engine, job_name), timeout=DRAIN_TIMEOUT, interval=0.1)
    failures = runtime_support.failures(engine)
    assert failures == {}, json.dumps(failures, indent=1, default=str)
    assert key_rows(engine) == []  # every job started, and so released its key
    return support.rows(engine, RUNS, RUNS.c.job_name == job_name)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_racing_processes_with_a_worker_draining_run_every_discard_job_once(
    app, engine, database_url, work, shape
):
    processes, keys = SHAPES[shape]
    race = run_race(database_url, DEDUPE, keys, processes)
    report(database_url, f"discard, worker draining, {shape}", race, processes)
    check_outcomes(race, {CoalesceStatus.CREATED.value, CoalesceStatus.DISCARDED.value})
    runs = wait_for_drain(engine, DEDUPE, work)
    created = {outcome.job_id: outcome for outcome in race.outcomes if outcome.status == "created"}
    stored = stored_jobs(engine, DEDUPE)
    assert set(stored) == set(created)
    assert all(row.finished_at is not None for row in stored.values())
    # Every job ran once, with its first call's arguments.
    assert collections.Counter(run.job_id for run in runs) == dict.fromkeys(created, 1)
    assert {run.job_id: (run.key, run.value) for run in runs} == {
        job_id: (outcome.key, outcome.value) for job_id, outcome in created.items()
    }
    # A discarded call points at a job of its key, which ran.
    for outcome in race.outcomes:
        assert created[t.cast(int, outcome.job_id)].key == outcome.key, outcome


@pytest.mark.parametrize("shape", list(SHAPES))
def test_racing_processes_with_a_worker_draining_perform_every_collected_call_exactly_once(
    app, engine, database_url, work, shape
):
    processes, keys = SHAPES[shape]
    race = run_race(database_url, COLLECT, keys, processes)
    report(database_url, f"collect, worker draining, {shape}", race, processes)
    check_outcomes(race, {CoalesceStatus.CREATED.value, CoalesceStatus.COLLECTED.value})
    runs = wait_for_drain(engine, COLLECT, work)
    performed = collections.Counter(run.value for run in runs)
    assert performed == dict.fromkeys((outcome.value for outcome in race.outcomes), 1)
    # Each call was performed by the job it reported, in one run of that job.
    assert {run.value: run.job_id for run in runs} == {
        outcome.value: outcome.job_id for outcome in race.outcomes
    }
    runs_of_job: dict[int, set[str]] = collections.defaultdict(set)
    for run in runs:
        runs_of_job[run.job_id].add(run.run)
    assert all(len(tokens) == 1 for tokens in runs_of_job.values()), runs_of_job
    created = {outcome.job_id for outcome in race.outcomes if outcome.status == "created"}
    assert set(runs_of_job) == created == set(stored_jobs(engine, COLLECT))
    sizes = collections.Counter(run.job_id for run in runs)
    assert max(sizes.values()) <= MAX_CALLS, sizes
    assert sorted(run.call_id for run in runs) == [row.id for row in support.rows(engine, CALLS)]


# Two processes on one key, one of them in a transaction.


class Enqueuer:
    """A spawned process with its own app that enqueues one call on request."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def start(self, job_name: str, key: str, value: str) -> None:
        """Ask for one call, and wait until the process is about to make it."""
        self.connection.send((job_name, key, value))
        assert self.connection.poll(10), "the enqueuing process didn't answer"
        assert (message := self.connection.recv()) == "entering", message

    def returned(self, timeout: float = 0) -> bool:
        return self.connection.poll(timeout)

    def outcome(self, timeout: float = 30) -> Outcome:
        assert self.connection.poll(timeout), "the call never returned"
        outcome = self.connection.recv()
        assert isinstance(outcome, Outcome), outcome
        return outcome


@pytest.fixture
def enqueuer(app, database_url: str) -> t.Iterator[Enqueuer]:
    ours, theirs = CONTEXT.Pipe()
    process = CONTEXT.Process(target=jobs.serve, args=(database_url, theirs), daemon=True)
    process.start()
    theirs.close()
    try:
        assert ours.poll(START_TIMEOUT), "the enqueuing process didn't start"
        assert (message := ours.recv()) == "ready", message
        yield Enqueuer(ours)
        ours.send(None)
        process.join(10)
        assert process.exitcode == 0
    finally:
        if process.is_alive():
            process.kill()
            process.join(10)
        ours.close()


@pytest.fixture
def notes(engine: sa.Engine) -> t.Iterator[type[jobs.Note]]:
    """The app's own table, in the queue's database."""
    jobs.Base.metadata.create_all(engine)
    yield jobs.Note
    with engine.begin() as connection:
        connection.execute(jobs.Note.__table__.delete())


@pytest.fixture
def observer(database_url: str) -> t.Iterator[sa.Engine]:
    """A plain engine on the database, to watch lock waits from outside."""
    engine = sa.create_engine(database_url)
    yield engine
    engine.dispose()


def lock_waits(observer: sa.Engine) -> int:
    """How many transactions of this database wait for a lock (PostgreSQL, MariaDB/MySQL)."""
    if observer.dialect.name == "postgresql":
        query = sa.text(
            "SELECT COUNT(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
    else:
        query = sa.text(
            "SELECT COUNT(*) FROM information_schema.innodb_trx AS trx"
            " JOIN information_schema.processlist AS list ON list.id = trx.trx_mysql_thread_id"
            " WHERE trx.trx_state = 'LOCK WAIT' AND list.db = DATABASE()"
        )
    with observer.connect() as connection:
        return int(connection.scalar(query) or 0)


def assert_waits(enqueuer: Enqueuer, observer: sa.Engine) -> None:
    """The other process's call has not returned, and waits: for a row lock (seen in the
    server's lock waits), or on SQLite for the write lock (it hasn't come back within
    :data:`SQLITE_HOLD`)."""
    if observer.dialect.name == "sqlite":
        assert not enqueuer.returned(SQLITE_HOLD), "the call didn't wait for the write lock"
        return
    support.wait_until(lambda: enqueuer.returned() or lock_waits(observer), timeout=10)
    assert not enqueuer.returned(), "the call didn't wait for the key's lock"


class RolledBack(Exception):
    pass


@contextlib.contextmanager
def holding(holder: str, *, commit: bool) -> t.Iterator[None]:
    """A transaction open for the block: ``solidq.transaction()``, or the app session's
    after it wrote a row of the app's; committed or rolled back after the block."""
    if holder == "solidq.transaction":
        with contextlib.suppress(RolledBack), support.solidq.transaction():
            yield
            if not commit:
                raise RolledBack
        return
    support.db.session.add(jobs.Note(text="A"))
    support.db.session.flush()
    yield
    if commit:
        support.db.session.commit()
    else:
        support.db.session.rollback()


HOLDERS = ["solidq.transaction", "app session"]
JOINED = {DEDUPE: CoalesceStatus.DISCARDED.value, COLLECT: CoalesceStatus.COLLECTED.value}


@pytest.mark.parametrize("holder", HOLDERS)
@pytest.mark.parametrize("job_name", [DEDUPE, COLLECT])
def test_a_call_on_a_key_held_by_an_open_transaction_waits_and_joins_its_job_after_the_commit(
    app, engine, notes, enqueuer, observer, holder, job_name
):
    definition = jobs.DEFINITIONS[job_name]
    with app.app_context(), holding(holder, commit=True):
        first = definition.perform_later("K", "A")
        assert first.coalesce_status is CoalesceStatus.CREATED
        enqueuer.start(job_name, "K", "B")
        assert_waits(enqueuer, observer)
    second = enqueuer.outcome()

    assert second.error is None, second.error
    assert (second.status, second.job_id) == (JOINED[job_name], first.provider_job_id)
    assert list(stored_jobs(engine, job_name)) == [first.provider_job_id]
    assert [(row.key, row.job_id) for row in key_rows(engine)] == [
        (coalesce_key(definition, "K"), first.provider_job_id)
    ]
    if job_name == COLLECT:
        assert stored_calls(engine) == {"A": first.provider_job_id, "B": first.provider_job_id}


@pytest.mark.parametrize("holder", HOLDERS)
def test_a_call_waiting_on_a_transaction_that_rolls_back_opens_a_new_job(
    app, engine, notes, enqueuer, observer, holder
):
    with app.app_context(), holding(holder, commit=False):
        first = jobs.dedupe.perform_later("K", "A")
        assert first.coalesce_status is CoalesceStatus.CREATED
        enqueuer.start(DEDUPE, "K", "B")
        assert_waits(enqueuer, observer)
    second = enqueuer.outcome()

    assert second.error is None, second.error
    assert second.status == CoalesceStatus.CREATED.value
    # Only the second call's job is stored (SQLite may give it the rolled-back job's id).
    (job,) = stored_jobs(engine, DEDUPE).values()
    assert (job.id, stored_args(job)) == (second.job_id, ["K", "B"])
    assert job.active_job_id != first.job_id
    assert [(row.key, row.job_id) for row in key_rows(engine)] == [
        (coalesce_key(jobs.dedupe, "K"), second.job_id)
    ]
    assert support.count(engine, jobs.Note) == 0

"""Fault injection: a real `flask solidq work` with a backlog, through a broken path to its
database, and one worker of two SIGKILLed at random moments.

The path faults (PostgreSQL and MariaDB/MySQL): every process of `flask solidq work` reaches
the database through :class:`~tests.support.fault_proxy.FaultProxy`, while the test enqueues and
reads directly, and the jobs record their runs directly too (so the evidence doesn't depend on the
path under test). Mid-backlog the path is reset, blackholed, half-cut, or half-cut then reset
(replies lost: a claim committed on the server while its worker saw an error) for a few
seconds, then healed. Afterwards every job ran exactly once (or failed with a worker-death
reason), no claim is left, and work resumed within :data:`RESUME_BOUND` seconds of the heal.
The processes' alive threshold is longer than the faults, as in production: nobody is pruned
for a short outage.

The SIGKILL test (every backend): `--processes 2`, and in each of three seeded rounds one
worker is killed at a random moment of a backlog; with ``SOLIDQ_ON_WORKER_DEATH="fail"`` (the
default) its jobs fail naming it, every other job runs exactly once, and the supervisor
replaces it.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import threading
import time
import typing as t

import pytest
import sqlalchemy as sa
from flask import current_app

from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import worker as worker_jobs
from tests.jobs.worker import RUNS
from tests.support import fault_proxy
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import FAILED
from tests.support.runtime import JOBS

if t.TYPE_CHECKING:
    import pathlib

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

ALL_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker"]
JOB_NAME = "fault_test.step"
#: The errors of a job whose worker died or vanished while it held the job's claim.
DEATH_ERRORS = {
    "flask_solidq.ProcessExitError",
    "flask_solidq.ProcessPrunedError",
    "flask_solidq.ProcessMissingError",
}

#: How long each path fault lasts, in seconds.
FAULT_SECONDS = 3.0
#: The most seconds between healing the path and the next job starting. A poll that failed
#: backs off up to 10 s (``processes.poller.MAX_ERROR_BACKOFF``); measured resumptions are
#: well under it (see the README's "When the database goes away").
RESUME_BOUND = 15.0
#: The most seconds the whole backlog may take to settle after the heal.
SETTLE_TIMEOUT = 60.0
#: The worker's threads in the path-fault tests.
THREADS = 3

#: Seeds the SIGKILL rounds: the moment of each kill and the worker killed.
SIGKILL_SEED = 20261130
SIGKILL_ROUNDS = 3

FAULT_CONFIG: dict[str, t.Any] = {
    # Faults are shorter than this, as in production: nobody is pruned for a short outage.
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 30,
    "SOLIDQ_WORKERS": [
        {"queues": "*", "threads": THREADS, "processes": 1, "polling_interval": 0.05}
    ],
}
SIGKILL_CONFIG: dict[str, t.Any] = {
    # A short threshold: a killed worker's replacement and any pruning come quickly.
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 2,
    "SOLIDQ_PROCESS_HEARTBEAT_INTERVAL": 0.3,
}


# The job: it records its run in solidq_test_runs, directly when the worker's path to the
# database goes through the proxy (FAULT_TEST_RUNS_URL), through the queue's engine otherwise.

_direct_engines: dict[str, sa.Engine] = {}
_direct_lock = threading.Lock()


def _direct_engine(url: str) -> sa.Engine:
    with _direct_lock:
        engine = _direct_engines.get(url)
        if engine is None:
            engine = _direct_engines[url] = sa.create_engine(url, pool_size=THREADS + 1)
        return engine


@support.solidq.job(name=JOB_NAME)
def step(value: str, seconds: float) -> None:
    """Sleep ``seconds``, then record a finished run."""
    time.sleep(seconds)
    url = current_app.config.get("FAULT_TEST_RUNS_URL")
    if url is None:
        worker_jobs.record_run(JOB_NAME, value)
        return
    now = utcnow()
    row = {
        "job_name": JOB_NAME,
        "value": value,
        "pid": os.getpid(),
        "thread": threading.current_thread().name,
        "started_at": now,
        "finished_at": now,
    }
    with _direct_engine(url).begin() as connection:
        connection.execute(RUNS.insert(), row)


# Helpers.


def server_backends() -> list[t.Any]:
    return [
        pytest.param(backend, id=backend)
        for backend in ("postgres", "mysql")
        if support.backend_url(backend)
    ]


def enqueue_backlog(
    app, prefix: str, count: int, seconds: float, *, job: t.Any = None
) -> dict[int, str]:
    """Enqueue ``count`` ``job(value, seconds)`` jobs (:func:`step` by default) in one go;
    return job id -> value."""
    job = job or step
    with app.app_context():
        values = [f"{prefix}-{index}" for index in range(count)]
        jobs = [job.new(value, seconds) for value in values]
        support.solidq.perform_all_later(jobs)
        return {job.provider_job_id: value for job, value in zip(jobs, values, strict=True)}


def run_count(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        query = sa.select(sa.func.count()).select_from(RUNS).where(RUNS.c.job_name == JOB_NAME)
        return int(connection.scalar(query) or 0)


def settled(engine: sa.Engine, job_ids: t.Collection[int]) -> bool:
    """Whether every job of ``job_ids`` finished or failed, and no claim is left."""
    with engine.connect() as connection:
        finished = set(
            connection.scalars(sa.select(JOBS.c.id).where(JOBS.c.finished_at.is_not(None)))
        )
        failed = set(connection.scalars(sa.select(FAILED.c.job_id)))
        claims = connection.scalar(sa.select(sa.func.count()).select_from(CLAIMED))
    return set(job_ids) <= finished | failed and not claims


def check_exactly_once(
    engine: sa.Engine, jobs: dict[int, str], runs: collections.Counter[str] | None = None
) -> int:
    """Every job of ``jobs`` finished after exactly one run, or failed with a worker-death
    reason after at most one; return how many failed. ``runs`` counts the runs by value
    (read from ``solidq_test_runs`` when not given)."""
    if runs is None:
        runs = collections.Counter(run.value for run in runtime_support.runs(engine, JOB_NAME))
    finished = runtime_support.finished_ids(engine)
    failures = runtime_support.failures(engine)
    problems = []
    for job_id, value in jobs.items():
        if job_id in finished:
            if runs[value] != 1:
                problems.append(f"job {job_id} ({value}) finished after {runs[value]} runs")
        elif job_id in failures:
            error = failures[job_id]
            if error["exception_class"] not in DEATH_ERRORS or not error["message"]:
                problems.append(f"job {job_id} ({value}) failed with {error}")
            elif runs[value] > 1:
                problems.append(f"job {job_id} ({value}) failed after {runs[value]} runs")
        else:
            problems.append(f"job {job_id} ({value}) neither finished nor failed")
    assert not problems, problems
    assert not support.rows(engine, CLAIMED)
    return sum(1 for job_id in jobs if job_id in failures)


def report(backend: str, text: str) -> None:
    """A measurement, for the README (seen with ``pytest -s``)."""
    print(f"\n[faults] {backend}: {text}")


# The path faults.


@pytest.fixture
def proxy(database_url: str) -> t.Iterator[fault_proxy.FaultProxy]:
    with fault_proxy.FaultProxy.for_url(database_url, lifetime=180) as proxy:
        yield proxy


def inject(proxy: fault_proxy.FaultProxy, fault: str) -> None:
    """Break the path for :data:`FAULT_SECONDS` (the only sleep: the fault's own duration)."""
    if fault == "lost-replies":
        proxy.set_mode(fault_proxy.HALF_CUT)
        time.sleep(FAULT_SECONDS)
        proxy.set_mode(fault_proxy.RESET)  # the held replies are lost with their connections
    else:
        proxy.set_mode(fault)
        time.sleep(FAULT_SECONDS)


@pytest.mark.parametrize("database_url", server_backends(), indirect=True)
@pytest.mark.parametrize(
    "fault", [fault_proxy.RESET, fault_proxy.BLACKHOLE, fault_proxy.HALF_CUT, "lost-replies"]
)
def test_work_goes_through_a_broken_path_and_every_job_runs_once(
    fault: str,
    database_url: str,
    app,
    engine,
    runs_table,
    proxy: fault_proxy.FaultProxy,
    tmp_path: pathlib.Path,
):
    backend = sa.make_url(database_url).get_backend_name()
    through_proxy = runtime_support.Launcher(proxy.url(database_url), tmp_path)
    try:
        work = through_proxy.start(config={**FAULT_CONFIG, "FAULT_TEST_RUNS_URL": database_url})
        runtime_support.wait_for_kinds(engine, ALL_KINDS)
        jobs = enqueue_backlog(app, fault, 300, 0.02)
        support.wait_until(lambda: run_count(engine) >= 30, timeout=30)

        before = run_count(engine)
        inject(proxy, fault)
        during = run_count(engine) - before
        at_heal = run_count(engine)
        healed = time.monotonic()
        proxy.set_mode(fault_proxy.PASS)

        support.wait_until(lambda: run_count(engine) > at_heal, timeout=RESUME_BOUND)
        resumed = time.monotonic() - healed
        support.wait_until(lambda: settled(engine, jobs), timeout=SETTLE_TIMEOUT)
        drained = time.monotonic() - healed
        failed = check_exactly_once(engine, jobs)
        # The processes rode it out: nobody was pruned or replaced.
        assert runtime_support.kinds(engine) == sorted(ALL_KINDS)
        strays = "released" if "none of its threads held" in work.output() else "none"
        report(
            backend,
            f"{fault}: {during} runs during the fault, resumed {resumed:.2f}s after the heal,"
            f" backlog drained {drained:.2f}s after it, {failed} failed, stray claims {strays},"
            f" {proxy.resets} connections reset",
        )
    finally:
        through_proxy.kill_all()


# SIGKILL of one worker of two, at random moments.


def test_sigkill_of_one_worker_of_two_at_random_moments_loses_no_job(
    database_url: str, app, engine, launcher
):
    backend = sa.make_url(database_url).get_backend_name()
    rng = random.Random(f"{SIGKILL_SEED}-{backend}")
    launcher.start("--processes", "2", "--threads", "3", config=SIGKILL_CONFIG)
    runtime_support.wait_for_kinds(engine, [*ALL_KINDS, "Worker"])
    for round_ in range(SIGKILL_ROUNDS):
        kill_one_worker_mid_backlog(app, engine, rng, round_, backend)
        runtime_support.delete_queue_rows(engine)


def kill_one_worker_mid_backlog(
    app, engine: sa.Engine, rng: random.Random, round_: int, backend: str
) -> None:
    """One round: a backlog, one worker killed at a random moment of it, the checks."""
    jobs = enqueue_backlog(app, f"round{round_}", 120, 0.03)
    support.wait_until(lambda: run_count(engine) > 0, timeout=30)
    time.sleep(rng.uniform(0.0, 0.6))  # the random moment: the fault's own timing
    victim = rng.choice(runtime_support.processes(engine, "Worker"))
    os.kill(victim.pid, signal.SIGKILL)
    killed = time.monotonic()

    support.wait_until(lambda: settled(engine, jobs), timeout=SETTLE_TIMEOUT)
    failed = check_exactly_once(engine, jobs)
    errors = runtime_support.failures(engine)
    assert all(f"pid {victim.pid}" in error["message"] for error in errors.values()), errors
    # The supervisor replaced the killed worker (compared by pid: SQLite reuses row ids).
    support.wait_until(
        lambda: (
            [row.pid == victim.pid for row in runtime_support.processes(engine, "Worker")]
            == [False, False]
        ),
        timeout=30,
    )
    report(
        backend,
        f"SIGKILL round {round_}: {failed} jobs failed with the killed worker, settled"
        f" {time.monotonic() - killed:.2f}s after the kill",
    )

"""A worker paused past the alive threshold (SIGSTOP, as a VM pause, a debugger or a stalled
container does) is pruned by its supervisor, which is not paused. When it wakes, its claim
thread may poll before its heartbeat finds its row gone: it must claim nothing, drop the late
outcome of the job it held (saying so), stop, and be replaced; the job it held follows
``SOLIDQ_ON_WORKER_DEATH``."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.storage import db
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import worker as worker_jobs
from tests.processes.test_shutdown import enqueue_sleep
from tests.processes.test_shutdown import running
from tests.support import runtime as runtime_support
from tests.support.runtime import CLAIMED
from tests.support.runtime import READY
from tests.support.runtime import SCHEDULED

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

#: Jobs enqueued while the worker is paused, for whoever claims first when it wakes.
ARRIVALS = 6

#: Seconds the woken worker's claim thread polls while its heartbeat is held back (see
#: :func:`heartbeats_held_back`).
CLAIMING_WINDOW = 1.0


@contextlib.contextmanager
def heartbeats_held_back(engine: sa.Engine) -> t.Iterator[None]:
    """PostgreSQL: hold every write to ``solidq_processes`` back (a heartbeat is one) for the
    block, but not a claim's ``FOR KEY SHARE`` of a process row, so a woken worker claims
    before it can learn it was pruned, every time. Elsewhere the race runs as it comes."""
    if engine.dialect.name != "postgresql":
        yield
        return
    with engine.connect() as connection, connection.begin():
        connection.exec_driver_sql("LOCK TABLE solidq_processes IN SHARE MODE")
        yield


@pytest.mark.parametrize("policy", ["fail", "release"])
def test_a_worker_paused_past_the_threshold_claims_nothing_when_it_wakes(
    app, engine, launcher, policy
):
    held = enqueue_sleep(app, "held", 2.0, rerun_seconds=0)
    work = launcher.start(
        config={"SOLIDQ_PROCESS_ALIVE_THRESHOLD": 2, "SOLIDQ_ON_WORKER_DEATH": policy}
    )
    paused = support.wait_until(lambda: running(engine, "held"), timeout=30).pid
    (worker,) = runtime_support.processes(engine, "Worker")

    os.kill(paused, signal.SIGSTOP)
    try:
        # Its own supervisor, still running, prunes it and handles the job it held.
        support.wait_until(
            lambda: worker.id not in {row.id for row in runtime_support.processes(engine)},
            timeout=20,
        )
        with app.app_context():
            arrivals = [
                worker_jobs.record.perform_later(f"arrival-{index}").provider_job_id
                for index in range(ARRIVALS)
            ]
        with heartbeats_held_back(engine):
            # The claim thread wakes and polls (every 50 ms) while the heartbeat that would
            # stop it waits: it must find the jobs that arrived and claim none of them.
            os.kill(paused, signal.SIGCONT)
            time.sleep(CLAIMING_WINDOW)
    finally:
        with contextlib.suppress(ProcessLookupError):  # woken already, and maybe gone
            os.kill(paused, signal.SIGCONT)

    # It wakes, stops (its heartbeat finds it pruned) and is replaced; every job runs.
    done = {*arrivals, held} if policy == "release" else set(arrivals)
    support.wait_until(lambda: runtime_support.finished_ids(engine) == done, timeout=30)
    record_runs = runtime_support.runs(engine, "worker_test.record")
    assert sorted(run.value for run in record_runs) == sorted(
        f"arrival-{index}" for index in range(ARRIVALS)
    )
    assert paused not in {run.pid for run in record_runs}, "the pruned worker claimed"
    support.wait_until(lambda: replaced(engine, paused), timeout=20)
    assert support.count(engine, CLAIMED) == 0
    assert support.count(engine, READY) == 0

    # The job it held: failed as pruned, or run again by the replacement (both runs finish:
    # a pause can't stop the run that was under way).
    held_runs = [(run.pid == paused, run.finished_at is not None) for run in held_job_runs(engine)]
    errors = runtime_support.failures(engine)
    if policy == "fail":
        assert errors[held]["exception_class"] == "flask_solidq.ProcessPrunedError"
        assert held_runs == [(True, True)]
    else:
        assert errors == {}
        assert held_runs == [(True, True), (False, True)]
    # Its late outcome was dropped, and its log says so.
    support.wait_until(
        lambda: f"dropped the finished outcome of job {held} (worker_test.sleep)" in work.output(),
        timeout=10,
    )


def replaced(engine, paused: int) -> bool:
    """Whether one worker is registered, and not the paused one."""
    return [row.pid == paused for row in runtime_support.processes(engine, "Worker")] == [False]


def held_job_runs(engine):
    """The runs of the held sleep job, in the order they started."""
    runs = [run for run in runtime_support.runs(engine, "worker_test.sleep") if run.value == "held"]
    return sorted(runs, key=lambda run: run.started_at)


def test_a_live_supervisor_handles_claims_of_a_missing_process_without_a_restart(
    app, engine, launcher
):
    launcher.start()
    runtime_support.wait_for_kinds(engine, ["Dispatcher", "Supervisor(fork)", "Worker"])
    # A claim whose process row is gone (deleted by hand, say), after the supervisor started.
    vanished = claim_of_a_missing_process_beside_a_worker(app, engine)

    errors = support.wait_until(lambda: runtime_support.failures(engine), timeout=10)
    assert errors[vanished]["exception_class"] == "flask_solidq.ProcessMissingError"
    assert support.count(engine, CLAIMED) == 0


def claim_of_a_missing_process_beside_a_worker(app, engine) -> int:
    """A job claimed by a process id no row has, made while a worker polls: the job is
    scheduled an hour ahead first, so no claim or dispatch of the worker's touches it (a
    ready row deleted under a polling MariaDB worker can deadlock with its claim)."""
    with app.app_context():
        job = worker_jobs.record.set(queue="nobody", wait=3600).perform_later("lost")
    job_id = t.cast(int, job.provider_job_id)

    def move() -> None:
        with engine.begin() as connection:
            connection.execute(SCHEDULED.delete().where(SCHEDULED.c.job_id == job_id))
            connection.execute(
                CLAIMED.insert().values(job_id=job_id, process_id=10**9, created_at=utcnow())
            )

    db.retrying_deadlocks(move)
    return job_id

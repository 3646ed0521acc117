"""One clock decides: processes whose host clocks run ahead or behind (Debian's libfaketime,
``faketime -f +2s``) keep the queue's promises by the database's clock.

* Two `flask solidq work` drain one budget together, one of them 2 s ahead or behind: the
  budget's admissions never exceed the limit in any window, and no job starts before its
  admission, both read from the database's clock.
* A supervisor and a dispatcher 10 s ahead neither prune live processes (whose heartbeats
  look 10 s old by their clock) nor run a scheduled job before its time.

PostgreSQL and MariaDB only: a SQLite database is a file on one host, whose processes share
that host's clock (libfaketime on one of them would be a test of something that can't
happen).
"""

from __future__ import annotations

import datetime as dt
import pathlib
import shutil
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq import models
from tests import support
from tests.controls.rate_limit.test_rate_limit_processes import CONFIG
from tests.controls.rate_limit.test_rate_limit_processes import enqueue_all
from tests.controls.rate_limit.test_rate_limit_processes import most_in_a_window
from tests.controls.rate_limit.test_rate_limit_processes import seconds
from tests.controls.rate_limit.test_rate_limit_processes import wait_for_runs
from tests.jobs import rate_limit_process as jobs
from tests.jobs import worker as worker_jobs
from tests.jobs.rate_limit_process import RUNS
from tests.processes import test_faults
from tests.support import runtime as runtime_support
from tests.support.runtime import WorkProcess

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)

#: Jobs a test drains: 8 seconds' worth of the limit, for both workers to claim many.
JOBS = 40

#: Each `flask solidq work`: one worker process of three threads, polling fast.
WORK_ARGS = ["--processes", "1", "--threads", "3", "--polling-interval", "0.05"]

#: Seconds the skewed supervisor and dispatcher run ahead: more than the alive threshold of
#: the fast settings (3 s), and than the scheduled job's wait.
AHEAD = 10

#: The scheduled job's wait: longer than the alive threshold, so the skewed supervisor prunes
#: (or doesn't) before the job comes due.
SCHEDULED_WAIT = 4.0

runs_table = runtime_support.runs_table


def skewed(offset: str) -> list[str]:
    """The command prefix that runs a process with its clock ``offset`` (``+2s``, ``-2s``)
    from the host's: its wall clock only; its monotonic clock, which times its sleeps, is
    left alone."""
    return ["env", "FAKETIME_DONT_FAKE_MONOTONIC=1", "faketime", "-f", offset]


@pytest.mark.parametrize("database_url", test_faults.server_backends(), indirect=True)
@pytest.mark.parametrize("offset", ["+2s", "-2s"])
def test_a_worker_with_a_skewed_clock_keeps_the_limit_by_the_database_clock(
    app: Flask, database_url: str, tmp_path: pathlib.Path, offset: str
) -> None:
    assert shutil.which("faketime"), "Debian's faketime package is needed (.ci/run installs it)"
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    RUNS.create(engine, checkfirst=True)
    started: list[WorkProcess] = []
    try:
        for name, prefix in (("plain", []), ("skewed", skewed(offset))):
            started.append(
                WorkProcess(
                    database_url,
                    ["work", *WORK_ARGS],
                    config=CONFIG,
                    log_path=tmp_path / f"{name}.log",
                    app_module="tests.apps.rate_limit_app",
                    prefix=prefix,
                )
            )
        support.wait_until(lambda: len(worker_pids(engine)) == 2, timeout=30)
        job_ids = enqueue_all(app, jobs.skewed, [(value,) for value in range(JOBS)])
        found = wait_for_runs(engine, "rate_process_test.skewed", job_ids)
        workers = worker_pids(engine)
    finally:
        for work in started:
            work.kill()
        with engine.begin() as connection:
            rows = connection.execute(sa.select(RUNS.c.pid, RUNS.c.started_at)).all()
            connection.execute(RUNS.delete())

    limit = jobs.SKEWED
    admissions = [run.admitted_at for run in found]
    assert most_in_a_window(admissions, limit.per) <= limit.to, [
        seconds(at - admissions[0]) for at in admissions
    ]
    # By the database's clock, no job starts before the moment its claim was charged, even
    # one charged a moment ahead and waited for by a worker whose own clock is off. (How far
    # after is the hand-off's speed, not the limit's: a skewed worker's first runs open their
    # connections, and have started up to a second late on a loaded machine.)
    early = [run for run in found if run.started_at < run.admitted_at]
    assert not early, [(run.admitted_at, run.started_at) for run in early]
    # Both workers claimed: the skewed one's claims were charged by the database's clock too.
    assert {row.pid for row in rows} == workers


def worker_pids(engine: sa.Engine) -> set[int]:
    """The pids of the registered worker processes."""
    return {row.pid for row in support.rows(engine, PROCESSES, PROCESSES.c.kind == "Worker")}


@pytest.mark.parametrize("database_url", test_faults.server_backends(), indirect=True)
def test_a_supervisor_and_dispatcher_ahead_neither_prune_live_processes_nor_run_jobs_early(
    app: Flask, database_url: str, tmp_path: pathlib.Path, runs_table: sa.Table
) -> None:
    assert shutil.which("faketime"), "Debian's faketime package is needed (.ci/run installs it)"
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
        job = worker_jobs.record.set(wait=SCHEDULED_WAIT).perform_later("scheduled")
    # Started after the enqueue: the job waits in scheduled executions, for the dispatchers.
    plain = WorkProcess(database_url, ["work"], log_path=tmp_path / "plain.log")
    ahead = WorkProcess(
        database_url,
        ["work", "--only", "dispatcher"],
        log_path=tmp_path / "ahead.log",
        prefix=skewed(f"+{AHEAD}s"),
    )
    try:
        support.wait_until(lambda: len(runtime_support.processes(engine)) == 5, timeout=30)
        registered = {row.id for row in runtime_support.processes(engine)}
        (run,) = support.wait_until(lambda: runtime_support.runs(engine), timeout=30)
        # The alive threshold (3 s) has passed more than once since they all registered.
        assert {row.id for row in runtime_support.processes(engine)} == registered
    finally:
        plain.kill()
        ahead.kill()
    assert run.started_at >= t.cast(dt.datetime, job.scheduled_at)
    assert "pruned" not in ahead.output() + plain.output()

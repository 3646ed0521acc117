"""Without the budgets table, in real `flask solidq work` processes, on every backend: the
rate limit fails closed and everything else carries on
(:mod:`flask_solidq.controls.rate_limit.budget_table`).

Each test starts `flask solidq work --threads 3` (two worker processes, or one, and a
dispatcher, polling fast) on the rate-limit app, with ``solidq_rate_limits`` renamed away
before the start or while the workers run, and reads what they did (each run leaves a row in
``solidq_test_rate_runs``) and what they logged.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import pathlib
import re
import signal
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.controls.rate_limit import budget_table
from flask_solidq.timing import utcnow
from tests import support
from tests.apps import budget_table_app
from tests.controls.rate_limit.test_budget_table import Table
from tests.jobs import rate_limit_process as jobs
from tests.jobs.rate_limit_process import RUNS
from tests.support.runtime import FAILED
from tests.support.runtime import JOBS
from tests.support.runtime import SCHEDULED
from tests.support.runtime import WorkProcess
from tests.support.runtime import kinds
from tests.support.runtime import processes

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes

WORK_ARGS = ["--threads", "3", "--polling-interval", "0.05"]
CONFIG: dict[str, t.Any] = {
    "SOLIDQ_DISPATCHERS": [{"polling_interval": 0.1}],
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 60,
}

#: How long the tests watch the workers run without the table, in seconds.
WATCH = 10.0
#: The longest any job the tests wait for may take to run (a deadline, not an expectation).
DEADLINE = 30.0

#: A line of the text log: its time, level and message.
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) (.*)$")
MISSING = re.compile(
    r"SolidQ process (\d+) can't check rate limits: the table solidq_rate_limits is missing"
)
STILL_MISSING = re.compile(r"SolidQ process (\d+): the table solidq_rate_limits is still missing")
FOUND = re.compile(r"SolidQ process (\d+) found the table solidq_rate_limits again")


class Line(t.NamedTuple):
    at: dt.datetime
    level: str
    message: str


@pytest.fixture
def engine(app: Flask) -> t.Iterator[sa.Engine]:
    """``app``'s queue engine, with the runs table the jobs write to (emptied afterwards)."""
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    RUNS.create(engine, checkfirst=True)
    yield engine
    with engine.begin() as connection:
        connection.execute(RUNS.delete())


@pytest.fixture
def table(engine: sa.Engine) -> t.Iterator[Table]:
    """Renames the budgets table away and back (back before ``app`` empties the tables)."""
    handle = Table(engine)
    try:
        yield handle
    finally:
        if handle.away:
            handle.bring_back()


@pytest.fixture
def start(
    database_url: str, engine: sa.Engine, tmp_path: pathlib.Path
) -> t.Iterator[t.Callable[..., WorkProcess]]:
    """``start(app_module, worker_processes=2)`` starts `flask solidq work` and waits until
    its processes are registered; each is killed (with its whole group) after the test."""
    started: list[WorkProcess] = []

    def start(app_module: str, worker_processes: int = 2) -> WorkProcess:
        args = ["--processes", str(worker_processes), *WORK_ARGS]
        work = WorkProcess(
            database_url,
            ["work", *args],
            config=CONFIG,
            log_path=tmp_path / f"work-{len(started)}.log",
            app_module=app_module,
        )
        started.append(work)
        expected = ["Dispatcher", "Supervisor(fork)", *["Worker"] * worker_processes]
        support.wait_until(lambda: kinds(engine) == expected, timeout=30)
        return work

    try:
        yield start
    finally:
        for work in started:
            work.kill()


def enqueue(app: Flask, definition: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, definition.perform_later(*args).provider_job_id)


def ran(engine: sa.Engine, job_ids: t.Iterable[int]) -> set[int]:
    """Which of ``job_ids`` ran (left a run row)."""
    return {row.job_id for row in support.rows(engine, RUNS, RUNS.c.job_id.in_(list(job_ids)))}


def unfinished(engine: sa.Engine, job_ids: t.Iterable[int]) -> set[int]:
    """Which of ``job_ids`` have no outcome stored yet (kept finished jobs have one)."""
    ids = list(job_ids)
    rows = support.rows(engine, JOBS, JOBS.c.id.in_(ids), JOBS.c.finished_at.is_(None))
    return {row.id for row in rows}


def deferred_until(engine: sa.Engine, job_ids: list[int]) -> dict[int, dt.datetime]:
    """The scheduled executions of ``job_ids``, by job id."""
    found = support.rows(engine, SCHEDULED, SCHEDULED.c.job_id.in_(job_ids))
    return {row.job_id: row.scheduled_at for row in found}


def log_lines(work: WorkProcess) -> list[Line]:
    lines = []
    for text in work.output().splitlines():
        match = LINE.match(text)
        if match:
            at = dt.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")
            lines.append(Line(at, match.group(2), match.group(3)))
    return lines


def errors_by_process(work: WorkProcess) -> dict[int, list[Line]]:
    """The ERROR lines, by the pid each names; every ERROR line must be about the table."""
    found: dict[int, list[Line]] = collections.defaultdict(list)
    for line in log_lines(work):
        if line.level in ("ERROR", "CRITICAL"):
            match = MISSING.match(line.message) or STILL_MISSING.match(line.message)
            assert match, line
            found[int(match.group(1))].append(line)
    return dict(found)


def worker_pids(engine: sa.Engine) -> set[int]:
    return {row.pid for row in processes(engine, "Worker")}


def stop(work: WorkProcess) -> None:
    work.signal(signal.SIGTERM)
    assert work.wait(20) == 0, work.output()


@pytest.mark.parametrize("gone", ["before the start", "while the workers run"])
def test_without_the_table_limited_jobs_wait_a_minute_every_other_job_runs_one_error_a_process(
    app, engine, table, start, gone
):
    if gone == "before the start":
        table.take_away()
    work = start("tests.apps.rate_limit_app")  # the workers start without it
    if gone == "while the workers run":
        # Each worker finds the table first (a limited job per account, admitted at once).
        early = [enqueue(app, jobs.keyed, f"early{index}", index) for index in range(6)]
        support.wait_until(lambda: ran(engine, early) == set(early), timeout=DEADLINE)
        table.take_away()

    limited: dict[int, dt.datetime] = {}
    unlimited: list[int] = []
    watch_until = time.monotonic() + WATCH
    index = 0
    while time.monotonic() < watch_until:
        enqueued_at = utcnow()
        limited[enqueue(app, jobs.keyed, f"account{index}", index)] = enqueued_at
        limited[enqueue(app, jobs.slow, index)] = enqueued_at
        unlimited.append(enqueue(app, jobs.unlimited, index))
        index += 1
        time.sleep(0.25)  # the pace of arrivals, not a wait for an outcome

    support.wait_until(lambda: ran(engine, unlimited) == set(unlimited), timeout=DEADLINE)
    support.wait_until(
        lambda: len(deferred_until(engine, list(limited))) == len(limited), timeout=DEADLINE
    )
    assert ran(engine, limited) == set()
    until = deferred_until(engine, list(limited))
    latest = utcnow() + budget_table.TABLE_MISSING_WAIT
    for job_id, enqueued_at in limited.items():
        assert enqueued_at + budget_table.TABLE_MISSING_WAIT <= until[job_id] <= latest
    assert support.rows(engine, FAILED) == []

    errors = errors_by_process(work)
    assert errors, work.output()
    assert set(errors) <= worker_pids(engine)
    assert all(len(lines) == 1 for lines in errors.values()), errors
    assert "Traceback" not in work.output()
    assert "can't reach the database" not in work.output()  # no outage either (SQLite's)
    stop(work)


def test_a_table_migrated_back_under_running_workers_is_found_without_a_restart(
    app, engine, table, start
):
    """With the waits scaled down (:mod:`tests.apps.budget_table_app`): a limited job waits
    a second at a time, a process looks for the table every second and says it is still
    missing every three."""
    table.take_away()
    # One worker process: the one that finds the table missing is the one that must find it
    # again for the limited jobs to run.
    work = start("tests.apps.budget_table_app", worker_processes=1)
    supervisor = work.pid
    limited = [enqueue(app, jobs.keyed, f"account{index}", index) for index in range(4)]
    unlimited = enqueue(app, jobs.unlimited, "runs")

    def reminded() -> bool:
        return any(len(lines) > 1 for lines in errors_by_process(work).values())

    support.wait_until(reminded, timeout=DEADLINE)
    assert ran(engine, [unlimited]) == {unlimited}
    assert ran(engine, limited) == set()
    for lines in errors_by_process(work).values():
        gaps = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(lines)]
        # The log's times are to the millisecond.
        assert all(gap >= budget_table_app.REMINDER - 0.001 for gap in gaps), lines
        assert [bool(STILL_MISSING.match(line.message)) for line in lines] == [
            False,
            *(True for _ in lines[1:]),
        ]

    table.bring_back()

    # A run row is written as the job starts; its outcome is stored a moment later.
    support.wait_until(lambda: not unfinished(engine, limited), timeout=DEADLINE)
    found = {
        int(match.group(1))
        for line in log_lines(work)
        if line.level == "INFO" and (match := FOUND.match(line.message))
    }
    assert found == set(errors_by_process(work)) == worker_pids(engine), work.output()
    assert work.pid == supervisor and work.process.poll() is None  # no restart
    assert support.rows(engine, FAILED) == []
    assert ran(engine, limited) == set(limited)
    assert "Traceback" not in work.output()
    stop(work)

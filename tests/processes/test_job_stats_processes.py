"""A real ``flask solidq work`` counting its runs into ``solidq_job_stats``, on every backend:
runs, failures, the duration and latency bands and maxima per job class and queue, written
every ``SOLIDQ_STATS_FLUSH_INTERVAL`` and once more when the worker stops."""

from __future__ import annotations

import datetime as dt
import signal
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.models.job_stats import DURATION_BANDS
from flask_solidq.models.tables import JOB_STATS
from flask_solidq.processes.job_stats import band
from flask_solidq.reads import job_stats
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import worker as worker_jobs
from tests.support import runtime as runtime_support
from tests.support.runtime import JOBS

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes

runs_table = runtime_support.runs_table
launcher = runtime_support.launcher

#: How long before it was enqueued the quick jobs were due: their queue latency is this plus
#: the worker's start.
DUE_BEFORE = 80.0


def enqueue(app: Flask, job: t.Any, *args: t.Any) -> int:
    with app.app_context():
        return t.cast(int, job.perform_later(*args).provider_job_id)


def figures_by_job(engine: sa.Engine) -> dict[str, job_stats.Figures]:
    since = job_stats.Window.HOUR.since(utcnow())
    with engine.connect() as connection:
        return {each.name: each for each in job_stats.figures(connection, since).jobs}


def runs_counted(engine: sa.Engine) -> int:
    return sum(each.runs for each in figures_by_job(engine).values())


def test_a_worker_counts_runs_failures_durations_and_latency_per_job_and_queue(
    app: Flask, engine: sa.Engine, launcher: runtime_support.Launcher
) -> None:
    quick = [enqueue(app, worker_jobs.noop, index) for index in range(6)]
    due_at = utcnow() - dt.timedelta(seconds=DUE_BEFORE)
    with engine.begin() as connection:
        connection.execute(JOBS.update().where(JOBS.c.id.in_(quick)).values(scheduled_at=due_at))
    for index in range(3):
        enqueue(app, worker_jobs.fail, index)
    for index in range(2):
        enqueue(app, worker_jobs.sleep, index, 0.3)

    launcher.start(config={"SOLIDQ_STATS_FLUSH_INTERVAL": 0.2})
    support.wait_until(lambda: runs_counted(engine) == 11, timeout=60, interval=0.2)

    figures = figures_by_job(engine)
    noop, fail, sleep = (figures[f"worker_test.{name}"] for name in ("noop", "fail", "sleep"))
    assert (noop.runs, noop.failures, fail.runs, fail.failures) == (6, 0, 3, 3)
    assert (sleep.runs, sleep.failures) == (2, 0)
    assert 0.3 <= sleep.duration_max < 0.512
    assert 0.256 <= sleep.duration_p50 <= sleep.duration_max
    assert noop.duration_max < 0.256
    assert DUE_BEFORE <= noop.latency_max < DUE_BEFORE + runtime_support.START_TIMEOUT
    assert 2 ** (band(DUE_BEFORE) - 1) / 1000 <= noop.latency_p50 <= noop.latency_max
    assert fail.latency_max < DUE_BEFORE
    with engine.connect() as connection:
        sleep_bands = connection.execute(
            sa.select(*(sa.func.sum(JOB_STATS.c[name]) for name in DURATION_BANDS)).where(
                JOB_STATS.c.class_name == "worker_test.sleep"
            )
        ).one()
        (queue,) = job_stats.figures(connection, job_stats.Window.HOUR.since(utcnow())).queues
    assert {index: count for index, count in enumerate(sleep_bands) if count} == {9: 2}
    assert (queue.name, queue.runs, queue.failures) == ("default", 11, 3)


def test_a_stopping_worker_writes_what_it_counted_since_its_last_write(
    app: Flask, engine: sa.Engine, launcher: runtime_support.Launcher
) -> None:
    job_ids = {enqueue(app, worker_jobs.record, index) for index in range(4)}
    work = launcher.start(config={"SOLIDQ_STATS_FLUSH_INTERVAL": 3600})
    support.wait_until(
        lambda: job_ids <= runtime_support.finished_ids(engine), timeout=60, interval=0.1
    )
    assert runs_counted(engine) == 0  # an hour before its first write

    work.signal(signal.SIGTERM)
    assert work.wait(30) == 0

    assert runs_counted(engine) == 4


def test_a_supervisor_deletes_the_minutes_past_the_retention(
    app: Flask, engine: sa.Engine, launcher: runtime_support.Launcher
) -> None:
    now = utcnow().replace(second=0, microsecond=0)
    rows = [
        {"minute_at": now - dt.timedelta(minutes=minutes), "class_name": "Old", "queue_name": "q"}
        for minutes in (2, 90)
    ]
    zeros = {column.name: 0 for column in JOB_STATS.c if column.name not in ("id", *rows[0])}
    with engine.begin() as connection:
        connection.execute(JOB_STATS.insert(), [{**row, **zeros} for row in rows])

    launcher.start(config={"SOLIDQ_STATS_RETENTION": 3600})

    support.wait_until(lambda: support.count(engine, JOB_STATS) == 1, timeout=30, interval=0.2)
    with engine.connect() as connection:
        assert connection.scalar(sa.select(JOB_STATS.c.minute_at)) == rows[0]["minute_at"]

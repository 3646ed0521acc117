"""``bench/dashboard.py --queues N``: the pages that could grow with the number of queues,
timed and weighed at N small queues (see that script's docstring)."""

from __future__ import annotations

import datetime as dt
import statistics
import time
import typing as t
import uuid

import sqlalchemy as sa

from bench import common
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import PAUSES
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.timing import utcnow

#: Rows per INSERT statement.
BATCH = 5_000
#: Every this many queues, one is paused.
PAUSED_EVERY = 10


def queue_name(number: int) -> str:
    return f"queue-{number:06d}"


def fill(engine: sa.Engine, count: int) -> None:
    """``count`` queues, each with a ready, a scheduled, a failed and a finished job; every
    :data:`PAUSED_EVERY`-th paused."""
    now = utcnow()
    for first in range(0, count, BATCH):
        numbers = range(first, min(first + BATCH, count))
        with engine.begin() as connection:
            _insert_batch(connection, numbers, now)


def _insert_batch(connection: sa.Connection, numbers: range, now: dt.datetime) -> None:
    kinds = ("ready", "scheduled", "failed", "finished")
    jobs, ready, scheduled, failed, pauses = [], [], [], [], []
    for number in numbers:
        name = queue_name(number)
        for offset, kind in enumerate(kinds):
            job_id = number * len(kinds) + offset + 1
            jobs.append(_job(job_id, name, now, finished=kind == "finished"))
            if kind == "ready":
                ready.append(
                    {"job_id": job_id, "queue_name": name, "priority": 0, "created_at": now}
                )
            elif kind == "scheduled":
                scheduled.append(
                    {
                        "job_id": job_id,
                        "queue_name": name,
                        "priority": 0,
                        "scheduled_at": now + dt.timedelta(days=1),
                        "created_at": now,
                    }
                )
            elif kind == "failed":
                error = '{"exception_class":"builtins.ValueError","message":"boom","backtrace":[]}'
                failed.append({"job_id": job_id, "error": error, "created_at": now})
        if number % PAUSED_EVERY == 0:
            pauses.append({"queue_name": name, "created_at": now})
    for table, rows in ((JOBS, jobs), (READY, ready), (SCHEDULED, scheduled), (FAILED, failed)):
        connection.execute(table.insert(), rows)
    connection.execute(PAUSES.insert(), pauses)


def _job(job_id: int, name: str, now: dt.datetime, *, finished: bool) -> dict[str, t.Any]:
    return {
        "id": job_id,
        "queue_name": name,
        "class_name": "bench.noop",
        "arguments": '{"job":"bench.common:noop","args":[1]}',
        "priority": 0,
        "active_job_id": str(uuid.uuid4()),
        "scheduled_at": now,
        "finished_at": now - dt.timedelta(minutes=5) if finished else None,
        "created_at": now,
        "updated_at": now,
    }


def pages(count: int) -> list[tuple[str, str]]:
    last = queue_name(count - 1)
    return [
        ("overview", "/solidq/"),
        ("overview, searched (the last queue)", f"/solidq/?q={last}"),
        ("overview, a page past the middle", f"/solidq/?after={queue_name(count // 2)}"),
        ("metrics (Prometheus)", "/solidq/metrics"),
        ("failed jobs (its queue filter)", "/solidq/jobs?state=failed"),
        ("a queue", f"/solidq/queue/{last}"),
        ("processes", "/solidq/processes"),
    ]


def run(url: str, count: int, runs: int, analyze: t.Callable[[sa.Engine], None]) -> None:
    """Fill ``url`` with ``count`` queues (then ``analyze`` the tables, but on SQLite, which
    plans without statistics as an app that never runs ANALYZE does), and print each page's
    time and size."""
    engine = sa.create_engine(url)
    started = time.perf_counter()
    fill(engine, count)
    if engine.dialect.name != "sqlite":
        analyze(engine)
    seconds = time.perf_counter() - started
    print(f"filled {count:,} queues in {seconds:.0f} s ({engine.dialect.name})")
    app = common.create_app(url, TESTING=True, SOLIDQ_DASHBOARD=True)
    client = app.test_client()
    rows = []
    for name, path in pages(count):
        times, size = [], 0
        for _run in range(runs):
            begun = time.perf_counter()
            response = client.get(path)
            times.append((time.perf_counter() - begun) * 1000)
            assert response.status_code == 200, (path, response.status_code)
            size = len(response.get_data())
        rows.append(
            [name, f"{statistics.median(times):.1f}", f"{max(times):.1f}", f"{size / 1000:.1f}"]
        )
    print(common.table(["page", "median ms", "worst ms", "kB"], rows))
    with app.app_context():
        app.extensions["solidq"].dispose()
    engine.dispose()

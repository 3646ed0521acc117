"""Enqueue rates, single and bulk, on every backend that answers.

    python bench/enqueue.py [--single N] [--bulk N] [--batch N] [--backends sqlite,postgres,mysql]

For each backend it prints jobs per second for
* ``raw``: the ceiling, a hand-written DBAPI loop storing a job row and a ready row in one
  transaction per job (what the ORM-free floor of a single enqueue costs on this machine);
* ``perform_later``: one ``perform_later`` per job;
* ``perform_all_later``: batches of ``--batch`` jobs.
Figures vary with the machine's disk (every single enqueue waits for a commit to be durable),
so compare columns within one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import pathlib
import statistics
import sys
import time
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import common  # noqa: E402


def raw_single(engine: sa.Engine, count: int) -> float:
    """Jobs/s of a DBAPI loop: job row + ready row, one transaction each."""
    connection = engine.raw_connection()
    cursor = connection.cursor()
    style = "%s" if engine.dialect.paramstyle in ("format", "pyformat") else "?"
    marks = ", ".join([style] * 7)
    insert_job = (
        "INSERT INTO solidq_jobs (queue_name, class_name, arguments, priority, active_job_id,"
        f" scheduled_at, created_at, updated_at) VALUES ({marks}, {style})"
    )
    insert_ready = (
        "INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)"
        f" VALUES ({style}, {style}, {style}, {style})"
    )
    started = time.perf_counter()
    for index in range(count):
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        if engine.dialect.name == "sqlite":
            cursor.execute("BEGIN IMMEDIATE")
        params = (
            "default",
            "bench.noop",
            f'{{"args":[{index}]}}',
            0,
            str(uuid.uuid4()),
            now,
            now,
            now,
        )
        if engine.dialect.name == "postgresql":
            cursor.execute(insert_job + " RETURNING id", params)
            job_id = cursor.fetchone()[0]
        else:
            cursor.execute(insert_job, params)
            job_id = cursor.lastrowid
        cursor.execute(insert_ready, (job_id, "default", 0, now))
        connection.commit()
    elapsed = time.perf_counter() - started
    connection.close()
    return count / elapsed


def single(count: int) -> float:
    started = time.perf_counter()
    for index in range(count):
        common.noop.perform_later(index)
    return count / (time.perf_counter() - started)


def bulk(count: int, batch: int) -> float:
    rates = []
    for start in range(0, count, batch):
        jobs = [common.noop.new(index) for index in range(start, start + batch)]
        started = time.perf_counter()
        common.solidq.perform_all_later(jobs)
        rates.append(len(jobs) / (time.perf_counter() - started))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--single", type=int, default=3000, help="jobs enqueued one by one")
    parser.add_argument("--bulk", type=int, default=20000, help="jobs enqueued in bulk")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per perform_all_later")
    parser.add_argument(
        "--backends", default="sqlite,postgres,mysql", help="comma-separated backends to measure"
    )
    options = parser.parse_args()

    results = []
    for backend, server_url in common.chosen_backends(options.backends):
        url, drop = common.scratch_database(backend, server_url)
        try:
            app = common.create_app(url)
            with app.app_context():
                engine = app.extensions["solidq"].engine
                common.noop.perform_later(0)  # warm up: connections, statement caches
                raw = raw_single(engine, options.single)
                results.append(
                    [backend, raw, single(options.single), bulk(options.bulk, options.batch)]
                )
                engine.dispose()
        finally:
            drop()
    print(
        f"Enqueue rates, jobs/s (single: {options.single:,} jobs;"
        f" bulk: {options.bulk:,} in batches of {options.batch:,})"
    )
    print(common.table(["backend", "raw single", "perform_later", "perform_all_later"], results))


if __name__ == "__main__":
    main()

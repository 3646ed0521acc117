"""PostgreSQL directly and behind PgBouncer (transaction pooling): enqueue rates, drain rates and
enqueue-to-start latency, side by side.

    SOLIDQ_TEST_PGBOUNCER_URL=postgresql+psycopg://postgres@127.0.0.1:6432/test \\
        python bench/pgbouncer.py [--jobs N] [--single N] [--samples N]

Four cases, on one scratch database of ``SOLIDQ_TEST_POSTGRES_URL``'s server:

* ``direct``: the app and ``flask solidq work`` connect to PostgreSQL;
* ``direct, pooler setting``: the same with ``SOLIDQ_DATABASE_POOLER = 'pgbouncer'``: what the
  setting costs (``SET LOCAL`` in each transaction, client-side binding, nothing prepared)
  without PgBouncer's hop;
* ``pgbouncer + listen URL``: both go through PgBouncer (``SOLIDQ_DATABASE_POOLER =
  'pgbouncer'``), their ``LISTEN`` through the direct URL (``SOLIDQ_DATABASE_LISTEN_URL``);
* ``pgbouncer, polling``: through PgBouncer without a listen URL.

Per case: ``--single`` ``perform_later`` one by one and ``--jobs`` in batches of 1,000 (jobs/s
of the enqueuing thread); ``--jobs`` no-op jobs drained by ``--only worker --processes P
--threads 3`` for P = 1 and 2 (jobs/s from the jobs' ``finished_at`` stamps, as
bench/throughput.py counts them); and ``--samples`` jobs of bench/latency.py's ``immediate``
and ``wait=2`` cases with the default processes in fork mode (p50 and p90, in ms), enqueued
through a URL of its own so that this machine's sockets (one directory per URL) don't wake
the processes: as from another machine, only polling and ``LISTEN`` can.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import tempfile
import time
import typing as t

import sqlalchemy as sa

from bench import app as bench_app
from bench import common
from bench import latency
from flask_solidq import models
from flask_solidq.storage import db as solidq_db

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
BATCH = 1000


def cases(direct: str, pooled: str) -> list[tuple[str, str, dict[str, t.Any]]]:
    behind = {
        "SOLIDQ_DATABASE_POOLER": "pgbouncer",
        # The app's own engine too: psycopg prepares nothing through transaction pooling.
        "SQLALCHEMY_ENGINE_OPTIONS": {"connect_args": {"prepare_threshold": None}},
    }
    return [
        ("direct", direct, {}),
        # What the setting itself costs, without PgBouncer's hop: SET LOCAL, client-side
        # binding, nothing prepared.
        ("direct, pooler setting", direct, {**behind, "SOLIDQ_DATABASE_LISTEN_URL": direct}),
        ("pgbouncer + listen URL", pooled, {**behind, "SOLIDQ_DATABASE_LISTEN_URL": direct}),
        ("pgbouncer, polling", pooled, behind),
    ]


def enqueue_rates(url: str, config: dict[str, t.Any], single: int, jobs: int) -> list[float]:
    app = common.create_app(url, **config)
    with app.app_context():
        for index in range(50):
            bench_app.noop.perform_later(index)  # warm up: connections, caches
        started = time.perf_counter()
        for index in range(single):
            bench_app.noop.perform_later(index)
        single_rate = single / (time.perf_counter() - started)
        started = time.perf_counter()
        for start in range(0, jobs, BATCH):
            common.solidq.perform_all_later(
                [bench_app.noop.new(i) for i in range(start, start + BATCH)]
            )
        bulk_rate = jobs / (time.perf_counter() - started)
    dispose(app)
    return [single_rate, bulk_rate]


def drain_rate(
    url: str, config: dict[str, t.Any], jobs: int, processes: int, workdir: pathlib.Path
) -> float | None:
    app = common.create_app(url, **config)
    with app.app_context():
        engine = app.extensions["solidq"].engine
        first = None
        for start in range(0, jobs, BATCH):
            batch = [bench_app.noop.new(i) for i in range(start, start + BATCH)]
            common.solidq.perform_all_later(batch)
            first = first or min(job.provider_job_id for job in batch)
    arguments = ["--only", "worker", "--processes", str(processes), "--threads", "3"]
    with (workdir / f"drain-{processes}.log").open("wb") as log:
        process = common.start_work(url, arguments, log, config=config)
        try:
            deadline = time.monotonic() + 300
            while unfinished(engine, t.cast(int, first)) and time.monotonic() < deadline:
                time.sleep(0.25)
            common.stop_work(process)
        finally:
            common.kill_work(process)
    with solidq_db.read(engine) as connection:
        stamps = list(
            connection.scalars(
                sa.select(JOBS.c.finished_at).where(
                    JOBS.c.id >= first, JOBS.c.finished_at.is_not(None)
                )
            )
        )
    dispose(app)
    if len(stamps) != jobs:
        return None
    low, high = min(stamps), max(stamps)
    return (len(stamps) - stamps.count(low)) / (high - low).total_seconds()


def unfinished(engine: sa.Engine, first_id: int) -> int:
    with solidq_db.read(engine) as connection:
        return int(
            connection.execute(
                sa.select(sa.func.count())
                .select_from(JOBS)
                .where(JOBS.c.id >= first_id, JOBS.c.finished_at.is_(None))
            ).scalar_one()
        )


def latencies(
    url: str, config: dict[str, t.Any], samples: int, workdir: pathlib.Path
) -> list[list[float]]:
    elsewhere = sa.make_url(url).update_query_dict({"application_name": "bench-elsewhere"})
    app = common.create_app(elsewhere.render_as_string(hide_password=False), **config)
    with app.app_context():
        engine = app.extensions["solidq"].engine
    with (workdir / "latency.log").open("wb") as log:
        process = common.start_work(url, ["--mode", "fork"], log, config=config)
        try:
            with app.app_context():
                probe = latency.Probe(engine, timeout=30.0)
                latency.warm_up(probe)
                results = [latency.immediate(probe, samples), latency.scheduled(probe, samples)]
            common.stop_work(process)
        finally:
            common.kill_work(process)
    dispose(app)
    return results


def dispose(app: t.Any) -> None:
    with app.app_context():
        app.extensions["solidq"].dispose()
        common.db.engines[None].dispose()


def percentile(values: list[float], share: float) -> str:
    ordered = sorted(values)
    return f"{ordered[max(0, round(share * len(ordered)) - 1)] * 1000:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per bulk enqueue and drain")
    parser.add_argument("--single", type=int, default=2000, help="jobs enqueued one by one")
    parser.add_argument("--samples", type=int, default=20, help="jobs measured per latency case")
    options = parser.parse_args()
    server = os.environ.get("SOLIDQ_TEST_POSTGRES_URL", common.DEFAULT_URLS["postgres"])
    bouncer = sa.make_url(os.environ["SOLIDQ_TEST_PGBOUNCER_URL"])
    (backend,) = [(name, url) for name, url in common.chosen_backends("postgres")]
    print("\n".join(common.machine_lines([backend])), flush=True)
    direct, drop = common.scratch_database("postgres", server)
    pooled = sa.make_url(direct).set(host=bouncer.host, port=bouncer.port)
    bench_app.create_tables(sa.create_engine(direct))
    rows = []
    try:
        for name, url, config in cases(direct, pooled.render_as_string(hide_password=False)):
            workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-bench-pgbouncer-"))
            single, bulk = enqueue_rates(url, config, options.single, options.jobs)
            drains = [drain_rate(url, config, options.jobs, p, workdir) for p in (1, 2)]
            immediate, scheduled = latencies(url, config, options.samples, workdir)
            rows.append(
                [
                    name,
                    f"{single:,.0f}",
                    f"{bulk:,.0f}",
                    *(f"{rate:,.0f}" if rate else "failed" for rate in drains),
                    f"{percentile(immediate, 0.5)} / {percentile(immediate, 0.9)}",
                    f"{percentile(scheduled, 0.5)} / {percentile(scheduled, 0.9)}",
                ]
            )
            print(f"{name}: done ({workdir})", flush=True)
    finally:
        drop()
    headers = ["case", "single/s", "bulk/s", "drain 1x3/s", "drain 2x3/s"]
    headers += ["immediate p50/p90 ms", f"wait={latency.WAIT:g} p50/p90 ms"]
    print(common.table(headers, rows))


if __name__ == "__main__":
    main()

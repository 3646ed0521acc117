"""The gap between an API's 429 and the next start of a job of the same budget.

    python bench/rate_limit_429.py [--backends sqlite,postgres,mysql] [--runs 20]

Measured with real worker processes: per run, six jobs limited by
``limits_rate(to=20, per=1, burst=5)`` on a budget of the run's own, the first of which makes
its "call" (50 ms, an API's round trip: with 5 ms, the burst's other jobs that two
busy cores hadn't yet run past their start check started a millisecond after the 429, admitted
and checked before it) and hears 429 with ``Retry-After: 2``. The burst admits five at once, and the
sixth is charged ahead of the clock (62.5 ms later) while the first is still calling. Every job
records when it started (``time.time()`` at the top of its run) and the told job when it heard
the 429; the gap is from the 429 to the next start of any job of the run (the told job's own
second run included). The promise: in the told job's process, no start after the 429; in
every other process, none after the pause's commit, which the told job's thread makes a
transaction after the 429 (a few milliseconds: "latest of them" is the latest start inside
a pause, which only a job in another process whose start check came before that commit can
make).

One ``flask solidq work`` per backend (2 worker processes of 3 threads, polling every 0.05 s,
a dispatcher polling every 0.05 s), in a scratch database; a run starts every 0.6 s, so runs
overlap and some jobs wait for a thread, as on a busy worker. Printed per backend: runs, the
least, median and largest gap, how many jobs started inside a pause, how many of those in
the told job's own process (the promise: none), and the latest of those starts after its 429.

This module is also the app the workers run (``bench.rate_limit_429:create_app``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import typing as t

import sqlalchemy as sa
from flask import Flask
from flask import current_app

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import app as bench_app
from bench import common
from flask_solidq import RateLimited
from flask_solidq import limits_rate
from flask_solidq.storage import db as solidq_db

#: What the API's 429 says to wait, in seconds.
RETRY_AFTER = 2.0
#: How long the told job's call takes before the 429 comes back, in seconds.
CALL = 0.05
JOBS_PER_RUN = 6
RUN_EVERY = 0.6

metadata = sa.MetaData()
starts = sa.Table(
    "bench_429_starts",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run", sa.Integer, nullable=False, index=True),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Double(), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    #: The moment the told job heard 429 (None for the other rows).
    sa.Column("told_at", sa.Double()),
)


@common.solidq.job(name="bench.rate_429.call")
@limits_rate(to=20, per=1, burst=5, key=lambda run, n: run)
def call(run: int, n: int) -> None:
    """Record the start; job 0 of a run hears 429 on its first run, after its call."""
    started_at = time.time()
    engine = t.cast(sa.Engine, current_app.extensions["solidq"].engine)
    with solidq_db.write(engine) as connection:
        told_before = connection.scalar(
            sa.select(sa.func.count())
            .select_from(starts)
            .where(starts.c.run == run, starts.c.told_at.is_not(None))
        )
        connection.execute(
            starts.insert(), {"run": run, "n": n, "started_at": started_at, "pid": os.getpid()}
        )
    if n != 0 or told_before:
        return
    threading.Event().wait(CALL)
    told_at = time.time()
    # Written beside the raise, not before it: a write first would put the measured 429 a
    # round trip before the raise, and count the starts of that round trip against the pause.
    row = {"run": run, "n": n, "started_at": told_at, "told_at": told_at, "pid": os.getpid()}
    threading.Thread(target=_insert, args=(engine, row)).start()
    raise RateLimited(retry_after=RETRY_AFTER)


def _insert(engine: sa.Engine, row: dict[str, t.Any]) -> None:
    with solidq_db.write(engine) as connection:
        connection.execute(starts.insert(), row)


def create_app() -> Flask:
    """The benchmark app, with this module's job registered (by importing it)."""
    return bench_app.create_app()


def measure(backend: str, server_url: str, runs: int) -> list[t.Any]:
    """Run ``runs`` runs on ``backend``; return its table row."""
    url, drop = common.scratch_database(backend, server_url)
    engine = sa.create_engine(url)
    metadata.create_all(engine)
    app = common.create_app(url)
    config = {"SOLIDQ_DISPATCHERS": [{"polling_interval": 0.05}]}
    arguments = ["--processes", "2", "--threads", "3", "--polling-interval", "0.05"]
    log = open(os.devnull, "wb")  # noqa: SIM115 - closed below
    work = common.start_work(
        url, arguments, log, config=config, app="bench.rate_limit_429:create_app"
    )
    try:
        time.sleep(3.0)  # the processes boot (a run before that only waits longer)
        for run in range(runs):
            with app.app_context():
                common.solidq.perform_all_later([call.new(run, n) for n in range(JOBS_PER_RUN)])
            time.sleep(RUN_EVERY)
        deadline = time.monotonic() + 60
        expected = runs * (JOBS_PER_RUN + 2)  # each start, the 429's row, the told job again
        while time.monotonic() < deadline:
            with engine.connect() as connection:
                done = connection.scalar(sa.select(sa.func.count()).select_from(starts))
            if done >= expected:
                break
            time.sleep(0.1)
        with engine.connect() as connection:
            rows = connection.execute(sa.select(starts)).all()
    finally:
        common.stop_work(work)
        log.close()
        engine.dispose()
        drop()
    gaps, inside, inside_told_process = [], [], 0
    for run in range(runs):
        mine = [row for row in rows if row.run == run]
        told = [row for row in mine if row.told_at is not None]
        if not told:
            continue
        told_at, told_pid = told[0].told_at, told[0].pid
        after = [row for row in mine if row.told_at is None and row.started_at > told_at]
        if not after:
            continue
        gaps.append(min(row.started_at for row in after) - told_at)
        early = [row for row in after if row.started_at - told_at < RETRY_AFTER]
        inside += [row.started_at - told_at for row in early]
        inside_told_process += sum(1 for row in early if row.pid == told_pid)
    if not gaps:
        return [backend, 0, "-", "-", "-", "-", "-", "-"]
    return [
        backend,
        len(gaps),
        f"{min(gaps):.3f}",
        f"{statistics.median(gaps):.3f}",
        f"{max(gaps):.3f}",
        len(inside),
        inside_told_process,
        f"{max(inside) * 1000:.1f}" if inside else "-",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgres,mysql")
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    chosen = common.chosen_backends(options.backends)
    for line in common.machine_lines(chosen):
        print(line)
    print(f"# Retry-After {RETRY_AFTER:g} s; gaps in seconds from the 429 to the next start")
    rows = [measure(backend, url, options.runs) for backend, url in chosen]
    headers = [
        "backend",
        "runs",
        "least gap",
        "median",
        "largest",
        "starts inside a pause",
        "of them in the told process",
        "latest of them (ms)",
    ]
    print(common.table(headers, rows))


if __name__ == "__main__":
    main()

"""Enqueue-to-start latency: how long a job waits between being enqueued (or due) and starting.

    python bench/latency.py [--samples N] [--backends sqlite,postgres,mysql]

For each backend, in a scratch database, ``flask --app bench.app:create_app solidq work`` runs
with the default processes (one worker, 3 threads, polling every 0.1 s; one dispatcher,
polling every 1 s), first in fork mode (``--mode fork``: worker and dispatcher are processes
of their own), then in thread mode (``--mode thread``: both are threads of one process). In
each mode this script measures ``--samples`` jobs of each case, one after another with a random
pause between them so that they land at random points of the polling cycles:

* ``immediate``: ``bench.record_start.perform_later()`` from this script; the latency is
  ``time.time()`` when the job started (stored by the job) minus ``time.time()`` when
  ``perform_later`` returned. The worker is another process, so it only learns of the job by
  polling: expect about half the polling interval plus a claim.
* ``wait=2``: ``bench.record_start.set(wait=2).perform_later()`` from this script; the latency
  is the start minus the job's ``scheduled_at``. The dispatcher sleeps until the next due job,
  so this measures its wake-up, the dispatch, and then the worker noticing the ready job: by
  polling in fork mode, by an in-process wake-up in thread mode.
* ``immediate, by a job``: this script enqueues ``bench.enqueue_probe``; the probe, running in
  the worker's process, enqueues a ``record_start`` and stores when that ``perform_later``
  returned; the latency is the start of that ``record_start`` minus that moment. Enqueued in
  the worker's own process, it wakes the worker at once (in either mode): this is the
  in-process wake-up, which a separate enqueuing process never gets.

With ``--steady RATE`` it measures latency under load instead: ``--enqueuers`` threads of this
script enqueue ``bench.noop`` jobs at a steady ``RATE`` jobs a second in all for ``--seconds``
(open loop: each job has its moment, ``t0 + i / RATE``, and one that falls behind is enqueued at
once rather than pushing the others back), to the default ``flask solidq work`` (fork mode).
Each job's latency is its start (stamped by the worker into a file, no database write:
``SOLIDQ_BENCH_START_LOG``) minus the moment its ``perform_later`` returned. It prints p50, p90,
p99 and max, and the arrival rate reached (a rate the enqueuers could not keep is no test of
the queue: that row says so).

Reading the output: p50, p90 and max in milliseconds per backend, mode and case (p90 by
nearest rank: with 20 samples the 18th smallest; max is one sample: read both as rough). Clocks are
the same machine's wall clock. Runtime is about 40 s per backend. The machine has few
cores and the database server runs on it too, so run twice and compare.
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import app as bench_app  # noqa: E402
from bench import common  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

JOBS = models.JobRecord.__table__
WAIT = 2.0
MODES = ("fork", "thread")
CASES = ("immediate", f"wait={WAIT:g}", "immediate, by a job")


class Timeout(Exception):
    """A job didn't start in time."""


class Probe:
    """Reads what the benchmark jobs stored, through read-only transactions (on SQLite a
    plain transaction of the queue's engine would take the write lock every poll)."""

    def __init__(self, engine: sa.Engine, timeout: float) -> None:
        self.engine = engine
        self.timeout = timeout

    def _wait_for(self, statement: sa.Select[t.Any]) -> sa.Row[t.Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            with solidq_db.read(self.engine) as connection:
                row = connection.execute(statement).first()
            if row is not None:
                return row
            if time.monotonic() > deadline:
                raise Timeout(str(statement))
            time.sleep(0.01)

    def started_at(self, job_id: int) -> float:
        starts = bench_app.starts
        row = self._wait_for(sa.select(starts.c.started_at).where(starts.c.job_id == job_id))
        return float(row[0])

    def probe(self, probe_id: int) -> tuple[int, float]:
        probes = bench_app.probes
        row = self._wait_for(
            sa.select(probes.c.job_id, probes.c.enqueued_at).where(probes.c.probe_id == probe_id)
        )
        return int(row[0]), float(row[1])

    def scheduled_at(self, job_id: int) -> float:
        with solidq_db.read(self.engine) as connection:
            value = connection.execute(
                sa.select(JOBS.c.scheduled_at).where(JOBS.c.id == job_id)
            ).scalar_one()
        return float(value.timestamp())


def pause() -> None:
    """A random pause, so that the next sample lands anywhere in the polling cycles."""
    time.sleep(random.uniform(0.05, 0.25))


def immediate(probe: Probe, samples: int) -> list[float]:
    latencies = []
    for _ in range(samples):
        job = bench_app.record_start.perform_later()
        enqueued_at = time.time()
        latencies.append(probe.started_at(t.cast(int, job.provider_job_id)) - enqueued_at)
        pause()
    return latencies


def scheduled(probe: Probe, samples: int) -> list[float]:
    """Enqueue every sample first, 0.2 to 0.4 s apart (so each is due on its own), then
    collect their starts."""
    ids = []
    for _ in range(samples):
        job = bench_app.record_start.set(wait=WAIT).perform_later()
        ids.append(t.cast(int, job.provider_job_id))
        time.sleep(random.uniform(0.2, 0.4))
    return [probe.started_at(job_id) - probe.scheduled_at(job_id) for job_id in ids]


def by_a_job(probe: Probe, samples: int) -> list[float]:
    latencies = []
    for _ in range(samples):
        probe_job = bench_app.enqueue_probe.perform_later()
        job_id, enqueued_at = probe.probe(t.cast(int, probe_job.provider_job_id))
        latencies.append(probe.started_at(job_id) - enqueued_at)
        pause()
    return latencies


def warm_up(probe: Probe) -> None:
    """Wait until the worker and the dispatcher are up and have run a job of each kind."""
    probe.started_at(t.cast(int, bench_app.record_start.perform_later().provider_job_id))
    job = bench_app.record_start.set(wait=0.3).perform_later()
    probe.started_at(t.cast(int, job.provider_job_id))
    probe_job = bench_app.enqueue_probe.perform_later()
    probe.started_at(probe.probe(t.cast(int, probe_job.provider_job_id))[0])


def measure_mode(
    url: str, engine: sa.Engine, mode: str, samples: int, workdir: pathlib.Path
) -> tuple[dict[str, list[float]], float | None, list[str]]:
    """Start the worker in ``mode``, measure every case; the latencies by case, the seconds
    the graceful stop took, and the worker output's unusual lines."""
    output = workdir / f"work-{mode}.log"
    problems: list[str] = []
    results: dict[str, list[float]] = {}
    with output.open("wb") as log:
        process = common.start_work(url, ["--mode", mode], log)
        try:
            probe = Probe(engine, timeout=30.0)
            try:
                warm_up(probe)
                results[CASES[0]] = immediate(probe, samples)
                results[CASES[1]] = scheduled(probe, samples)
                results[CASES[2]] = by_a_job(probe, samples)
            except Timeout:
                problems.append(f"a job didn't start within {probe.timeout:.0f} s; stopped there")
            stop = common.stop_work(process)
            if stop is None:
                problems.append("the worker didn't stop within 30 s of SIGTERM; killed")
        finally:
            common.kill_work(process)
    problems += common.log_problems(output.read_text(errors="replace"))
    return results, stop, problems


def steady(
    url: str, app: t.Any, rate: float, seconds: float, enqueuers: int, workdir: pathlib.Path
) -> tuple[list[float], float, list[str]]:
    """Enqueue at a steady ``rate`` for ``seconds`` into a running worker; return each job's
    enqueue-to-start latency, the arrival rate reached, and the worker output's unusual
    lines."""
    start_log = workdir / "starts.log"
    output = workdir / "work-steady.log"
    env = {"SOLIDQ_BENCH_START_LOG": str(start_log)}
    enqueued: dict[int, float] = {}
    lock = threading.Lock()
    total = int(rate * seconds)
    with output.open("wb") as log:
        process = common.start_work(url, ["--mode", "fork"], log, env=env)
        try:
            with app.app_context():
                warm = t.cast(int, common.noop.perform_later(0).provider_job_id)
            _wait_for_starts(start_log, {warm}, timeout=30.0)
            first = time.monotonic() + 0.2

            def enqueue(offset: int) -> None:
                with app.app_context():
                    for index in range(offset, total, enqueuers):
                        delay = first + index / rate - time.monotonic()
                        if delay > 0:
                            time.sleep(delay)
                        job = common.noop.perform_later(index)
                        returned = time.time()
                        with lock:
                            enqueued[t.cast(int, job.provider_job_id)] = returned

            threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(enqueuers)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            reached = total / (time.monotonic() - first)
            starts = _wait_for_starts(start_log, set(enqueued), timeout=60.0)
            common.stop_work(process)
        finally:
            common.kill_work(process)
    latencies = [starts[job_id] - at for job_id, at in enqueued.items() if job_id in starts]
    problems = common.log_problems(output.read_text(errors="replace"))
    missing = len(enqueued) - len(latencies)
    if missing:
        problems.append(f"{missing} jobs didn't start within 60 s of the last enqueue")
    return latencies, reached, problems


def _wait_for_starts(path: pathlib.Path, ids: set[int], timeout: float) -> dict[int, float]:
    """The start times the worker logged, once every one of ``ids`` is there (or at the
    deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        starts: dict[int, float] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                job_id, _, at = line.partition(" ")
                starts.setdefault(int(job_id), float(at))
        if ids <= starts.keys() or time.monotonic() > deadline:
            return starts
        time.sleep(0.05)


def percentiles(values: list[float]) -> list[str]:
    """p50, p90, p99 (nearest rank) and max, in milliseconds."""
    if not values:
        return ["-"] * 4
    ordered = sorted(values)
    ranks = [nearest_rank(ordered, q) for q in (0.5, 0.9, 0.99)]
    return [f"{1000 * value:.1f}" for value in (*ranks, ordered[-1])]


def nearest_rank(ordered: list[float], fraction: float) -> float:
    """The value at ``fraction`` of ``ordered`` (sorted), by nearest rank."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def main_steady(options: argparse.Namespace, chosen: list[tuple[str, str]]) -> None:
    rows: list[list[object]] = []
    notes: list[str] = []
    for backend, server_url in chosen:
        url, drop = common.scratch_database(backend, server_url)
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-latency-"))
        try:
            app = common.create_app(url)
            latencies, reached, problems = steady(
                url, app, options.steady, options.seconds, options.enqueuers, workdir
            )
            kept = "" if reached >= 0.95 * options.steady else " (the enqueuers fell behind)"
            rows.append([backend, f"{reached:,.0f}{kept}", len(latencies), *percentiles(latencies)])
            notes += [f"{backend}: {line}" for line in problems]
            with app.app_context():
                app.extensions["solidq"].engine.dispose()
        finally:
            drop()
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"# {backend} done", flush=True)
    print()
    print(
        f"Enqueue-to-start latency at a steady {options.steady:,.0f} jobs/s for"
        f" {options.seconds:g} s, ms (1 worker process x 3 threads, defaults; {options.enqueuers}"
        " enqueuing threads in one process)"
    )
    print(common.table(["backend", "arrivals/s", "n", "p50", "p90", "p99", "max"], rows))
    print("\n".join(notes))
    print(f"# load at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")


def check_runs(engine: sa.Engine) -> list[str]:
    """Every record_start ran once, and no job is left failed."""
    starts = bench_app.starts
    with solidq_db.read(engine) as connection:
        twice = connection.execute(
            sa.select(starts.c.job_id).group_by(starts.c.job_id).having(sa.func.count() > 1)
        ).all()
        failed = connection.execute(
            sa.select(sa.func.count()).select_from(models.FailedExecution.__table__)
        ).scalar_one()
    issues = []
    if twice:
        issues.append(f"{len(twice)} record_start jobs ran more than once")
    if failed:
        issues.append(f"{failed} failed jobs")
    return issues


def milliseconds(values: list[float]) -> list[str]:
    if not values:
        return ["-", "-", "-"]
    ordered = sorted(values)
    p90 = nearest_rank(ordered, 0.9)
    return [f"{1000 * value:.1f}" for value in (statistics.median(ordered), p90, ordered[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=20, help="jobs measured per case")
    parser.add_argument(
        "--backends", default="sqlite,postgres,mysql", help="comma-separated backends to measure"
    )
    parser.add_argument(
        "--steady", type=float, default=None, help="jobs/s: measure under a steady arrival rate"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="with --steady: how long")
    parser.add_argument("--enqueuers", type=int, default=2, help="with --steady: enqueuing threads")
    options = parser.parse_args()

    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    if options.steady is not None:
        main_steady(options, chosen)
        return

    rows: list[list[object]] = []
    notes: list[str] = []
    for backend, server_url in chosen:
        url, drop = common.scratch_database(backend, server_url)
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-latency-"))
        started = time.monotonic()
        try:
            app = common.create_app(url)
            with app.app_context():
                engine = app.extensions["solidq"].engine
                bench_app.create_tables(engine)
                for mode in MODES:
                    results, stop, problems = measure_mode(
                        url, engine, mode, options.samples, workdir
                    )
                    for case in CASES:
                        values = results.get(case, [])
                        rows.append([backend, mode, case, len(values), *milliseconds(values)])
                    stopped = "-" if stop is None else f"{stop:.2f} s"
                    notes.append(f"{backend} {mode}: SIGTERM to exit {stopped}")
                    notes += [f"{backend} {mode}: {line}" for line in problems]
                notes += [f"{backend}: {issue}" for issue in check_runs(engine)]
                engine.dispose()
        finally:
            drop()
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"# {backend} done in {time.monotonic() - started:.0f} s", flush=True)

    print()
    print("Enqueue-to-start latency, ms (worker polling 0.1 s, dispatcher polling 1 s)")
    print(common.table(["backend", "mode", "case", "n", "p50", "p90", "max"], rows))
    print()
    print("\n".join(notes))
    print(f"# load at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()

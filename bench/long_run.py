"""A long run: a million no-op jobs through one queue, then cleared away.

    python bench/long_run.py [--jobs 1000000] [--backends postgres,mysql] [--segment 100000]
                             [--processes 2] [--threads 3] [--batch 1000]

For each backend, in a scratch database (dropped at the end):

1. the flask-solidq tables' sizes, empty;
2. ``--jobs`` no-op jobs (``bench.noop``) enqueued with ``perform_all_later``, ``--batch`` a
   call, timed; the sizes again;
3. one ``flask --app bench.app:create_app solidq work --only worker --processes 2 --threads 3
   --polling-interval 0.1 --mode fork`` drains them (its defaults otherwise, so finished jobs
   are preserved, as ``SOLIDQ_PRESERVE_FINISHED_JOBS`` is by default); every 2 s the benchmark
   samples each worker process's resident memory (VmRSS, /proc) and how many jobs are still
   ready or claimed; then SIGTERM;
4. the exactly-once check (every job has ``finished_at``, nothing is left in any execution
   table, every job id appears exactly once in the run log the workers append to as a job
   starts), and jobs/s for each ``--segment`` jobs, from the jobs' own ``finished_at`` stamps
   in order (the first segment leaves out the jobs of the first finished batch, as
   ``bench/throughput.py`` does);
5. the sizes with every job finished; ``clear_finished_in_batches`` (what ``flask solidq
   clear-finished --older-than 0`` runs, 500 jobs a transaction), timed; the sizes again;
6. PostgreSQL: ``VACUUM`` of the flask-solidq tables, the sizes, then ``VACUUM FULL``, the
   sizes; MariaDB/MySQL: ``OPTIMIZE TABLE`` (InnoDB rebuilds the table), the sizes. Sizes are
   ``pg_table_size`` / ``pg_indexes_size`` on PostgreSQL and ``data_length`` /
   ``index_length`` of ``information_schema.TABLES`` after ``ANALYZE TABLE`` on MariaDB (an
   estimate from InnoDB's statistics).

``--jobs 20000`` is a smoke check (about 10 s a backend). The million took 4 minutes on
PostgreSQL and 8 on MariaDB, on 2 cores shared with the database servers.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import os
import pathlib
import shutil
import sys
import tempfile
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402
from flask import Flask  # noqa: E402

from bench import app as bench_app  # noqa: E402
from bench import common  # noqa: E402
from bench import procfs  # noqa: E402
from bench import throughput  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.operations import maintenance  # noqa: E402
from flask_solidq.timing import utcnow  # noqa: E402

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
#: The tables whose sizes are shown one by one; the rest are summed into "other".
SHOWN = ("solidq_jobs", "solidq_ready_executions", "solidq_claimed_executions")
SAMPLE_EVERY = 2.0
MIB = 1024 * 1024


@dataclasses.dataclass
class Sample:
    """One look at the drain: seconds since the worker started, jobs not yet finished, and
    each worker process's resident memory in KiB."""

    at: float
    left: int
    rss: dict[int, int]


@dataclasses.dataclass
class Result:
    backend: str
    jobs: int
    segment: int
    enqueue_seconds: float = 0.0
    drain_seconds: float = 0.0
    segments: list[float] = dataclasses.field(default_factory=list)
    overall: float | None = None
    samples: list[Sample] = dataclasses.field(default_factory=list)
    sizes: list[tuple[str, dict[str, tuple[int, int]]]] = dataclasses.field(default_factory=list)
    clear_seconds: float = 0.0
    cleared: int = 0
    vacuum_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    check: str = "not checked"
    problems: list[str] = dataclasses.field(default_factory=list)


# --- sizes ---------------------------------------------------------------------------------


def table_sizes(engine: sa.Engine) -> dict[str, tuple[int, int]]:
    """Bytes of data (heap, TOAST) and of indexes, per flask-solidq table."""
    with engine.connect() as connection:
        autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            rows = autocommit.exec_driver_sql(
                "SELECT relname, pg_table_size(oid), pg_indexes_size(oid) FROM pg_class"
                " WHERE relkind = 'r' AND relname LIKE 'solidq%%'"
                " AND relnamespace = 'public'::regnamespace"
            ).all()
        else:
            names = _mysql_tables(autocommit)
            autocommit.exec_driver_sql(f"ANALYZE TABLE {', '.join(names)}").all()
            rows = autocommit.exec_driver_sql(
                "SELECT table_name, data_length, index_length FROM information_schema.TABLES"
                " WHERE table_schema = DATABASE() AND table_name LIKE 'solidq%%'"
            ).all()
    return {str(name): (int(data), int(index)) for name, data, index in rows}


def _mysql_tables(connection: sa.Connection) -> list[str]:
    return [
        str(name)
        for (name,) in connection.exec_driver_sql(
            "SELECT table_name FROM information_schema.TABLES"
            " WHERE table_schema = DATABASE() AND table_name LIKE 'solidq%%'"
        )
    ]


def compact(engine: sa.Engine, result: Result) -> None:
    """Give the space of the cleared rows back: VACUUM, then VACUUM FULL (PostgreSQL), or
    OPTIMIZE TABLE (MariaDB/MySQL); the sizes after each."""
    with engine.connect() as connection:
        autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            names = [
                str(name)
                for (name,) in autocommit.exec_driver_sql(
                    "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'solidq%%'"
                    " AND relnamespace = 'public'::regnamespace"
                )
            ]
            steps = [("VACUUM", "VACUUM"), ("VACUUM FULL", "VACUUM FULL")]
        else:
            names = _mysql_tables(autocommit)
            steps = [("OPTIMIZE TABLE", "OPTIMIZE TABLE")]
        for label, statement in steps:
            begun = time.perf_counter()
            outcome = autocommit.exec_driver_sql(f"{statement} {', '.join(names)}")
            if outcome.returns_rows:
                outcome.all()
            result.vacuum_seconds[label] = time.perf_counter() - begun
            result.sizes.append((f"after {label}", table_sizes(engine)))


# --- the run -------------------------------------------------------------------------------


def enqueue(app: Flask, count: int, batch: int) -> int:
    """Enqueue ``count`` no-op jobs, ``batch`` a call; return the lowest job id."""
    first_id: int | None = None
    with app.app_context():
        for start in range(0, count, batch):
            jobs = [bench_app.noop.new(index) for index in range(start, min(count, start + batch))]
            bench_app.common.solidq.perform_all_later(jobs)
            if first_id is None:
                first_id = min(job.provider_job_id for job in jobs)
            if start and start % 100_000 == 0:
                print(f"#   {start:,} enqueued", flush=True)
    assert first_id is not None
    return first_id


def drain(
    url: str, engine: sa.Engine, options: argparse.Namespace, workdir: pathlib.Path, result: Result
) -> pathlib.Path:
    """Run the worker until nothing is ready or claimed, sampling; return the run log."""
    run_log = workdir / "runs.txt"
    output = workdir / "worker.log"
    arguments = ["--only", "worker", "--processes", str(options.processes)]
    arguments += ["--threads", str(options.threads), "--polling-interval", "0.1", "--mode", "fork"]
    with output.open("wb") as log:
        process = common.start_work(url, arguments, log, env={"SOLIDQ_BENCH_RUN_LOG": str(run_log)})
        begun = time.monotonic()
        try:
            deadline = begun + options.timeout
            while True:
                remaining = common.jobs_left(engine)
                rss = {pid: procfs.rss_kib(pid) for pid in procfs.children(process.pid)}
                sample = Sample(time.monotonic() - begun, remaining, _present(rss))
                result.samples.append(sample)
                if len(result.samples) % 15 == 0:
                    print(f"#   {sample.at:.0f} s: {remaining:,} left", flush=True)
                if not remaining:
                    break
                if process.poll() is not None:
                    result.problems.append(f"the worker exited early ({process.returncode})")
                    break
                if time.monotonic() > deadline:
                    result.problems.append(f"not drained after {options.timeout:.0f} s")
                    break
                time.sleep(SAMPLE_EVERY)
            result.drain_seconds = time.monotonic() - begun
            if common.stop_work(process) is None:
                result.problems.append("the worker didn't stop within 30 s of SIGTERM; killed")
        finally:
            common.kill_work(process)
    result.problems += common.log_problems(output.read_text(errors="replace"))
    return run_log


def _present(rss: dict[int, int | None]) -> dict[int, int]:
    return {pid: kib for pid, kib in rss.items() if kib is not None}


def check(engine: sa.Engine, first_id: int, run_log: pathlib.Path, result: Result) -> None:
    """Every job finished exactly once; the rates per segment from the finish stamps."""
    stamps, leftovers = throughput.finish_stamps_and_leftovers(engine, first_id)
    runs: collections.Counter[int] = collections.Counter()
    with run_log.open() as lines:
        runs.update(int(line) for line in lines)
    twice = sorted(job_id for job_id, seen in runs.items() if seen > 1)
    issues = []
    if len(stamps) != result.jobs:
        issues.append(f"{len(stamps):,} of {result.jobs:,} finished")
    issues += [f"{number} {name}" for name, number in leftovers.items() if number]
    if len(runs) != result.jobs:
        issues.append(f"{len(runs):,} of {result.jobs:,} ids in the run log")
    if twice:
        issues.append(f"{len(twice)} jobs ran more than once (e.g. ids {twice[:5]})")
    result.check = "; ".join(issues) if issues else f"all {result.jobs:,} exactly once"
    result.segments, result.overall = segment_rates(stamps, result.segment)


def segment_rates(stamps: list[dt.datetime], segment: int) -> tuple[list[float], float | None]:
    """Jobs/s of each ``segment`` stamps in finishing order, and overall. A segment's clock
    runs from the last stamp of the one before (the first's from its first stamp, leaving out
    the jobs stamped with it: a batch finished then)."""
    if len(stamps) < 2:
        return [], None
    first = stamps[0]
    in_first = sum(1 for stamp in stamps if stamp == first)
    rates = []
    for start in range(0, len(stamps), segment):
        end = min(len(stamps), start + segment) - 1
        since = stamps[start - 1] if start else first
        jobs = end - start + 1 - (0 if start else in_first)
        seconds = (stamps[end] - since).total_seconds()
        rates.append(jobs / seconds if seconds > 0 else float("nan"))
    total = (stamps[-1] - first).total_seconds()
    return rates, (len(stamps) - in_first) / total if total > 0 else None


def clear(engine: sa.Engine, result: Result) -> None:
    """Clear every finished job as ``flask solidq clear-finished --older-than 0`` does."""
    begun = time.perf_counter()
    result.cleared = maintenance.clear_finished_in_batches(
        engine, finished_before=utcnow() + dt.timedelta(seconds=1), batch_size=500
    )
    result.clear_seconds = time.perf_counter() - begun


def run_backend(backend: str, server_url: str, options: argparse.Namespace) -> Result:
    result = Result(backend, options.jobs, options.segment)
    url, drop = common.scratch_database(backend, server_url)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-long-"))
    try:
        app = common.create_app(url)
        with app.app_context():
            engine = app.extensions["solidq"].engine
            result.sizes.append(("empty", table_sizes(engine)))
            begun = time.perf_counter()
            first_id = enqueue(app, options.jobs, options.batch)
            result.enqueue_seconds = time.perf_counter() - begun
            print(f"# {backend}: enqueued in {result.enqueue_seconds:.0f} s", flush=True)
            result.sizes.append((f"{options.jobs:,} ready", table_sizes(engine)))
            run_log = drain(url, engine, options, workdir, result)
            print(f"# {backend}: drained in {result.drain_seconds:.0f} s", flush=True)
            check(engine, first_id, run_log, result)
            result.sizes.append((f"{options.jobs:,} finished", table_sizes(engine)))
            clear(engine, result)
            print(f"# {backend}: cleared in {result.clear_seconds:.0f} s", flush=True)
            result.sizes.append(("after clear-finished", table_sizes(engine)))
            compact(engine, result)
            app.extensions["solidq"].dispose()
    finally:
        drop()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


# --- output --------------------------------------------------------------------------------


def print_result(result: Result, options: argparse.Namespace) -> None:
    name = result.backend
    enqueue_rate = result.jobs / result.enqueue_seconds
    print()
    print(
        f"== {name}: {result.jobs:,} no-op jobs; bulk enqueue {result.enqueue_seconds:.0f} s"
        f" ({enqueue_rate:,.0f} jobs/s); drain {options.processes}x{options.threads}"
        f" {result.drain_seconds:.0f} s ({_rate(result.overall)} jobs/s first to last finish);"
        f" check: {result.check}"
    )
    print()
    print(f"jobs/s per {options.segment:,} finished, in order:")
    print(
        common.table(
            ["segment", "jobs/s"],
            [[f"{index + 1}", _rate(rate)] for index, rate in enumerate(result.segments)],
        )
    )
    print()
    print_rss(result, options)
    print()
    print_sizes(result)
    print()
    vacuum = ", ".join(
        f"{label} {seconds:.1f} s" for label, seconds in result.vacuum_seconds.items()
    )
    print(
        f"clear-finished: {result.cleared:,} jobs in {result.clear_seconds:.1f} s"
        f" ({result.cleared / max(result.clear_seconds, 1e-9):,.0f} jobs/s, 500 a batch); {vacuum}"
    )
    if result.problems:
        print("Problems / worker output other than INFO lines:")
        print("\n".join(f"  {line}" for line in result.problems))
    else:
        print("Worker output: INFO lines only.")


def print_rss(result: Result, options: argparse.Namespace) -> None:
    """Each worker process's RSS at every ``--segment`` jobs finished (the nearest sample)."""
    pids = sorted({pid for sample in result.samples for pid in sample.rss})
    rows = []
    marks = list(range(0, result.jobs + 1, options.segment))
    shown: list[Sample] = []
    for mark in marks:
        sample = min(result.samples, key=lambda s: abs((result.jobs - s.left) - mark))
        if sample in shown or not sample.rss:
            continue
        shown.append(sample)
        rows.append(
            [f"{result.jobs - sample.left:,}", f"{sample.at:.0f}"]
            + [_mib(sample.rss.get(pid)) for pid in pids]
        )
    print(f"Worker RSS, MiB (sampled every {SAMPLE_EVERY:.0f} s; children of the supervisor):")
    print(common.table(["finished", "s", *(f"pid {pid}" for pid in pids)], rows))
    for pid in pids:
        values = [sample.rss[pid] for sample in result.samples if pid in sample.rss]
        print(f"  pid {pid}: min {_mib(min(values))}, max {_mib(max(values))} MiB")


def print_sizes(result: Result) -> None:
    headers = ["state"]
    for name in SHOWN:
        short = name.removeprefix("solidq_")
        headers += [f"{short} data MiB", f"{short} index MiB"]
    headers += ["other MiB", "total MiB"]
    rows = []
    for label, sizes in result.sizes:
        row: list[object] = [label]
        for name in SHOWN:
            data, index = sizes.get(name, (0, 0))
            row += [f"{data / MIB:.1f}", f"{index / MIB:.1f}"]
        other = sum(d + i for name, (d, i) in sizes.items() if name not in SHOWN)
        total = sum(d + i for d, i in sizes.values())
        row += [f"{other / MIB:.1f}", f"{total / MIB:.1f}"]
        rows.append(row)
    print("Table sizes:")
    print(common.table(headers, rows))


def _mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:.1f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs to run through")
    parser.add_argument("--segment", type=int, default=100_000, help="jobs per rate segment")
    parser.add_argument("--batch", type=int, default=1000, help="jobs per perform_all_later")
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--threads", type=int, default=3, help="threads per worker process")
    parser.add_argument("--backends", default="postgres,mysql", help="backends to measure")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds a drain may take")
    options = parser.parse_args()
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    for backend, server_url in chosen:
        started = time.monotonic()
        result = run_backend(backend, server_url, options)
        print_result(result, options)
        print(f"# {backend}: {time.monotonic() - started:.0f} s in all; load {_load()}", flush=True)


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()

"""End-to-end throughput of no-op jobs: how fast ``flask solidq work`` drains a backlog.

    python bench/throughput.py [--jobs N] [--backends sqlite,postgres,mysql]
        [--layouts 1x3,2x3] [--log-level INFO|WARNING]

For each backend, in a scratch database:

1. enqueue ``--jobs`` no-op jobs (``bench.noop``) with ``perform_all_later`` in batches of 1,000;
2. drain them with one ``flask --app bench.app:create_app solidq work --only worker
   --processes 1 --threads 3 --polling-interval 0.1`` subprocess (fork mode), then stop it with
   SIGTERM;
3. enqueue ``--jobs`` again and drain them with ``--processes 2 --threads 3``.

``--layouts`` chooses the drains (``1x3`` alone measures the single process); ``--log-level``
is the workers' (INFO, their default, writes two lines per job; WARNING none).

The CPU per job: the user + system CPU seconds of the subprocess and every process below it
(``/proc/<pid>/stat``, threads included, and the reaped children's time each parent carries),
read at the first poll that finds a job finished and every worker process registered, and
again at the one that finds none left, over the jobs finished in between. Boot (of the last
worker too) and stop are left out, and so is the database server's CPU. CPU time hardly moves
with the machine's other load, where the rate does: it is the figure to compare between
versions.

How the rate is measured: from the jobs' own ``finished_at`` stamps, as
``(N - n0) / (last finished_at - first finished_at)``, where ``n0`` is the number of jobs
stamped with the first ``finished_at``. This leaves out the subprocess's boot (interpreter,
imports, app, registration, forking: a fixed cost of a second or so that says nothing about
the queue) and the time the benchmark takes to notice the end. The finisher stamps one
``finished_at`` per group-commit batch, so the first batch's jobs finished "at" the start of
the interval; counting them would overstate the rate, hence ``- n0``. Timing the drain from
outside would need a boot time to subtract, itself only known by polling.

Reading the output: the first table gives jobs/s per backend and worker layout (processes x
threads). The second gives, per run, the wall time from spawning the subprocess to the last
``finished_at`` (boot included), how long the graceful stop took, and the exactly-once check:
every job has ``finished_at`` set, nothing is left ready, claimed, scheduled, blocked or
failed, and every job id appears exactly once in the run log the worker processes append to
when a job starts (``SOLIDQ_BENCH_RUN_LOG``; one ``write`` per job, which costs the workers a
few microseconds per job). Lines of the worker's output other than routine INFO lines follow.
The machine has few cores and the database server runs on it too, so the figures move with
whatever else runs: compare columns within one run, and run twice.
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402
from flask import Flask  # noqa: E402

from bench import app as bench_app  # noqa: E402
from bench import common  # noqa: E402
from bench import procfs  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

JOBS = models.JobRecord.__table__
PROCESSES = models.ProcessRecord.__table__
LEFTOVERS = {
    "ready": models.ReadyExecution.__table__,
    "claimed": models.ClaimedExecution.__table__,
    "scheduled": models.ScheduledExecution.__table__,
    "blocked": models.BlockedExecution.__table__,
    "failed": models.FailedExecution.__table__,
}
BATCH = 1000
THREADS = 3


@dataclasses.dataclass
class Run:
    """One drain: its rate and what the checks found."""

    layout: str
    rate: float | None = None
    cpu_per_job: float | None = None
    wall: float | None = None
    stop: float | None = None
    check: str = "not checked"
    problems: list[str] = dataclasses.field(default_factory=list)


def enqueue(app: Flask, count: int) -> int:
    """Enqueue ``count`` no-op jobs in batches; return the lowest job id."""
    first_id = None
    with app.app_context():
        for start in range(0, count, BATCH):
            jobs = [bench_app.noop.new(index) for index in range(start, min(count, start + BATCH))]
            common.solidq.perform_all_later(jobs)
            if first_id is None:
                first_id = min(job.provider_job_id for job in jobs)
    assert first_id is not None
    return first_id


def unfinished(engine: sa.Engine, first_id: int) -> int:
    with solidq_db.read(engine) as connection:
        return connection.execute(
            sa.select(sa.func.count())
            .select_from(JOBS)
            .where(JOBS.c.id >= first_id, JOBS.c.finished_at.is_(None))
        ).scalar_one()


def workers(engine: sa.Engine) -> int:
    """How many worker processes are registered: the CPU count starts once every one of them
    is, so that none's boot is counted as work."""
    with solidq_db.read(engine) as connection:
        return connection.execute(
            sa.select(sa.func.count()).select_from(PROCESSES).where(PROCESSES.c.kind == "Worker")
        ).scalar_one()


def drain(
    app: Flask,
    url: str,
    count: int,
    layout: tuple[int, int],
    workdir: pathlib.Path,
    timeout: float,
    log_level: str = "INFO",
) -> Run:
    """Enqueue ``count`` jobs, drain them with ``processes`` x ``threads`` workers at
    ``log_level``, check the result."""
    processes, threads = layout
    run = Run(f"{processes}x{threads}")
    engine = app.extensions["solidq"].engine
    first_id = enqueue(app, count)
    run_log = workdir / f"runs-{run.layout}.txt"
    output = workdir / f"worker-{run.layout}.log"
    arguments = ["--only", "worker", "--processes", str(processes), "--threads", str(threads)]
    arguments += ["--polling-interval", "0.1", "--mode", "fork", "--log-level", log_level]
    with output.open("wb") as log:
        spawned = time.time()
        process = common.start_work(url, arguments, log, env={"SOLIDQ_BENCH_RUN_LOG": str(run_log)})
        try:
            deadline = time.monotonic() + timeout
            first: tuple[int, float] | None = None  # (jobs left, CPU seconds) at the first finish
            while left := unfinished(engine, first_id):
                if first is None and left < count and workers(engine) == processes:
                    first = (left, procfs.tree_cpu_seconds(process.pid))
                if process.poll() is not None:
                    run.problems.append(f"the worker exited early with status {process.returncode}")
                    break
                if time.monotonic() > deadline:
                    run.problems.append(f"not drained after {timeout:.0f} s")
                    break
                time.sleep(0.25)
            if first is not None and not left and first[0] > 0:
                run.cpu_per_job = (procfs.tree_cpu_seconds(process.pid) - first[1]) / first[0]
            run.stop = common.stop_work(process)
            if run.stop is None:
                run.problems.append("the worker didn't stop within 30 s of SIGTERM; killed")
        finally:
            common.kill_work(process)
    run.problems += common.log_problems(output.read_text(errors="replace"))

    stamps, leftovers = finish_stamps_and_leftovers(engine, first_id)
    if len(stamps) >= 2:
        first, last = min(stamps), max(stamps)
        in_first_batch = sum(1 for stamp in stamps if stamp == first)
        if last > first:
            run.rate = (len(stamps) - in_first_batch) / (last - first).total_seconds()
        run.wall = (last - dt.datetime.fromtimestamp(spawned, dt.timezone.utc)).total_seconds()

    runs = collections.Counter()
    if run_log.exists():
        runs.update(int(line) for line in run_log.read_text().split())
    ours = {job_id: seen for job_id, seen in runs.items() if job_id >= first_id}
    twice = sorted(job_id for job_id, seen in ours.items() if seen > 1)
    issues = []
    if len(stamps) != count:
        issues.append(f"{len(stamps)} of {count} finished")
    issues += [f"{number} {name}" for name, number in leftovers.items() if number]
    if len(ours) != count:
        issues.append(f"{len(ours)} of {count} ids in the run log")
    if twice:
        issues.append(f"{len(twice)} jobs ran more than once (e.g. ids {twice[:5]})")
    run.check = "; ".join(issues) if issues else f"all {count:,} exactly once"
    return run


def parse_layouts(text: str) -> list[tuple[int, int]]:
    """``1x3,2x3`` as ``[(1, 3), (2, 3)]``: processes x threads."""
    layouts = []
    for item in text.split(","):
        processes, _, threads = item.strip().partition("x")
        layouts.append((int(processes), int(threads or THREADS)))
    return layouts


def finish_stamps_and_leftovers(
    engine: sa.Engine, first_id: int
) -> tuple[list[dt.datetime], dict[str, int]]:
    """The ``finished_at`` stamps of the jobs from ``first_id`` on, sorted, and how many rows
    each execution table still holds (all 0 after a clean drain)."""
    with solidq_db.read(engine) as connection:
        stamps = sorted(
            connection.scalars(
                sa.select(JOBS.c.finished_at).where(
                    JOBS.c.id >= first_id, JOBS.c.finished_at.is_not(None)
                )
            )
        )
        leftovers = {
            name: connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for name, table in LEFTOVERS.items()
        }
    return stamps, leftovers


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain")
    parser.add_argument(
        "--backends", default="sqlite,postgres,mysql", help="comma-separated backends to measure"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds a drain may take before giving up"
    )
    parser.add_argument(
        "--layouts", default="1x3,2x3", help="comma-separated drains, processes x threads"
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the workers' --log-level (INFO, their default, logs two lines per job)",
    )
    options = parser.parse_args()
    layouts = parse_layouts(options.layouts)

    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)

    rates: list[list[object]] = []
    details: list[list[object]] = []
    problems: list[str] = []
    for backend, server_url in chosen:
        url, drop = common.scratch_database(backend, server_url)
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-throughput-"))
        try:
            app = common.create_app(url)
            with app.app_context():
                runs = [
                    drain(
                        app, url, options.jobs, layout, workdir, options.timeout, options.log_level
                    )
                    for layout in layouts
                ]
                app.extensions["solidq"].engine.dispose()
        finally:
            drop()
            shutil.rmtree(workdir, ignore_errors=True)
        rates.append([backend, *(_number(run.rate) for run in runs)])
        rates[-1] += [_micros(run.cpu_per_job) for run in runs]
        for run in runs:
            details.append([backend, run.layout, _seconds(run.wall), _seconds(run.stop), run.check])
            problems += [f"{backend} {run.layout}: {line}" for line in run.problems]
        print(f"# {backend} done", flush=True)

    print()
    print(
        f"End-to-end no-op jobs/s and the workers' CPU µs per job ({options.jobs:,} jobs per"
        f" drain; processes x threads; --log-level {options.log_level})"
    )
    names = [f"{processes}x{threads}" for processes, threads in layouts]
    headers = [f"{name} jobs/s" for name in names] + [f"{name} CPU µs/job" for name in names]
    print(common.table(["backend", *headers], rates))
    print()
    common.print_drain_details(details, problems)
    print(f"# load at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")


def _number(value: float | None) -> object:
    return "-" if value is None else value


def _micros(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e6:.0f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()

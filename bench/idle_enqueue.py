"""Single enqueues beside idle workers: does a fleet of polling workers slow ``perform_later``,
and is it the CPU or the queue?

    python bench/idle_enqueue.py [--workers 12] [--jobs 3000] [--rounds 2]
                                 [--backends postgres,mysql]

For each backend, in a scratch database (dropped at the end), these set-ups take turns (each
round in a rotated order), and in each ``--jobs`` ``perform_later`` calls of a no-op job are
timed, one after another, from this process:

* ``none``: no worker runs;
* ``idle, poll 0.1 s``: one ``flask solidq work --only worker --processes 12 --threads 3
  --queues elsewhere`` (fork mode; the default polling interval, 0.1 s) runs beside it: twelve
  worker processes that never get a job, since every job goes to ``default``;
* ``idle, poll 10 s``: the same with ``--polling-interval 10``, so their polls all but stop and
  only the wake-ups remain;
* ``idle, poll 10 s, other bell``: the same, but the workers reach the database through another
  URL (``localhost`` for ``127.0.0.1``): the wake-ups between processes of one machine are kept
  per database URL, so enqueues here ring no worker of theirs (on PostgreSQL a single enqueue
  doesn't NOTIFY).

For the set-ups with workers it prints the workers' CPU (user + system, /proc) over 10 s of
pure idleness before the enqueues, per worker process, and over the enqueues, per worker
process and per enqueue. On a 2-core machine that also runs the database server, CPU the
workers take is CPU the enqueuing process and the server don't get.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import app as bench_app  # noqa: E402,F401 - registers the jobs
from bench import common  # noqa: E402
from bench import procfs  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)
IDLE_SECONDS = 10.0

#: name -> (polling interval, whether the workers use another URL), None: no workers.
SETUPS: dict[str, tuple[float, bool] | None] = {
    "none": None,
    "idle, poll 0.1 s": (0.1, False),
    "idle, poll 10 s": (10.0, False),
    "idle, poll 10 s, other bell": (10.0, True),
}


class Result(t.NamedTuple):
    setup: str
    rate: float
    idle_cpu_ms_per_s: float | None
    enqueue_cpu_ms_per_s: float | None
    cpu_us_per_enqueue: float | None


def other_url(url: str) -> str:
    parsed = sa.make_url(url)
    if parsed.host in ("127.0.0.1", None):
        parsed = parsed.set(host="localhost")
    return parsed.render_as_string(hide_password=False)


def workers_cpu(pids: list[int]) -> float:
    return sum(procfs.cpu_seconds(pid) or 0.0 for pid in pids)


def wait_workers(engine: sa.Engine, count: int, process: t.Any) -> list[int]:
    """The pids of the ``count`` registered workers, once they are."""
    deadline = time.monotonic() + 120
    while True:
        with solidq_db.read(engine) as connection:
            pids = list(
                connection.scalars(sa.select(PROCESSES.c.pid).where(PROCESSES.c.kind == "Worker"))
            )
        if len(pids) >= count:
            return [int(pid) for pid in pids]
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"{len(pids)} of {count} workers registered")
        time.sleep(0.2)


def enqueue_rate(count: int) -> float:
    started = time.perf_counter()
    for index in range(count):
        bench_app.noop.perform_later(index)
    return count / (time.perf_counter() - started)


def measure(
    setup: str, url: str, engine: sa.Engine, options: argparse.Namespace, workdir: pathlib.Path
) -> Result:
    config = SETUPS[setup]
    if config is None:
        return Result(setup, enqueue_rate(options.jobs), None, None, None)
    polling, elsewhere = config
    arguments = ["--only", "worker", "--processes", str(options.workers), "--threads", "3"]
    arguments += ["--queues", "elsewhere", "--polling-interval", str(polling), "--mode", "fork"]
    with (workdir / "worker.log").open("wb") as log:
        process = common.start_work(other_url(url) if elsewhere else url, arguments, log)
    try:
        pids = wait_workers(engine, options.workers, process)
        time.sleep(3.0)  # the end of their boot
        cpu, begun = workers_cpu(pids), time.monotonic()
        time.sleep(IDLE_SECONDS)
        idle = (workers_cpu(pids) - cpu) / (time.monotonic() - begun) / len(pids)
        cpu, begun = workers_cpu(pids), time.monotonic()
        rate = enqueue_rate(options.jobs)
        used = workers_cpu(pids) - cpu
        elapsed = time.monotonic() - begun
    finally:
        common.stop_work(process)
        common.kill_work(process)
    return Result(
        setup, rate, idle * 1000, used / elapsed / len(pids) * 1000, used / options.jobs * 1e6
    )


def run_backend(backend: str, server_url: str, options: argparse.Namespace) -> list[Result]:
    url, drop = common.scratch_database(backend, server_url)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-idle-"))
    results = []
    names = list(SETUPS)
    try:
        app = common.create_app(url)
        with app.app_context():
            engine = app.extensions["solidq"].engine
            bench_app.noop.perform_later(0)  # connect, warm the statement caches
            for round_index in range(options.rounds):
                shift = round_index % len(names)
                for setup in names[shift:] + names[:shift]:
                    result = measure(setup, url, engine, options, workdir)
                    results.append(result)
                    print(f"# {backend} round {round_index + 1}: {result}", flush=True)
            app.extensions["solidq"].dispose()
    finally:
        drop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def _range(values: list[float | None], digits: int = 0) -> str:
    present = [value for value in values if value is not None]
    if not present:
        return "-"
    low, high = min(present), max(present)
    if len(present) == 1 or f"{low:,.{digits}f}" == f"{high:,.{digits}f}":
        return f"{low:,.{digits}f}"
    return f"{low:,.{digits}f} - {high:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=12, help="idle worker processes")
    parser.add_argument("--jobs", type=int, default=3000, help="perform_later calls timed")
    parser.add_argument("--rounds", type=int, default=2, help="times each set-up is measured")
    parser.add_argument("--backends", default="postgres,mysql", help="backends to measure")
    options = parser.parse_args()
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    rows = []
    for backend, server_url in chosen:
        results = run_backend(backend, server_url, options)
        for setup in SETUPS:
            mine = [result for result in results if result.setup == setup]
            rows.append(
                [
                    backend,
                    setup,
                    _range([result.rate for result in mine]),
                    f"{statistics.median(result.rate for result in mine):,.0f}",
                    _range([result.idle_cpu_ms_per_s for result in mine], 1),
                    _range([result.enqueue_cpu_ms_per_s for result in mine], 1),
                    _range([result.cpu_us_per_enqueue for result in mine]),
                ]
            )
    print()
    print(
        f"perform_later beside {options.workers} idle worker processes ({options.jobs:,} calls"
        f" per run, {options.rounds} run(s); CPU of one worker process in ms per second)"
    )
    headers = ["backend", "set-up", "jobs/s", "median", "idle CPU ms/s", "CPU ms/s enqueuing"]
    headers += ["workers' CPU us per enqueue"]
    print(common.table(headers, rows))
    print(f"# load at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()

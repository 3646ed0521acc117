"""How the queue scales: jobs/s by worker processes and threads, and a claim's cost by backlog.

    python bench/scale.py workers [--jobs N] [--processes 1,2,4] [--threads 3,10,30]
                                  [--rounds N] [--backends sqlite,postgres,mysql]
    python bench/scale.py claim [--backlogs 1000,1000000] [--limits 3,10] [--claims N]
                                [--backends sqlite,postgres,mysql]

``workers``: for each backend, in one scratch database, every layout of ``--processes`` x
``--threads`` drains ``--jobs`` no-op jobs through ``flask solidq work --only worker`` (fork
mode, polling every 0.1 s), measured exactly as ``bench/throughput.py`` measures (its
``drain``: bulk enqueue, one supervisor subprocess, the rate from the jobs' own ``finished_at``
stamps, the exactly-once check). With ``--rounds`` above 1 the layouts are interleaved, each
round in a rotated order, and a cell shows the lowest and highest rate. The default (5,000
jobs, 9 layouts, 3 backends: 27 drains) took 3.7 minutes on 2 cores: each drain costs about
2 s of enqueue, boot and stop besides the drain itself (1 s to 14 s). The boot is left out of
the rate, but with 1,000 jobs a drain lasted well under a second and the rates jumped by half
between runs. For figures to publish, ``--rounds 2`` (about 8 minutes) shows the spread.

``claim``: for each backend, one scratch database per ``--backlogs`` size, filled with that
many ready jobs by set-based inserts (``generate_series`` on PostgreSQL, a recursive CTE on
MariaDB and SQLite), then ``ANALYZE``. Then ``claim_batch`` (every queue, the worker's own
claim engine) is timed ``--claims`` times per limit, the databases taking turns claim by claim
so that both sizes see the same machine noise. After each timed claim the claimed jobs are put
back (claims deleted, ready rows inserted again, untimed), so the backlog stays at its size and
the claim always finds the head of the queue freshly churned, as a draining worker does. It
prints the median and p90 milliseconds per claim; a claim that costs more than 1.5 times (and
0.5 ms more than) its cost with the smallest backlog is flagged as not flat. The default
(1,000 and 1,000,000 ready rows, 200 claims per limit) took 2.2 minutes, most of it filling the
million rows (20 s on SQLite, 40 s on MariaDB, 50 s on PostgreSQL).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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

from bench import app as bench_app  # noqa: E402,F401 - registers the jobs the worker runs
from bench import common  # noqa: E402
from bench import throughput  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.operations import processes as process_roll  # noqa: E402
from flask_solidq.operations.claim import claim_batch  # noqa: E402
from flask_solidq.operations.queue_selector import QueueSelector  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

READY = t.cast(sa.Table, models.ReadyExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
JOBS = t.cast(sa.Table, models.JobRecord.__table__)

#: Claims per limit and database made before timing starts (connections, caches, plans).
WARM_UP = 10
#: A claim is "not flat" when its median grew by more than this factor and ...
NOT_FLAT_FACTOR = 1.5
#: ... by more than this many milliseconds over the smallest backlog's.
NOT_FLAT_MS = 0.5


# --- workers -------------------------------------------------------------------------------


def run_workers(options: argparse.Namespace) -> None:
    """Drain ``--jobs`` jobs with every processes x threads layout, per backend; print tables."""
    layouts = [(p, n) for p in _ints(options.processes) for n in _ints(options.threads)]
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    started = time.monotonic()
    rates: dict[tuple[str, int, int], list[float]] = {}
    details: list[list[object]] = []
    problems: list[str] = []
    for backend, server_url in chosen:
        for run in _drain_layouts(backend, server_url, layouts, options):
            processes, threads = (int(part) for part in run.layout.split("x"))
            if run.rate is not None:
                rates.setdefault((backend, processes, threads), []).append(run.rate)
            wall, stop = _seconds(run.wall), _seconds(run.stop)
            details.append([backend, run.layout, wall, stop, run.check])
            problems += [f"{backend} {run.layout}: {line}" for line in run.problems]
        print(f"# {backend} done ({time.monotonic() - started:.0f} s so far)", flush=True)

    threads_list = sorted({n for _, n in layouts})
    rows = [
        [
            backend,
            processes,
            *(_rate_cell(rates.get((backend, processes, n))) for n in threads_list),
        ]
        for backend, _ in chosen
        for processes in sorted({p for p, _ in layouts})
    ]
    print()
    print(
        f"End-to-end no-op jobs/s ({options.jobs:,} jobs per drain, {options.rounds} round(s);"
        " rows: worker processes, columns: threads per process)"
    )
    print(common.table(["backend", "processes", *(f"{n} threads" for n in threads_list)], rows))
    print()
    common.print_drain_details(details, problems)
    print(f"# total {time.monotonic() - started:.0f} s; load at the end: {_load()}")


def _drain_layouts(
    backend: str, server_url: str, layouts: list[tuple[int, int]], options: argparse.Namespace
) -> list[throughput.Run]:
    """Every layout's drains on one backend, in one scratch database, rounds interleaved."""
    url, drop = common.scratch_database(backend, server_url)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-scale-"))
    runs = []
    try:
        app = common.create_app(url)
        with app.app_context():
            for round_index in range(options.rounds):
                shift = round_index % len(layouts)
                for processes, threads in layouts[shift:] + layouts[:shift]:
                    with _threads(threads):
                        runs.append(
                            throughput.drain(
                                app, url, options.jobs, processes, workdir, options.timeout
                            )
                        )
            app.extensions["solidq"].dispose()
    finally:
        drop()
        shutil.rmtree(workdir, ignore_errors=True)
    return runs


@contextlib.contextmanager
def _threads(threads: int) -> t.Iterator[None]:
    """Let ``throughput.drain`` start ``threads`` threads per process: it reads its module's
    ``THREADS`` at each call (its own table only ever needs 3), so that is set for the call."""
    saved = throughput.THREADS
    throughput.THREADS = threads
    try:
        yield
    finally:
        throughput.THREADS = saved


def _rate_cell(values: list[float] | None) -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return f"{low:,.0f}" if len(values) == 1 else f"{low:,.0f} - {high:,.0f}"


# --- claim ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Backlog:
    """One scratch database holding ``size`` ready jobs, and the claim times measured on it."""

    size: int
    url: str
    fill_seconds: float = 0.0
    engine: sa.Engine | None = None
    claim_engine: sa.Engine | None = None
    #: The registered process the claims are made for (a claim only takes jobs for one).
    process_id: int = 0
    times: dict[int, list[float]] = dataclasses.field(default_factory=dict)
    short: dict[int, int] = dataclasses.field(default_factory=dict)


def run_claim(options: argparse.Namespace) -> None:
    """Time ``claim_batch`` over each backlog size, per backend; print one table."""
    sizes = sorted(_ints(options.backlogs))
    limits = _ints(options.limits)
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    started = time.monotonic()
    rows: list[list[object]] = []
    notes: list[str] = []
    for backend, server_url in chosen:
        backlogs = _measure_backend(backend, server_url, sizes, limits, options.claims)
        rows += _claim_rows(backend, backlogs, limits)
        notes += _flatness_notes(backend, backlogs, limits)
        print(f"# {backend} done ({time.monotonic() - started:.0f} s so far)", flush=True)
    print()
    print(
        f"claim_batch over every queue, ms per claim ({options.claims} timed claims per limit and"
        " backlog, backlogs interleaved claim by claim, claimed jobs put back after each)"
    )
    headers = ["backend", "ready rows", "fill s"]
    for limit in limits:
        headers += [f"limit {limit} median", f"limit {limit} p90", f"limit {limit} x"]
    print(common.table(headers, rows))
    print()
    print("\n".join(notes) if notes else "Flat: no claim cost grew with the backlog.")
    print(f"# total {time.monotonic() - started:.0f} s; load at the end: {_load()}")


def _measure_backend(
    backend: str, server_url: str, sizes: list[int], limits: list[int], claims: int
) -> list[Backlog]:
    """Fill one scratch database per size, time the claims on them in turn, drop them."""
    backlogs: list[Backlog] = []
    with contextlib.ExitStack() as cleanup:
        for size in sizes:
            url, drop = common.scratch_database(backend, server_url)
            cleanup.callback(drop)
            backlog = Backlog(size, url)
            backlogs.append(backlog)
            begun = time.perf_counter()
            fill(url, size)
            backlog.fill_seconds = time.perf_counter() - begun
            print(f"# {backend}: {size:,} ready jobs in {backlog.fill_seconds:.1f} s", flush=True)
        for backlog in backlogs:
            app = common.create_app(backlog.url)
            cleanup.enter_context(app.app_context())
            state = app.extensions["solidq"]
            cleanup.callback(state.dispose)
            backlog.engine, backlog.claim_engine = state.engine, state.claim_engine
            backlog.process_id = process_roll.register(
                state.engine,
                kind="Worker",
                name="bench-claimer",
                pid=os.getpid(),
                supervisor_id=None,
                metadata={},
            )
        for limit in limits:
            _time_claims(backlogs, limit, claims)
    return backlogs


def _time_claims(backlogs: list[Backlog], limit: int, claims: int) -> None:
    """``claims`` timed claims of ``limit`` on every backlog, taking turns, after a warm-up."""
    selector = QueueSelector(("*",))
    for index in range(WARM_UP + claims):
        for backlog in backlogs:
            assert backlog.engine is not None and backlog.claim_engine is not None
            begun = time.perf_counter()
            batch = claim_batch(backlog.claim_engine, selector, limit, backlog.process_id)
            elapsed = (time.perf_counter() - begun) * 1000
            put_back(backlog.engine, [job.id for job in batch.jobs])
            if index < WARM_UP:
                continue
            backlog.times.setdefault(limit, []).append(elapsed)
            if len(batch.jobs) < min(limit, backlog.size):
                backlog.short[limit] = backlog.short.get(limit, 0) + 1


def put_back(engine: sa.Engine, job_ids: list[int]) -> None:
    """Make the claimed jobs ready again, so the backlog keeps its size."""
    if not job_ids:
        return
    with solidq_db.write(engine) as connection:
        connection.execute(CLAIMED.delete().where(CLAIMED.c.job_id.in_(job_ids)))
        connection.execute(
            READY.insert().from_select(
                ["job_id", "queue_name", "priority", "created_at"],
                sa.select(JOBS.c.id, JOBS.c.queue_name, JOBS.c.priority, JOBS.c.created_at).where(
                    JOBS.c.id.in_(job_ids)
                ),
            )
        )


def _claim_rows(backend: str, backlogs: list[Backlog], limits: list[int]) -> list[list[object]]:
    """One row per backlog: its fill time, and per limit the median, p90 and the median's
    ratio to the smallest backlog's."""
    rows: list[list[object]] = []
    for backlog in backlogs:
        row: list[object] = [backend, f"{backlog.size:,}", f"{backlog.fill_seconds:.1f}"]
        for limit in limits:
            median, p90 = _median_p90(backlog.times[limit])
            base, _ = _median_p90(backlogs[0].times[limit])
            row += [f"{median:.2f}", f"{p90:.2f}", f"{median / base:.2f}"]
        rows.append(row)
    return rows


def _flatness_notes(backend: str, backlogs: list[Backlog], limits: list[int]) -> list[str]:
    """A note for each claim that grew with the backlog, and for claims that came back short."""
    notes = []
    for limit in limits:
        base, _ = _median_p90(backlogs[0].times[limit])
        for backlog in backlogs[1:]:
            median, _ = _median_p90(backlog.times[limit])
            if median > base * NOT_FLAT_FACTOR and median - base > NOT_FLAT_MS:
                notes.append(
                    f"NOT FLAT: {backend} limit {limit}: {median:.2f} ms with {backlog.size:,}"
                    f" ready rows vs {base:.2f} ms with {backlogs[0].size:,}"
                    f" ({median / base:.1f}x)"
                )
        for backlog in backlogs:
            if backlog.short.get(limit):
                notes.append(
                    f"SHORT: {backend} limit {limit}, {backlog.size:,} ready rows:"
                    f" {backlog.short[limit]} claims took fewer jobs than the limit"
                )
    return notes


def _median_p90(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    return statistics.median(values), statistics.quantiles(values, n=10)[8]


# --- filling a backlog ---------------------------------------------------------------------

_COLUMNS = "queue_name, class_name, arguments, priority, active_job_id, created_at, updated_at"


def _fill_jobs_sql(dialect: str, count: int) -> str:
    """Jobs 1..``count``, all ready on the default queue, stored as ``perform_all_later``
    stores them (a payload naming the job and its argument, a unique active job id)."""
    if dialect == "postgresql":
        return f"""
            INSERT INTO solidq_jobs ({_COLUMNS})
            SELECT 'default', 'bench.noop', '{{"job":"bench.common:noop","args":[' || n || ']}}',
                   0, gen_random_uuid()::text, now() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'
            FROM generate_series(1, {count}) AS n
        """
    sequence = (
        f"WITH RECURSIVE seq (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {count})"
    )
    if dialect == "mysql":
        return f"""
            INSERT INTO solidq_jobs ({_COLUMNS}) {sequence}
            SELECT 'default', 'bench.noop',
                   CONCAT('{{"job":"bench.common:noop","args":[', n, ']}}'),
                   0, UUID(), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
            FROM seq
        """
    return f"""
        INSERT INTO solidq_jobs ({_COLUMNS}) {sequence}
        SELECT 'default', 'bench.noop', '{{"job":"bench.common:noop","args":[' || n || ']}}',
               0, lower(hex(randomblob(16))), strftime('%Y-%m-%d %H:%M:%f', 'now'),
               strftime('%Y-%m-%d %H:%M:%f', 'now')
        FROM seq
    """


_FILL_READY = """
    INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)
    SELECT id, queue_name, priority, created_at FROM solidq_jobs
"""

_ANALYZE = {
    "postgresql": "ANALYZE",
    "mysql": "ANALYZE TABLE solidq_jobs, solidq_ready_executions",
    "sqlite": "ANALYZE",
}


def fill(url: str, count: int) -> None:
    """Store ``count`` ready no-op jobs in the empty queue at ``url`` with two set-based
    statements (a row at a time would take minutes for a million), then refresh the planner's
    statistics, as autovacuum or a DBA would have by the time a backlog is that big."""
    engine = sa.create_engine(url)
    dialect = "mysql" if engine.dialect.name in ("mysql", "mariadb") else engine.dialect.name
    try:
        with engine.begin() as connection:
            if dialect == "mysql":
                # MariaDB stops a recursive CTE after 1,000 iterations by default.
                connection.exec_driver_sql(f"SET SESSION max_recursive_iterations = {count + 1}")
            connection.exec_driver_sql(_fill_jobs_sql(dialect, count))
            connection.exec_driver_sql(_FILL_READY)
        with engine.connect() as connection:
            autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
            autocommit.exec_driver_sql(_ANALYZE[dialect])
            if dialect == "mysql":
                autocommit.exec_driver_sql("SET SESSION max_recursive_iterations = DEFAULT")
            ready = autocommit.exec_driver_sql(
                "SELECT count(*) FROM solidq_ready_executions"
            ).scalar()
        if ready != count:
            raise RuntimeError(f"filled {ready} ready rows, wanted {count}")
    finally:
        engine.dispose()


# --- command line --------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    workers = commands.add_parser("workers", help="jobs/s by worker processes x threads")
    workers.add_argument("--jobs", type=int, default=5_000, help="jobs per drain")
    workers.add_argument("--processes", default="1,2,4", help="worker processes to try")
    workers.add_argument("--threads", default="3,10,30", help="threads per process to try")
    workers.add_argument("--rounds", type=int, default=1, help="times each layout drains")
    workers.add_argument(
        "--timeout", type=float, default=300.0, help="seconds a drain may take before giving up"
    )
    claim = commands.add_parser("claim", help="a claim's cost by ready backlog")
    claim.add_argument("--backlogs", default="1000,1000000", help="ready rows per database")
    claim.add_argument("--limits", default="3,10", help="jobs per claim to try")
    claim.add_argument("--claims", type=int, default=200, help="timed claims per limit")
    for command in (workers, claim):
        command.add_argument(
            "--backends",
            default="sqlite,postgres,mysql",
            help="comma-separated backends to measure",
        )
    options = parser.parse_args()
    if options.command == "workers":
        run_workers(options)
    else:
        run_claim(options)


if __name__ == "__main__":
    main()

"""The claim under contention: N claimers at once against one big ready backlog.

    python bench/contention.py [--claimers 8,32,128] [--backends postgres,mysql] [--limit 10]
                               [--seconds 6] [--rounds 2] [--backlog 300000] [--processes 8]
                               [--max-connections postgres=64,mysql=140]

For each backend, one scratch database (dropped at the end) is filled with ``--backlog`` ready
no-op jobs by set-based inserts (``bench/scale.py``'s ``fill``), and ``max(--claimers)``
worker rows are registered (``flask_solidq.operations.processes.register``), one per claimer.
Then, for each N of ``--claimers`` (rounds interleaved, each round in a rotated order):

* the backlog is made whole again (claimed jobs put back to ready, set-based; ``VACUUM`` of
  the two execution tables on PostgreSQL, whose test server runs with autovacuum off);
* N claimer threads, spread over ``--processes`` forked processes, each call
  ``claim_batch(engine, QueueSelector(("*",)), --limit, its process id)`` in a loop for
  ``--seconds`` seconds, as a worker's claim does (on PostgreSQL through
  ``create_claim_engine``'s engine, ``synchronous_commit=off``; on MariaDB through the queue
  engine, ``READ COMMITTED``). Each thread has a connection of its own, unless N exceeds the
  backend's ``--max-connections``: then the claimers share that many connections, each
  connection taken in turn by a lock (as a transaction-mode pooler would do), and the wait for
  it counts in the claim's time;
* the first second is left out as warm-up: claims/s and jobs/s over the rest, p50 and p99 of
  one claim's time, claims that came back empty, errors by type, and the server's own count
  of deadlocks (``pg_stat_database.deadlocks``; MariaDB's ``Innodb_deadlocks``) and, on
  MariaDB, row lock waits (``Innodb_row_lock_waits``) over the run. ``claim_batch`` retries a
  deadlock itself (up to 3 attempts), so a deadlock shows as a slow claim, an error only when
  all three failed;
* the exactly-once check of the claim: the claimed rows in the database equal the jobs the
  claimers were given, and each job is claimed once (``solidq_claimed_executions.job_id``).

The machine's 2 cores run the claimers and the database server at once: what the figures
show is how the claim's throughput and latency change as claimers are added (where the curve
bends, whether it collapses), not what a bigger server would reach.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import pathlib
import statistics
import sys
import threading
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import common  # noqa: E402
from bench import scale  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.operations import processes as process_roll  # noqa: E402
from flask_solidq.operations.claim import claim_batch  # noqa: E402
from flask_solidq.operations.queue_selector import QueueSelector  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402
from flask_solidq.storage import engines  # noqa: E402

READY = t.cast(sa.Table, models.ReadyExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
JOBS = t.cast(sa.Table, models.JobRecord.__table__)
WARM_UP = 1.0

#: One timed claim: start (s after the common start), duration (s), jobs claimed, error name.
Claim = tuple[float, float, int, str]


# --- the claimers (in forked children) -----------------------------------------------------


def claim_engine(url: str) -> sa.Engine:
    """The engine a worker claims through: PostgreSQL's ``synchronous_commit=off`` claim
    engine, else the queue engine."""
    parsed = sa.make_url(url)
    engine = engines.create_claim_engine(parsed)
    return engine if engine is not None else engines.create_queue_engine(parsed)


def claimer_process(
    url: str,
    process_ids: list[int],
    connections: int,
    limit: int,
    start_at: float,
    seconds: float,
    results: t.Any,
) -> None:
    """Run one thread per process id, sharing ``connections`` connections (one engine each,
    taken in turn), until ``start_at + seconds``; put every thread's claims on ``results``."""
    engines = [claim_engine(url) for _ in range(connections)]
    locks = [threading.Lock() for _ in engines]
    for engine in engines:
        with engine.connect():
            pass  # connect before the clock starts
    selector = QueueSelector(("*",))
    collected: list[Claim] = []
    gather = threading.Lock()

    def run(index: int, process_id: int) -> None:
        engine, lock = engines[index % connections], locks[index % connections]
        mine: list[Claim] = []
        while time.time() < start_at:
            time.sleep(min(0.01, max(0.0, start_at - time.time())))
        while (begun := time.time()) < start_at + seconds:
            error, claimed = "", 0
            try:
                with lock:
                    claimed = len(claim_batch(engine, selector, limit, process_id).jobs)
            except Exception as exc:  # noqa: BLE001 - counted and shown, not raised
                error = exc.__class__.__name__
                if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None:
                    error += f"({exc.orig.__class__.__name__})"
            mine.append((begun - start_at, time.time() - begun, claimed, error))
        with gather:
            collected.extend(mine)

    threads = [
        threading.Thread(target=run, args=(index, process_id), daemon=True)
        for index, process_id in enumerate(process_ids)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for engine in engines:
        engine.dispose()
    results.put(collected)


# --- one measurement ------------------------------------------------------------------------


class Measure(t.NamedTuple):
    claimers: int
    connections: int
    claims_per_s: float
    jobs_per_s: float
    p50_ms: float
    p99_ms: float
    empty: int
    errors: dict[str, int]
    deadlocks: int
    lock_waits: int | None
    check: str


def measure(
    url: str, engine: sa.Engine, process_ids: list[int], options: argparse.Namespace, cap: int
) -> Measure:
    """N = ``len(process_ids)`` claimers for ``--seconds``; see the module."""
    claimers = len(process_ids)
    connections = min(claimers, cap)
    spread = min(options.processes, claimers)
    before = server_counters(engine)
    claimed_before = count(engine, CLAIMED)
    engine.dispose()  # the children are forked: they must not share its sockets
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    start_at = time.time() + 1.0 + 0.1 * spread
    children = []
    for child in range(spread):
        ids = process_ids[child::spread]
        share = connections // spread + (1 if child < connections % spread else 0)
        children.append(
            context.Process(
                target=claimer_process,
                args=(url, ids, max(1, share), options.limit, start_at, options.seconds, results),
            )
        )
    for process in children:
        process.start()
    claims: list[Claim] = []
    for _ in children:
        claims += results.get(timeout=options.seconds + 120)
    for process in children:
        process.join(30)
    after = server_counters(engine)
    return summarize(claims, engine, claimed_before, before, after, claimers, connections, options)


def summarize(
    claims: list[Claim],
    engine: sa.Engine,
    claimed_before: int,
    before: tuple[int, int | None],
    after: tuple[int, int | None],
    claimers: int,
    connections: int,
    options: argparse.Namespace,
) -> Measure:
    window = options.seconds - WARM_UP
    timed = [
        claim for claim in claims if claim[0] >= WARM_UP and claim[0] + claim[1] <= options.seconds
    ]
    durations = sorted(claim[1] * 1000 for claim in timed)
    errors = collections.Counter(claim[3] for claim in claims if claim[3])
    claimed_now = count(engine, CLAIMED)
    given = sum(claim[2] for claim in claims)
    with solidq_db.read(engine) as connection:
        distinct = connection.execute(
            sa.select(sa.func.count(sa.distinct(CLAIMED.c.job_id)))
        ).scalar_one()
    issues = []
    if claimed_now - claimed_before != given:
        issues.append(f"{claimed_now - claimed_before} claimed rows for {given} jobs given")
    if distinct != claimed_now:
        issues.append(f"{claimed_now - distinct} jobs claimed twice")
    lock_waits = None if after[1] is None or before[1] is None else after[1] - before[1]
    return Measure(
        claimers,
        connections,
        len(timed) / window,
        sum(claim[2] for claim in timed) / window,
        percentile(durations, 50),
        percentile(durations, 99),
        sum(1 for claim in timed if not claim[2] and not claim[3]),
        dict(errors),
        after[0] - before[0],
        lock_waits,
        "; ".join(issues) if issues else f"{given:,} jobs, each claimed once",
    )


def percentile(values: list[float], p: int) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def server_counters(engine: sa.Engine) -> tuple[int, int | None]:
    """The server's deadlock count for this database and (MariaDB) row lock waits so far."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            deadlocks = connection.exec_driver_sql(
                "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
            ).scalar_one()
            return int(deadlocks), None
        status = dict(
            connection.exec_driver_sql(
                "SHOW GLOBAL STATUS WHERE Variable_name IN"
                " ('Innodb_deadlocks', 'Innodb_row_lock_waits')"
            ).all()
        )
        return int(status.get("Innodb_deadlocks", 0)), int(status.get("Innodb_row_lock_waits", 0))


def count(engine: sa.Engine, table: sa.Table) -> int:
    with solidq_db.read(engine) as connection:
        return int(connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def restore_backlog(engine: sa.Engine) -> None:
    """Put every claimed job back to ready, so each measurement starts from the same backlog."""
    with solidq_db.write(engine) as connection:
        connection.execute(
            READY.insert().from_select(
                ["job_id", "queue_name", "priority", "created_at"],
                sa.select(JOBS.c.id, JOBS.c.queue_name, JOBS.c.priority, JOBS.c.created_at).where(
                    JOBS.c.id.in_(sa.select(CLAIMED.c.job_id))
                ),
            )
        )
        connection.execute(CLAIMED.delete())
    with engine.connect() as connection:
        autocommit = connection.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            autocommit.exec_driver_sql(
                "VACUUM ANALYZE solidq_ready_executions, solidq_claimed_executions"
            )
        else:
            autocommit.exec_driver_sql(
                "ANALYZE TABLE solidq_ready_executions, solidq_claimed_executions"
            ).all()


# --- the command ----------------------------------------------------------------------------


def run_backend(backend: str, server_url: str, options: argparse.Namespace) -> list[Measure]:
    sizes = scale._ints(options.claimers)
    cap = options.caps.get(backend, max(sizes))
    url, drop = common.scratch_database(backend, server_url)
    measures: list[Measure] = []
    try:
        begun = time.perf_counter()
        scale.fill(url, options.backlog)
        print(f"# {backend}: {options.backlog:,} ready in {time.perf_counter() - begun:.0f} s")
        engine = engines.create_queue_engine(sa.make_url(url))
        process_ids = [
            process_roll.register(
                engine,
                kind="Worker",
                name=f"claimer-{index}",
                pid=os.getpid(),
                supervisor_id=None,
                metadata={"bench": "contention"},
            )
            for index in range(max(sizes))
        ]
        for round_index in range(options.rounds):
            shift = round_index % len(sizes)
            for claimers in sizes[shift:] + sizes[:shift]:
                restore_backlog(engine)
                result = measure(url, engine, process_ids[:claimers], options, cap)
                measures.append(result)
                print(f"# {backend} round {round_index + 1}: {_row(backend, result)}", flush=True)
        engine.dispose()
    finally:
        drop()
    return measures


def _row(backend: str, m: Measure) -> list[object]:
    errors = ", ".join(f"{name} {n}" for name, n in sorted(m.errors.items())) or "0"
    return [
        backend,
        m.claimers,
        m.connections,
        f"{m.claims_per_s:,.0f}",
        f"{m.jobs_per_s:,.0f}",
        f"{m.p50_ms:.1f}",
        f"{m.p99_ms:.1f}",
        m.empty,
        errors,
        m.deadlocks,
        "-" if m.lock_waits is None else m.lock_waits,
        m.check,
    ]


def _caps(text: str) -> dict[str, int]:
    caps = {}
    for part in text.split(","):
        if part.strip():
            name, _, value = part.partition("=")
            caps[name.strip()] = int(value)
    return caps


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--claimers", default="8,32,128", help="concurrent claimers to try")
    parser.add_argument("--backends", default="postgres,mysql", help="backends to measure")
    parser.add_argument("--limit", type=int, default=10, help="jobs per claim")
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="times each N is measured")
    parser.add_argument("--backlog", type=int, default=300_000, help="ready jobs")
    parser.add_argument("--processes", type=int, default=8, help="processes the claimers use")
    parser.add_argument(
        "--max-connections",
        dest="caps",
        type=_caps,
        default=_caps("postgres=64,mysql=140"),
        help="connections per backend at most (PostgreSQL's server allows 100 in all here)",
    )
    options = parser.parse_args()
    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    rows = []
    for backend, server_url in chosen:
        rows += [_row(backend, m) for m in run_backend(backend, server_url, options)]
    rows.sort(key=lambda row: (str(row[0]), int(t.cast(int, row[1]))))
    print()
    print(
        f"claim_batch of {options.limit} under contention ({options.seconds - WARM_UP:.0f} s"
        f" timed per run, {options.rounds} run(s) per N, {options.backlog:,} ready)"
    )
    headers = ["backend", "claimers", "connections", "claims/s", "jobs/s", "p50 ms", "p99 ms"]
    headers += ["empty", "errors", "deadlocks", "row lock waits", "check"]
    print(common.table(headers, rows))
    print(f"# load at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()

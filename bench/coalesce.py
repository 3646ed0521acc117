"""Coalescing's costs: enqueues on a hot coalesce key beside plain ones, and the monitoring
queries of ``CoalescedCall.waiting()`` over a big backlog of waiting calls.

    python bench/coalesce.py [--backends sqlite,postgres,mysql] [--single N] [--bulk N]
        [--batch N] [--rounds N] [--waiting N] [--waiting-small N] [--runs N]

For each backend, in a scratch database (``bench.common.scratch_database``):

1. **Enqueue rates**, calls per second, ``--rounds`` times, the configurations interleaved
   within each round so they share whatever else the machine does: ``--single`` calls one
   ``perform_later`` each, and ``--bulk`` calls through ``perform_all_later`` in batches of
   ``--batch``, of three jobs: ``bench.noop`` (plain, no control), ``bench.coalesce.dedupe``
   (``coalesce(key="hot")``: every call after the first is discarded into the one open job)
   and ``bench.coalesce.collect`` (``coalesce(key="hot", on_conflict="collect")``, default
   ``max_calls`` of 100: every call is stored, and each 100th seals its job so the next call
   opens another). No worker runs, so the dedupe job stays open throughout. The ratio column
   is the coalesced rate over the plain rate of the same round (median over the rounds).
2. **Waiting calls**: the queue is emptied, then filled with ``--waiting`` waiting calls
   (``--waiting-small`` on SQLite and MariaDB) in collecting jobs of 100 calls each, opened
   over the last hour: half scheduled, 40% ready, 10% blocked. Beside them the table holds
   what a live queue holds too: the calls of finished jobs kept by
   ``SOLIDQ_PRESERVE_FINISHED_JOBS`` (a tenth as many, opened over the day before, so they
   are the oldest rows), of failed jobs (1%), of running ones (0.1%, claimed, their keys
   freed by the start) and of jobs a worker claimed ahead of its threads (0.1%, claimed and
   still holding their coalesce keys, so their calls wait and count), plus ten
   plain ready jobs with no calls for each collecting job. The rows are **inserted in bulk
   with set-based SQL** (``INSERT ... SELECT`` over ``generate_series`` on PostgreSQL,
   MariaDB's ``seq_0_to_N`` sequence tables, a recursive CTE on SQLite), not through
   ``perform_later``: enqueuing a million calls would take minutes and measure the enqueue
   again. Then ``VACUUM ANALYZE`` (``ANALYZE TABLE`` on MariaDB, ``ANALYZE`` on SQLite), as
   autovacuum would have done.
3. **The monitoring queries**, built on ``CoalescedCall.waiting()`` as the package defines it,
   each ``--runs`` times in a read transaction of its own: the count; the oldest call's time
   (what its age is computed from) as ``min(created_at)``; the two in one statement as
   README's "Monitoring coalescing" wrote them; and the oldest as ``ORDER BY created_at
   LIMIT 1``, which the index on ``(created_at, job_id)`` (schema version 2) answers by
   walking from the oldest call to the first whose job waits, skipping the finished jobs'
   older calls, instead of reading every waiting call. For scale, a bare ``count(*)`` of the
   whole table runs beside them. Median and worst, in milliseconds; each result is checked
   against the fill (the count, and the oldest waiting call's time).

The machine has few cores and the database servers run on it too, so absolute figures move
with whatever else runs: compare the ratios within one run, and run twice.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import pathlib
import statistics
import sys
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import common  # noqa: E402
from flask_solidq import coalesce  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

CALLS_PER_JOB = 100
#: Plain ready jobs (no calls) in the fill for each collecting job that waits.
PLAIN_PER_JOB = 10


@common.solidq.job(name="bench.coalesce.dedupe")
@coalesce(key="hot")
def dedupe(value: int) -> None:
    """Every call on one key: all but the first are discarded into the open job."""


@common.solidq.job(name="bench.coalesce.collect")
@coalesce(key="hot", on_conflict="collect")
def collect(calls: list[t.Any]) -> None:
    """Every call on one key, stored with its job (100 to a job, the default ``max_calls``)."""


JOBS_MEASURED = {"plain": common.noop, "dedupe": dedupe, "collect": collect}


# Enqueue rates.


def single_rate(definition: t.Any, count: int) -> float:
    """Calls/s of ``count`` ``perform_later`` calls."""
    started = time.perf_counter()
    for index in range(count):
        definition.perform_later(index)
    return count / (time.perf_counter() - started)


def bulk_rate(definition: t.Any, count: int, batch: int) -> float:
    """Calls/s of ``count`` calls through ``perform_all_later`` in batches of ``batch`` (the
    jobs built beforehand, outside the clock)."""
    batches = [
        [definition.new(index) for index in range(start, min(count, start + batch))]
        for start in range(0, count, batch)
    ]
    started = time.perf_counter()
    for jobs in batches:
        common.solidq.perform_all_later(jobs)
    return count / (time.perf_counter() - started)


def enqueue_rates(options: argparse.Namespace) -> dict[tuple[str, str], list[float]]:
    """{(job, "single" | "bulk"): one rate per round}; needs the app's context."""
    rates: dict[tuple[str, str], list[float]] = {}
    for definition in JOBS_MEASURED.values():
        definition.perform_later(0)  # warm up: connections, statement caches, the open key
    for _round in range(options.rounds):
        for name, definition in JOBS_MEASURED.items():
            rate = single_rate(definition, options.single)
            rates.setdefault((name, "single"), []).append(rate)
        for name, definition in JOBS_MEASURED.items():
            rate = bulk_rate(definition, options.bulk, options.batch)
            rates.setdefault((name, "bulk"), []).append(rate)
    return rates


def rate_rows(backend: str, rates: dict[tuple[str, str], list[float]]) -> list[list[t.Any]]:
    """One row per job: median calls/s, single and bulk, and the median of each round's
    ratio to the plain rate of that round."""
    rows = []
    for name in JOBS_MEASURED:
        row: list[t.Any] = [backend, name]
        for mode in ("single", "bulk"):
            measured, plain = rates[(name, mode)], rates[("plain", mode)]
            ratios = [mine / base for mine, base in zip(measured, plain, strict=True)]
            row += [statistics.median(measured), f"{statistics.median(ratios):.2f}x"]
        rows.append(row)
    return rows


# The waiting calls.

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
CALLS = t.cast(sa.Table, models.CoalescedCall.__table__)
EXECUTIONS = {
    "scheduled": t.cast(sa.Table, models.ScheduledExecution.__table__),
    "ready": t.cast(sa.Table, models.ReadyExecution.__table__),
    "blocked": t.cast(sa.Table, models.BlockedExecution.__table__),
    "running": t.cast(sa.Table, models.ClaimedExecution.__table__),
    "failed": t.cast(sa.Table, models.FailedExecution.__table__),
}
#: Each kind of collecting job in the fill: (its share of the waiting jobs' number, how long
#: before the fill's time the first one opened, over how long they opened). The finished ones
#: (kept by SOLIDQ_PRESERVE_FINISHED_JOBS) are the oldest rows.
KINDS = {
    "finished": (0.1, dt.timedelta(days=1, hours=1), dt.timedelta(days=1)),
    "waiting": (1.0, dt.timedelta(hours=1), dt.timedelta(hours=1)),
    "failed": (0.01, dt.timedelta(hours=1), dt.timedelta(hours=1)),
    "running": (0.001, dt.timedelta(minutes=1), dt.timedelta(seconds=1)),
    "claimed ahead": (0.001, dt.timedelta(seconds=30), dt.timedelta(seconds=1)),
}
#: The kinds whose calls wait.
WAITING_KINDS = ("waiting", "claimed ahead")
KEYS = t.cast(sa.Table, models.CoalesceKey.__table__)


@dataclasses.dataclass(frozen=True)
class Fill:
    """What :func:`fill` stored: the calls that wait, the oldest waiting one's time, and the
    rows the table holds in all."""

    waiting: int
    oldest: dt.datetime
    calls: int
    seconds: float


def fill(engine: sa.Engine, waiting: int) -> Fill:
    """Empty the queue, then store ``waiting`` waiting calls (rounded down to whole jobs of
    100) and the other rows the module docstring lists, with set-based inserts."""
    started = time.perf_counter()
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    jobs = max(1, waiting // CALLS_PER_JOB)
    calls = waiting_calls = 0
    with engine.begin() as connection:
        for table in reversed(models.TABLES):
            connection.execute(table.delete())
        for kind, (share, before, spread) in KINDS.items():
            count = max(1, round(jobs * share))
            first = _insert_jobs(connection, count, now - before, spread, kind, now)
            connection.execute(_calls_insert(connection.dialect.name, first, first + count - 1))
            calls += count * CALLS_PER_JOB
            if kind == "waiting":
                oldest = (now - before).replace(tzinfo=dt.timezone.utc)
            if kind in WAITING_KINDS:
                waiting_calls += count * CALLS_PER_JOB
            _insert_executions(connection, kind, first, first + count - 1, now)
            if kind == "claimed ahead":
                _insert_keys(connection, first, first + count - 1, now)
        plain = jobs * PLAIN_PER_JOB
        first = _insert_jobs(connection, plain, now - dt.timedelta(minutes=5), None, "", now)
        _insert_executions(connection, "ready", first, first + plain - 1, now)
    _analyze(engine)
    return Fill(waiting_calls, oldest, calls, time.perf_counter() - started)


def _numbers(dialect: str, count: int) -> sa.Subquery:
    """0 .. count - 1 as the column ``n`` of a subquery: PostgreSQL's ``generate_series``,
    MariaDB's ``seq_0_to_N`` sequence table, a recursive CTE on SQLite."""
    if dialect == "postgresql":
        return (
            sa.select(sa.column("n"))
            .select_from(sa.text(f"generate_series(0, {count - 1}) AS numbers(n)"))
            .subquery()
        )
    if dialect in ("mysql", "mariadb"):
        return (
            sa.select(sa.column("seq").label("n"))
            .select_from(sa.text(f"seq_0_to_{count - 1}"))
            .subquery()
        )
    numbers = sa.select(sa.literal(0).label("n")).cte("numbers", recursive=True)
    numbers = numbers.union_all(sa.select(numbers.c.n + 1).where(numbers.c.n < count - 1))
    return sa.select(numbers.c.n).subquery()


def _later(dialect: str, stamp: t.Any, milliseconds: t.Any) -> t.Any:
    """SQL for ``stamp + milliseconds``, in the form the column stores."""
    if dialect == "postgresql":
        return stamp + milliseconds * sa.text("INTERVAL '1 millisecond'")
    if dialect in ("mysql", "mariadb"):
        return sa.func.timestampadd(sa.text("MICROSECOND"), milliseconds * 1000, stamp)
    # SQLite keeps SQLAlchemy's text form, with six digits of fraction.
    shifted = sa.func.strftime(
        "%Y-%m-%d %H:%M:%f", stamp, sa.func.printf("%+.3f seconds", milliseconds / 1000.0)
    )
    return shifted.concat("000")


def _insert_jobs(
    connection: sa.Connection,
    count: int,
    since: dt.datetime,
    spread: dt.timedelta | None,
    kind: str,
    now: dt.datetime,
) -> int:
    """``count`` jobs opened evenly over ``spread`` from ``since`` (all at ``since`` for
    None); collecting jobs of ``kind`` unless it is empty (plain ``bench.noop`` jobs); return
    the first one's id (the ids follow in the order they opened)."""
    dialect = connection.dialect.name
    before = connection.scalar(sa.select(sa.func.coalesce(sa.func.max(JOBS.c.id), 0)))
    numbers = _numbers(dialect, count)
    step = 0 if spread is None else spread.total_seconds() * 1000 / count
    opened = _later(dialect, sa.literal(since, models.base.UTCDateTime()), numbers.c.n * step)
    payload = '{"coalesce": "collect", "job": "bench.coalesce:collect"}' if kind else "{}"
    columns = {
        "queue_name": sa.literal("default"),
        "class_name": sa.literal("bench.coalesce.collect" if kind else "bench.noop"),
        "arguments": sa.literal(payload),
        "priority": sa.literal(0),
        "active_job_id": sa.literal(f"bench-{kind}-").concat(sa.cast(numbers.c.n, sa.String)),
        "scheduled_at": opened,
        "finished_at": opened if kind == "finished" else sa.null(),
        "created_at": opened,
        "updated_at": sa.literal(now, models.base.UTCDateTime()),
    }
    select = sa.select(*(value.label(name) for name, value in columns.items()))
    connection.execute(
        JOBS.insert().from_select(list(columns), select.select_from(numbers).order_by(numbers.c.n))
    )
    # The ids go on from the sequence's counter (the enqueue rates used some), not max + 1.
    first, last = connection.execute(
        sa.select(sa.func.min(JOBS.c.id), sa.func.max(JOBS.c.id)).where(JOBS.c.id > before)
    ).one()
    assert last - first + 1 == count, "the new jobs' ids aren't contiguous"
    return int(first)


def _calls_insert(dialect: str, first: int, last: int) -> sa.Insert:
    """100 calls for each job ``first`` .. ``last``, the first at its job's opening and the
    rest 10 ms apart, stored in the order they came (the jobs' calls interleaved)."""
    numbers = _numbers(dialect, CALLS_PER_JOB)
    at = _later(dialect, JOBS.c.created_at, numbers.c.n * 10)
    arguments = sa.literal('{"args": [').concat(
        sa.cast(JOBS.c.id, sa.String).concat(", ").concat(sa.cast(numbers.c.n, sa.String))
    )
    select = (
        sa.select(JOBS.c.id, arguments.concat('], "kwargs": {}}'), at)
        .select_from(JOBS.join(numbers, sa.true()))
        .where(JOBS.c.id.between(first, last))
        .order_by(at, JOBS.c.id)
    )
    return CALLS.insert().from_select(["job_id", "arguments", "created_at"], select)


def _insert_keys(connection: sa.Connection, first: int, last: int, now: dt.datetime) -> None:
    """A coalesce key row for each job ``first`` .. ``last``, pointing at it."""
    at = sa.literal(now, models.base.UTCDateTime())
    columns = {
        "key": sa.literal("bench-key-").concat(sa.cast(JOBS.c.id, sa.String)),
        "job_id": JOBS.c.id,
        "calls_count": sa.literal(CALLS_PER_JOB - 1),
        "created_at": at,
        "updated_at": at,
    }
    select = sa.select(*(value.label(name) for name, value in columns.items()))
    connection.execute(
        KEYS.insert().from_select(list(columns), select.where(JOBS.c.id.between(first, last)))
    )


def _insert_executions(
    connection: sa.Connection, kind: str, first: int, last: int, now: dt.datetime
) -> None:
    """The execution rows of jobs ``first`` .. ``last``: for the waiting ones, by id, half
    scheduled (an hour ahead), 40% ready and 10% blocked."""
    if kind == "finished":
        return
    at = sa.literal(now, models.base.UTCDateTime())
    ahead = sa.literal(now + dt.timedelta(hours=1), models.base.UTCDateTime())
    shares = {
        "waiting": [("scheduled", 0, 4), ("ready", 5, 8), ("blocked", 9, 9)],
    }.get(kind, [("running" if kind == "claimed ahead" else kind, 0, 9)])
    for state, low, high in shares:
        table = EXECUTIONS[state]
        columns: dict[str, t.Any] = {"job_id": JOBS.c.id, "created_at": at}
        if state in ("scheduled", "ready", "blocked"):
            columns.update(queue_name=JOBS.c.queue_name, priority=JOBS.c.priority)
        if state == "scheduled":
            columns["scheduled_at"] = ahead
        elif state == "blocked":
            columns.update(
                concurrency_key=sa.literal("bench.coalesce.collect/hot"), expires_at=ahead
            )
        elif state == "failed":
            columns["error"] = sa.literal('{"exception_class": "builtins.ValueError"}')
        select = sa.select(*(value.label(name) for name, value in columns.items())).where(
            JOBS.c.id.between(first, last), (JOBS.c.id % 10).between(low, high)
        )
        connection.execute(table.insert().from_select(list(columns), select))


def _analyze(engine: sa.Engine) -> None:
    """Fresh statistics (and on PostgreSQL a visibility map), as autovacuum keeps them."""
    with engine.connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            connection.exec_driver_sql("VACUUM ANALYZE")
        elif engine.dialect.name in ("mysql", "mariadb"):
            names = ", ".join(table.name for table in models.TABLES)
            connection.exec_driver_sql(f"ANALYZE TABLE {names}").all()
        else:
            connection.exec_driver_sql("ANALYZE")


# The monitoring queries.


#: The bare count of the whole table, beside the monitoring queries for scale.
ALL_CALLS = "all calls: count(*), no filter"


def queries() -> dict[str, sa.Select[t.Any]]:
    """The monitoring queries on ``CoalescedCall.waiting()``, and :data:`ALL_CALLS`."""
    waiting = models.CoalescedCall.waiting()
    subquery = waiting.subquery()
    call = models.CoalescedCall
    return {
        "count": sa.select(sa.func.count()).select_from(subquery),
        "oldest: min(created_at)": sa.select(sa.func.min(subquery.c.created_at)),
        "count and min(created_at) in one": sa.select(
            sa.func.count(), sa.func.min(subquery.c.created_at)
        ).select_from(subquery),
        "oldest: ORDER BY created_at LIMIT 1": waiting.with_only_columns(call.created_at)
        .order_by(call.created_at)
        .limit(1),
        ALL_CALLS: sa.select(sa.func.count()).select_from(CALLS),
    }


def time_queries(engine: sa.Engine, filled: Fill, runs: int) -> list[list[t.Any]]:
    """[query, median ms, worst ms, check] for each of :func:`queries`."""
    rows = []
    for name, query in queries().items():
        count = filled.calls if name == ALL_CALLS else filled.waiting
        expected = {"count": count, "oldest": filled.oldest}
        times, results = [], []
        for _run in range(runs):
            with solidq_db.read(engine) as connection:
                started = time.perf_counter()
                results.append(connection.execute(query).one())
                times.append((time.perf_counter() - started) * 1000)
        rows.append(
            [
                name,
                f"{statistics.median(times):.1f}",
                f"{max(times):.1f}",
                _check(results, expected),
            ]
        )
    return rows


def _check(results: list[t.Any], expected: dict[str, t.Any]) -> str:
    """ "ok" when every run read the fill's count and oldest time, else what it read."""
    wrong = set()
    for row in results:
        for value in row:
            if isinstance(value, dt.datetime):
                if abs(value - expected["oldest"]) > dt.timedelta(milliseconds=1):
                    wrong.add(f"oldest {value.isoformat()} (filled {expected['oldest']})")
            elif value != expected["count"]:
                wrong.add(f"count {value:,} (filled {expected['count']:,})")
    return "; ".join(sorted(wrong)) or "ok"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backends", default="sqlite,postgres,mysql", help="comma-separated backends to measure"
    )
    parser.add_argument("--single", type=int, default=2000, help="perform_later calls a round")
    parser.add_argument("--bulk", type=int, default=10_000, help="bulk-enqueued calls a round")
    parser.add_argument("--batch", type=int, default=1000, help="calls per perform_all_later")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the enqueue rates")
    parser.add_argument(
        "--waiting", type=int, default=1_000_000, help="waiting calls on PostgreSQL"
    )
    parser.add_argument(
        "--waiting-small", type=int, default=100_000, help="waiting calls on SQLite and MariaDB"
    )
    parser.add_argument("--runs", type=int, default=5, help="runs of each monitoring query")
    options = parser.parse_args()

    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    rates: list[list[t.Any]] = []
    monitoring: list[tuple[str, Fill, list[list[t.Any]]]] = []
    for backend, server_url in chosen:
        url, drop = common.scratch_database(backend, server_url)
        try:
            app = common.create_app(url)
            with app.app_context():
                rates += rate_rows(backend, enqueue_rates(options))
                engine = app.extensions["solidq"].engine
                size = options.waiting if backend == "postgres" else options.waiting_small
                filled = fill(engine, size)
                monitoring.append((backend, filled, time_queries(engine, filled, options.runs)))
                app.extensions["solidq"].dispose()
        finally:
            drop()
        print(f"# {backend} done", flush=True)

    print()
    print(
        f"Enqueue rates, calls/s ({options.single:,} perform_later calls and {options.bulk:,}"
        f" through perform_all_later in batches of {options.batch:,} a round; median of"
        f" {options.rounds} rounds; ratio: to plain jobs in the same round)"
    )
    headers = ["backend", "job", "perform_later", "ratio", "perform_all_later", "ratio"]
    print(common.table(headers, rates))
    for backend, filled, rows in monitoring:
        print()
        print(
            f"{backend}: CoalescedCall.waiting() at {filled.waiting:,} waiting calls"
            f" ({filled.calls:,} calls stored; filled in {filled.seconds:.0f} s);"
            f" ms over {options.runs} runs"
        )
        print(common.table(["query", "median ms", "worst ms", "check"], rows))
    print(f"# load at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()

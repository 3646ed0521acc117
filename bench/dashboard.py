"""Each dashboard page's server time with a big queue on PostgreSQL (or MariaDB,
``--backend mysql``): 1,000,000 finished jobs (finished over the last day) and 100,000 waiting
(40,000 ready, 20,000 scheduled, 10,000 deferred by 100 rate-limit budgets, 20,000 failed,
10,000 blocked on 100 concurrency keys).

    python bench/dashboard.py [--finished N] [--waiting N] [--runs N] [--backend mysql]

It fills a scratch database with set-based inserts (generate_series; MariaDB's sequence
tables), refreshes the planner's statistics as autovacuum would (:func:`_analyze`), then
requests each page through the app (Flask's test client: the server's time, not the
browser's) ``--runs`` times and prints the median and the worst in milliseconds. The goal is
every page's median under 200 ms and its worst under 300 ms.

The jobs list's search is timed too: an id, a ``job_id``, a failed job's error text and an
argument's text (the last two read at most the newest 10,000 jobs of their filter: a text no
job has reads all 10,000, the worst case). ``--explain`` prints the plan the database ran
(EXPLAIN ANALYZE; MariaDB's ANALYZE) of each search page's statements, to see that each is
an index lookup or a bounded scan.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import statistics
import sys
import time
import typing as t
import uuid

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import common  # noqa: E402

FILL = """
INSERT INTO solidq_jobs (id, queue_name, class_name, arguments, priority, active_job_id,
                         scheduled_at, finished_at, concurrency_key, rate_limit_key,
                         created_at, updated_at)
SELECT n, CASE WHEN mod(n, 3) = 0 THEN 'mail' WHEN mod(n, 3) = 1 THEN 'default' ELSE 'search' END,
       CASE WHEN mod(n, 2) = 0 THEN 'bench.noop' ELSE 'bench.other' END,
       concat('{{"job":"bench.common:noop","args":["order-', n, '"]}}'), 0, {uuid},
       {hour_ago}, {finished}, {key}, {rate_key}, {hour_ago}, {now}
FROM {series}
"""

#: What each database says its own way: a series of integers ``n`` from ``{first}`` to
#: ``{last}``, the md5 of ``n`` as a UUID (the search by ``job_id`` looks one up), times.
SQL: dict[str, dict[str, str]] = {
    "postgres": {
        "series": "generate_series({first}, {last}) AS n",
        "uuid": "md5(n::text)::uuid::text",
        "now": "now()",
        "hour_ago": "now() - interval '1 hour'",
        "seconds_ago": "now() - mod(n, 86400) * interval '1 second'",
        "minute_later": "now() + interval '1 minute'",
        "day_later": "now() + interval '1 day'",
        "hour_later": "now() + interval '1 hour'",
    },
    "mysql": {
        # MariaDB's SEQUENCE engine; MySQL has none.
        "series": "(SELECT seq AS n FROM seq_{first}_to_{last}) AS series",
        "uuid": "insert(insert(insert(insert(md5(n), 9, 0, '-'), 14, 0, '-'), 19, 0, '-'),"
        " 24, 0, '-')",
        "now": "now(6)",
        "hour_ago": "now(6) - interval 1 hour",
        "seconds_ago": "now(6) - interval mod(n, 86400) second",
        "minute_later": "now(6) + interval 1 minute",
        "day_later": "now(6) + interval 1 day",
        "hour_later": "now(6) + interval 1 hour",
    },
}


def fill(engine: sa.Engine, finished: int, waiting: int) -> dict[str, int]:
    """Insert the jobs and their execution rows; return the first job id of each kind."""
    sql = SQL["postgres" if engine.dialect.name == "postgresql" else "mysql"]
    ready, scheduled, failed = waiting * 4 // 10, waiting * 2 // 10, waiting * 2 // 10
    deferred = waiting // 10
    blocked = waiting - ready - scheduled - deferred - failed
    account = "concat('bench.noop/acct-', mod(n, 100))"
    kinds = [
        # Finished over the last day, evenly: about 1/24 of them in the last hour.
        ("finished", finished, sql["seconds_ago"], "NULL", "NULL"),
        ("ready", ready, "NULL", "NULL", "NULL"),
        ("scheduled", scheduled, "NULL", "NULL", "NULL"),
        # Deferred by a rate limit: the execution due a day after the job's own time.
        ("deferred", deferred, "NULL", "NULL", account),
        ("failed", failed, "NULL", "NULL", "NULL"),
        ("blocked", blocked, "NULL", account, "NULL"),
    ]
    firsts: dict[str, int] = {}
    with engine.begin() as connection:
        start = 1
        for name, size, finished_at, key, rate_key in kinds:
            series = sql["series"].format(first=start, last=start + size - 1)
            connection.exec_driver_sql(
                FILL.format(
                    **{**sql, "series": series},
                    finished=finished_at,
                    key=key,
                    rate_key=rate_key,
                )
            )
            firsts[name] = start
            _executions(connection, sql, name, start, start + size - 1)
            start += size
        if engine.dialect.name == "postgresql":  # the ids were given: move the sequence past
            connection.exec_driver_sql(
                "SELECT setval('solidq_jobs_id_seq', (SELECT max(id) FROM solidq_jobs))"
            )
        # The deferred jobs' budgets, spent for the next minute.
        key_column = engine.dialect.identifier_preparer.quote("key")
        connection.exec_driver_sql(
            f"INSERT INTO solidq_rate_limits ({key_column}, tat, last_slot_at, created_at,"
            f" updated_at) SELECT concat('bench.noop/acct-', n), {sql['minute_later']},"
            f" {sql['day_later']}, {sql['now']}, {sql['now']}"
            f" FROM {sql['series'].format(first=0, last=99)}"
        )
    _analyze(engine)
    return firsts


def _executions(
    connection: sa.Connection, sql: dict[str, str], name: str, first: int, last: int
) -> None:
    """The execution rows of the jobs ``first`` to ``last``, which are ``name``'s."""
    jobs = f" FROM solidq_jobs WHERE id BETWEEN {first} AND {last}"
    if name == "ready":
        connection.exec_driver_sql(
            "INSERT INTO solidq_ready_executions (job_id, queue_name, priority, created_at)"
            f" SELECT id, queue_name, priority, {sql['now']}" + jobs
        )
    elif name in ("scheduled", "deferred"):
        connection.exec_driver_sql(
            "INSERT INTO solidq_scheduled_executions (job_id, queue_name, priority,"
            f" scheduled_at, created_at) SELECT id, queue_name, priority, {sql['day_later']},"
            f" {sql['now']}" + jobs
        )
    elif name == "failed":
        connection.exec_driver_sql(
            "INSERT INTO solidq_failed_executions (job_id, error, created_at)"
            ' SELECT id, concat(\'{"exception_class":"builtins.ValueError",'
            '"message":"boom at \', id, \'","backtrace":["Traceback"]}\'),'
            f" {sql['now']}" + jobs
        )
    elif name == "blocked":
        connection.exec_driver_sql(
            "INSERT INTO solidq_blocked_executions (job_id, queue_name, priority,"
            " concurrency_key, expires_at, created_at) SELECT id, queue_name,"
            f" priority, concurrency_key, {sql['hour_later']}, {sql['now']}" + jobs
        )


def _analyze(engine: sa.Engine) -> None:
    """Refresh the planner's statistics, as autovacuum's analyze (PostgreSQL) or InnoDB's
    automatic recalculation (more than 10% of a table changed) would within a minute of such
    a fill: the plans timed are those an operator's database settles on, not those of
    statistics taken of empty tables. Nothing is vacuumed (no visibility map, so no
    index-only scans: the slower case)."""
    with engine.connect() as connection:
        connection = connection.execution_options(isolation_level="AUTOCOMMIT")
        if engine.dialect.name == "postgresql":
            connection.exec_driver_sql("ANALYZE")
        else:
            tables = ", ".join(sorted(sa.inspect(engine).get_table_names()))
            connection.exec_driver_sql(f"ANALYZE TABLE {tables}").all()


def pages(firsts: dict[str, int]) -> list[tuple[str, str]]:
    return [
        ("overview", "/solidq/"),
        ("a queue (mail)", "/solidq/queue/mail"),
        ("failed jobs", "/solidq/jobs?state=failed"),
        ("ready jobs", "/solidq/jobs?state=ready"),
        ("ready jobs, filtered", "/solidq/jobs?state=ready&queue=mail&job=bench.noop"),
        ("scheduled jobs", "/solidq/jobs?state=scheduled"),
        ("deferred jobs", "/solidq/jobs?state=deferred"),
        ("a deferred job", f"/solidq/jobs/{firsts['deferred']}"),
        ("blocked jobs", "/solidq/jobs?state=blocked"),
        ("finished jobs", "/solidq/jobs?state=finished"),
        ("finished jobs, page 1,000", f"/solidq/jobs?state=finished&before={firsts['ready'] // 2}"),
        ("a failed job", f"/solidq/jobs/{firsts['failed']}"),
        ("a blocked job", f"/solidq/jobs/{firsts['blocked']}"),
        ("budgets", "/solidq/budgets"),
        ("coalescing", "/solidq/coalescing"),
        ("concurrency keys", "/solidq/concurrency"),
        ("processes", "/solidq/processes"),
        ("recurring", "/solidq/recurring"),
        ("metrics (Prometheus)", "/solidq/metrics"),
        *searches(firsts),
    ]


def searches(firsts: dict[str, int]) -> list[tuple[str, str]]:
    """The search pages: by id, by job_id (the fill's are md5s of the row number, as UUIDs),
    by a failed job's error text, by an argument's text (the fill's are ``order-<n>``)."""
    middle = firsts["ready"] // 2
    job_id = str(uuid.UUID(hashlib.md5(str(middle).encode()).hexdigest()))
    failed = firsts["failed"] + 100
    return [
        ("search: an id, finished", f"/solidq/jobs?state=finished&q={middle}"),
        ("search: a job_id, finished", f"/solidq/jobs?state=finished&q={job_id}"),
        ("search: error text, failed", f"/solidq/jobs?state=failed&q=boom%20at%20{failed}"),
        ("search: error text no job has", "/solidq/jobs?state=failed&q=no-such-error"),
        ("search: argument, finished", f"/solidq/jobs?state=finished&q=order-{middle}"),
        ("search: argument no job has", "/solidq/jobs?state=finished&q=no-such-argument"),
        (
            "search: argument no job has, filtered",
            "/solidq/jobs?state=finished&queue=mail&job=bench.noop&q=no-such-argument",
        ),
        ("search: argument no job has, ready", "/solidq/jobs?state=ready&q=no-such-argument"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--waiting", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--explain", action="store_true", help="print each search's plans")
    parser.add_argument(
        "--backend",
        choices=["postgres", "mysql"],
        default="postgres",
        help="PostgreSQL, or MariaDB (its SEQUENCE engine fills the tables; not MySQL)",
    )
    options = parser.parse_args()
    chosen = common.chosen_backends(options.backend)
    if not chosen:
        sys.exit(f"bench/dashboard.py: no {options.backend} server answers (see bench/common.py)")
    backend, server_url = chosen[0]
    url, drop = common.scratch_database(backend, server_url)
    try:
        engine = sa.create_engine(url)
        started = time.perf_counter()
        firsts = fill(engine, options.finished, options.waiting)
        print(
            f"filled {options.finished:,} finished and {options.waiting:,} waiting jobs in"
            f" {time.perf_counter() - started:.0f} s"
        )
        app = common.create_app(url, TESTING=True, SOLIDQ_DASHBOARD=True)
        client = app.test_client()
        rows = []
        for name, path in pages(firsts):
            times = []
            for _run in range(options.runs):
                begun = time.perf_counter()
                response = client.get(path)
                times.append((time.perf_counter() - begun) * 1000)
                assert response.status_code == 200, (path, response.status_code)
            rows.append([name, f"{statistics.median(times):.1f}", f"{max(times):.1f}"])
        print(common.table(["page", "median ms", "worst ms"], rows))
        if options.explain:
            explain_searches(app, client, firsts)
        with app.app_context():
            app.extensions["solidq"].dispose()
        engine.dispose()
    finally:
        drop()


def explain_searches(app: t.Any, client: t.Any, firsts: dict[str, int]) -> None:
    """Print the plan of every statement each search page runs, as PostgreSQL ran it."""
    with app.app_context():
        engine = app.extensions["solidq"].engine
    for name, path in searches(firsts):
        statements = _statements_of(engine, lambda path=path: client.get(path))
        print(f"\n## {name}: {path}")
        with engine.connect() as connection:
            for statement, parameters in statements:
                plan = connection.exec_driver_sql(
                    _EXPLAIN[engine.dialect.name] + statement, parameters
                )
                print("\n".join(" | ".join(map(str, row)) for row in plan), end="\n\n")


#: How each database shows the plan it ran.
_EXPLAIN = {"postgresql": "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ", "mysql": "ANALYZE "}


def _statements_of(engine: sa.Engine, request: t.Callable[[], t.Any]) -> list[tuple[str, t.Any]]:
    """The statements on the jobs table that ``request`` runs, with their parameters."""
    statements: list[tuple[str, t.Any]] = []

    def record(_conn: t.Any, _cursor: t.Any, statement: str, parameters: t.Any, *_: t.Any) -> None:
        if "solidq_jobs" in statement:
            statements.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        request()
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    return statements


if __name__ == "__main__":
    main()

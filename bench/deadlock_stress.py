"""Deadlocks under load: does a claim still run out of deadlock retries when 12 worker
processes of 5 threads drain a queue that two bulk enqueuers and a single enqueuer are
filling?

    python bench/deadlock_stress.py [--claim-attempts 3,10] [--rounds 2]
                                    [--bulk-jobs 20000] [--chunk 500] [--singles 2000]
                                    [--backends mysql,postgres]

For each backend and each ``--claim-attempts`` value (rounds interleaved, each round in a
rotated order), in a scratch database of its own (dropped at the end):

1. ``flask --app bench.deadlock_stress:create_app solidq work`` starts with
   ``SOLIDQ_WORKERS = [{"queues": "*", "threads": 5, "processes": 12, "polling_interval":
   0.1}]`` (fork mode; the dispatcher and scheduler too, as a deployment runs it). The app is
   ``bench/app.py``'s with ``flask_solidq.operations.claim.DEADLOCK_RETRIES`` set to the
   attempts under test (``SOLIDQ_BENCH_CLAIM_ATTEMPTS``), so 3 is the behaviour before the
   change and 10 the library's default now; nothing else of the library differs;
2. once the 12 workers are registered (and 2 s more, for their boot to end), three enqueuing
   processes start together: two ``perform_all_later`` ``--bulk-jobs`` no-op jobs each in
   chunks of ``--chunk``, one calls ``perform_later`` ``--singles`` times;
3. when the enqueuers are done and nothing is ready or claimed, the supervisor gets SIGTERM.

The columns:

* server deadlocks: what the server detected in the run, retried or not. PostgreSQL:
  ``pg_stat_database.deadlocks`` of the scratch database. MariaDB: the global
  ``Innodb_deadlocks`` before/after (the whole server: other suites running at the same time
  count too), and "in this db": the deadlocks the server wrote to its error log naming the
  scratch database (``innodb_print_all_deadlocks`` is switched on while the script runs and
  back to what it was at exit; needs the log readable here), listed below the table by their
  two statements, and whether one of them waited for a row its own ``id IN (...)`` doesn't
  name (it was scanning, not reading its rows by key);
* claim retries, most in a row: the worker and enqueuer processes record each pause of
  ``flask_solidq.storage.db.retrying_deadlocks`` (:func:`record_deadlock_pauses`, a wrapper the
  bench
  installs: the library logs nothing for a deadlock a retry got past): how many times a claim
  was tried again, and the most deadlocks one claim met in a row (its attempts, for one that
  ran out); below the table, per operation, how many retries followed a 1st, 2nd, ... deadlock
  in a row;
* deadlock ERRORs, ERRORs: ERROR records of the workers' log (their stderr; a claim that ran
  out of attempts is one "poll failed" ERROR with the deadlock's traceback), those that are
  MySQL's 1213 / "Deadlock found" listed by statement; enqueue errors: the enqueuers'
  exceptions (an enqueue tries a deadlock 3 times, then raises); enqueue s: the slowest
  enqueuer's time;
* jobs/s: jobs stored / (last ``finished_at`` - the moment the enqueuers were let go), the rate
  of the whole run, enqueues included;
* check: every job stored is finished, nothing is left ready, claimed, scheduled, blocked or
  failed, every job id was started exactly once (the run log the worker processes append to,
  ``SOLIDQ_BENCH_RUN_LOG``), and the jobs stored are those the enqueuers say they enqueued.

The deadlocks it measured on MariaDB (51-117 a run) came from the claim's ``DELETE ... WHERE
id IN (...)`` of its ready rows, planned as a full scan while the statistics said the table
held a row or so; the claim now deletes them through a join by primary key
(:func:`flask_solidq.storage.db.delete_by_ids`), and the runs saw none.

The machine has 2 cores shared with the database servers: 60 worker threads in 12 processes,
three enqueuers and the server on 2 cores is the point (the contention the probe saw), so the
rates move with whatever else runs; the counts are what to read.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime as dt
import functools
import multiprocessing
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
import traceback
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402
from flask import Flask  # noqa: E402

from bench import app as bench_app  # noqa: E402
from bench import common  # noqa: E402
from bench import scaleout  # noqa: E402
from bench import throughput  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.operations import claim  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
ATTEMPTS_VARIABLE = "SOLIDQ_BENCH_CLAIM_ATTEMPTS"
PAUSES_VARIABLE = "SOLIDQ_BENCH_DEADLOCK_PAUSES"
CLAIM_OPERATION = "claim._claim_from"
WORK_APP = "bench.deadlock_stress:create_app"
PROCESSES = 12
THREADS = 5

#: The start of a log record of ``flask solidq work``'s text format ("2026-12-01 17:48:11,123
#: LEVEL ..."); traceback lines that follow belong to the record.
RECORD = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[.,]\d+\S*\s+(?:\[[^\]]*\]\s+)?(\w+)\b")
DEADLOCK_TEXT = re.compile(r"\b1213\b|deadlock", re.IGNORECASE)
SQL_TEXT = re.compile(r"\[SQL: (.*?)(?:\]|$)")


def create_app() -> Flask:
    """``bench/app.py``'s app, with the claim's deadlock attempts set from
    ``SOLIDQ_BENCH_CLAIM_ATTEMPTS`` (the supervisor builds it before forking its workers, so
    every worker has the value)."""
    attempts = os.environ.get(ATTEMPTS_VARIABLE)
    if attempts:
        claim.DEADLOCK_RETRIES = int(attempts)
    app = bench_app.create_app()
    if os.environ.get(PAUSES_VARIABLE):
        record_deadlock_pauses(os.environ[PAUSES_VARIABLE])
    return app


def record_deadlock_pauses(path: str) -> None:
    """Append a line to ``path`` each time :func:`flask_solidq.storage.db.retrying_deadlocks` pauses
    before trying an operation again: the operation's name and which attempt deadlocked (1:
    the first). Nothing is logged for a deadlock that a retry got past; this tells how many
    times in a row one claim deadlocked, hence how far it was from running out of attempts.
    One ``write`` per line to an ``O_APPEND`` descriptor, shared by the forked workers."""
    pause = solidq_db.deadlock_pause
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def recorded(attempt: int) -> float:
        operation = sys._getframe(1).f_locals.get("operation")
        os.write(descriptor, f"{_operation_name(operation)} {attempt}\n".encode())
        return pause(attempt)

    solidq_db.deadlock_pause = recorded


def _operation_name(operation: t.Any) -> str:
    while isinstance(operation, functools.partial):
        operation = operation.func
    name = getattr(operation, "__qualname__", type(operation).__name__)
    module = str(getattr(operation, "__module__", "")).rsplit(".", 1)[-1]
    return f"{module}.{name}".replace(".<locals>.<lambda>", "").replace(" ", "_")


# --- the enqueuers (processes of their own, spawned) ----------------------------------------


class Enqueued(t.NamedTuple):
    role: str
    jobs: int
    errors: list[str]
    seconds: float


def enqueuer(
    url: str, role: str, count: int, chunk: int, pauses: str, go: t.Any, results: t.Any
) -> None:  # pragma: no cover - runs in a spawned process
    """Enqueue ``count`` no-op jobs once ``go`` is set: in chunks of ``chunk`` with
    ``perform_all_later`` (role ``bulk``), or one ``perform_later`` each (``single``); put an
    :class:`Enqueued` on ``results``. A failed enqueue is counted and the next one goes on."""
    record_deadlock_pauses(pauses)
    app = common.create_app(url)
    done = 0
    errors: list[str] = []
    with app.app_context():
        bench_app.noop.new(0)  # imports and serializers warm; nothing stored
        with solidq_db.read(app.extensions["solidq"].engine) as connection:
            connection.execute(sa.select(1))
        go.wait()
        started = time.perf_counter()
        if role == "bulk":
            for start in range(0, count, chunk):
                jobs = [bench_app.noop.new(i) for i in range(start, min(count, start + chunk))]
                try:
                    common.solidq.perform_all_later(jobs)
                    done += len(jobs)
                except Exception as error:  # noqa: BLE001 - counted and reported
                    errors.append(_one_line(error))
        else:
            for index in range(count):
                try:
                    bench_app.noop.perform_later(index)
                    done += 1
                except Exception as error:  # noqa: BLE001 - counted and reported
                    errors.append(_one_line(error))
        seconds = time.perf_counter() - started
        app.extensions["solidq"].dispose()
    results.put(Enqueued(role, done, errors, seconds))


def _one_line(error: BaseException) -> str:
    return traceback.format_exception_only(type(error), error)[-1].strip()[:300]


# --- the server's deadlock counts -------------------------------------------------------------


class DeadlockLog:
    """MariaDB's own record of every deadlock (``innodb_print_all_deadlocks``) in its error
    log, switched on while the benchmark runs; the part of the log written meanwhile."""

    def __init__(self, server_url: str) -> None:
        self.engine = sa.create_engine(server_url)
        with self.engine.connect() as connection:
            variables: dict[str, str] = dict(
                connection.exec_driver_sql(
                    "SHOW GLOBAL VARIABLES WHERE Variable_name IN"
                    " ('log_error', 'innodb_print_all_deadlocks')"
                ).all()
            )
        self.path = pathlib.Path(variables.get("log_error") or "")
        self.previous = variables.get("innodb_print_all_deadlocks", "OFF")
        self.usable = self.path.is_absolute() and os.access(self.path, os.R_OK)
        self.offset = 0

    def __enter__(self) -> DeadlockLog:
        if self.usable:
            self._set("ON")
        return self

    def __exit__(self, *exc_info: t.Any) -> None:
        if self.usable:
            self._set(self.previous)
        self.engine.dispose()

    def _set(self, value: str) -> None:
        with self.engine.connect() as connection:
            connection.exec_driver_sql(
                f"SET GLOBAL innodb_print_all_deadlocks = {'ON' if value == 'ON' else 'OFF'}"
            )

    def mark(self) -> None:
        """Start reading from here."""
        if self.usable:
            self.offset = self.path.stat().st_size

    def deadlocks(self, database: str) -> collections.Counter[str] | None:
        """The deadlocks written since :meth:`mark` that touch ``database``, by their two
        statements, and whether one of the two waited for a row its own ``DELETE ... IN``
        list doesn't name (it scanned past its rows); None when the log can't be read."""
        if not self.usable:
            return None
        with self.path.open("rb") as log:
            log.seek(self.offset)
            text = log.read().decode(errors="replace")
        found: collections.Counter[str] = collections.Counter()
        for block in text.split("Transactions deadlock detected")[1:]:
            if f"`{database}`" not in block:
                continue
            sides = [_side(part) for part in TRANSACTION.split(block)[1:3]]
            pair = " / ".join(sorted(statement for statement, _ in sides)) or "?"
            scanned = any(outside for _, outside in sides)
            found[pair + ("; waited for a row outside its list" if scanned else "")] += 1
        return found


TRANSACTION = re.compile(r"\*\*\* \(\d\) TRANSACTION:")
STATEMENT = re.compile(r"^\s*(INSERT|DELETE|UPDATE|SELECT|REPLACE)\b(.*)$", re.M)
WAITED_ID = re.compile(r"index PRIMARY of table .*?\n(?:.*\n)*?\s*0: len 8; hex ([0-9a-f]{16});")


def _side(part: str) -> tuple[str, bool]:
    """One transaction of a deadlock report: its statement's verb and table, and whether it
    waited for a primary key that its ``... id IN (...)`` doesn't list."""
    statement = STATEMENT.search(part)
    if statement is None:
        return "?", False
    verb, rest = statement.groups()
    table = re.search(r"`?(solidq_\w+)`?", rest)
    name = f"{verb} {table.group(1) if table else '?'}"
    listed = re.search(r"\bid IN \(([\d, ]+)\)", rest)
    waiting = part.split("WAITING FOR THIS LOCK TO BE GRANTED", 1)[-1]
    waiting = waiting.split("CONFLICTING WITH", 1)[0]
    waited = WAITED_ID.search(waiting)
    if listed is None or waited is None:
        return name, False
    ids = {int(value) for value in listed.group(1).split(",")}
    return name, (int(waited.group(1), 16) ^ (1 << 63)) not in ids


def innodb_deadlocks(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        row = connection.exec_driver_sql("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").one()
    return int(row[1])


def postgres_deadlocks(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        value = connection.exec_driver_sql(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).scalar_one()
    return int(value)


# --- one run ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    backend: str
    attempts: int
    round: int
    enqueued: int = 0
    stored: int = 0
    enqueue_errors: list[str] = dataclasses.field(default_factory=list)
    enqueue_seconds: float | None = None
    rate: float | None = None
    server_deadlocks: int | None = None
    ours: collections.Counter[str] | None = None
    errors: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    deadlock_errors: int = 0
    warnings: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    #: (operation, attempt) -> how many times that attempt deadlocked and was tried again.
    pauses: collections.Counter[tuple[str, int]] = dataclasses.field(
        default_factory=collections.Counter
    )
    check: str = "not checked"
    problems: list[str] = dataclasses.field(default_factory=list)


def run_once(
    backend: str,
    server_url: str,
    attempts: int,
    round_number: int,
    options: argparse.Namespace,
    deadlock_log: DeadlockLog | None,
) -> Run:
    run = Run(backend, attempts, round_number)
    url, drop = common.scratch_database(backend, server_url)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-deadlock-"))
    try:
        app = common.create_app(url)
        with app.app_context():
            engine = app.extensions["solidq"].engine
            try:
                _load(run, url, engine, workdir, options, deadlock_log)
            finally:
                app.extensions["solidq"].dispose()
    finally:
        drop()
        shutil.rmtree(workdir, ignore_errors=True)
    return run


def _load(
    run: Run,
    url: str,
    engine: sa.Engine,
    workdir: pathlib.Path,
    options: argparse.Namespace,
    deadlock_log: DeadlockLog | None,
) -> None:
    """Start the workers, let the enqueuers go once they are registered, wait for the drain,
    stop, count."""
    run_log = workdir / "runs.txt"
    pauses = workdir / "pauses.txt"
    output = workdir / "work.log"
    workers = [{"queues": "*", "threads": THREADS, "processes": PROCESSES, "polling_interval": 0.1}]
    env = {
        "SOLIDQ_BENCH_RUN_LOG": str(run_log),
        PAUSES_VARIABLE: str(pauses),
        ATTEMPTS_VARIABLE: str(run.attempts),
    }
    went = time.time()
    context = multiprocessing.get_context("spawn")
    go = context.Event()
    results = context.Queue()
    roles = [("bulk", options.bulk_jobs), ("bulk", options.bulk_jobs), ("single", options.singles)]
    enqueuers = [
        context.Process(
            target=enqueuer, args=(url, role, count, options.chunk, str(pauses), go, results)
        )
        for role, count in roles
    ]
    with output.open("wb") as log:
        process = common.start_work(
            url, ["--mode", "fork"], log, config={"SOLIDQ_WORKERS": workers}, env=env, app=WORK_APP
        )
    try:
        for child in enqueuers:
            child.start()
        _wait_registered(engine, process, output)
        time.sleep(2.0)
        before = _server_deadlocks(run.backend, engine)
        if deadlock_log is not None:
            deadlock_log.mark()
        went = time.time()
        go.set()
        reports = _collect(results, len(enqueuers), options.timeout)
        run.enqueued = sum(report.jobs for report in reports)
        run.enqueue_errors = [f"{r.role}: {e}" for r in reports for e in r.errors]
        run.enqueue_seconds = max((report.seconds for report in reports), default=None)
        if len(reports) < len(enqueuers):
            run.problems.append(f"{len(enqueuers) - len(reports)} enqueuers didn't report")
        _wait_drained(run, engine, process, went + options.timeout)
        if common.stop_work(process) is None:
            run.problems.append("the supervisor didn't stop within 30 s of SIGTERM; killed")
        after = _server_deadlocks(run.backend, engine)
        if before is not None and after is not None:
            run.server_deadlocks = after - before
        if deadlock_log is not None:
            run.ours = deadlock_log.deadlocks(str(engine.url.database))
    finally:
        common.kill_work(process)
        for child in enqueuers:
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()
    _read_log(run, output.read_text(errors="replace"))
    if pauses.exists():
        for line in pauses.read_text().splitlines():
            name, attempt = line.rsplit(" ", 1)
            run.pauses[name, int(attempt)] += 1
    _check(run, engine, run_log, went)


def _wait_registered(engine: sa.Engine, process: t.Any, output: pathlib.Path) -> None:
    """Wait for the workers; if they don't come, say why with the end of their log."""
    try:
        scaleout.wait_registered(engine, PROCESSES, [process])
    except RuntimeError:
        tail = output.read_text(errors="replace").splitlines()[-20:]
        print("\n".join(["# the end of `flask solidq work`'s output:", *tail]), flush=True)
        raise


def _server_deadlocks(backend: str, engine: sa.Engine) -> int | None:
    if backend == "mysql":
        return innodb_deadlocks(engine)
    if backend == "postgres":
        time.sleep(1.0)  # a backend's counts reach pg_stat_database within a second
        return postgres_deadlocks(engine)
    return None


def _collect(results: t.Any, count: int, timeout: float) -> list[Enqueued]:
    import queue

    reports: list[Enqueued] = []
    deadline = time.monotonic() + timeout
    while len(reports) < count and time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            reports.append(results.get(timeout=1.0))
    return reports


def _wait_drained(run: Run, engine: sa.Engine, process: t.Any, deadline: float) -> None:
    while scaleout.left(engine):
        if process.poll() is not None:
            run.problems.append(f"the supervisor exited early with status {process.returncode}")
            return
        if time.time() > deadline:
            run.problems.append("not drained in time")
            return
        time.sleep(0.25)


def _read_log(run: Run, text: str) -> None:
    """Count the ERROR and WARNING records of the workers' log; an ERROR whose text (its
    traceback included) mentions a deadlock counts by the statement that deadlocked."""
    records: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = RECORD.match(line)
        if match:
            records.append((match.group(1).upper(), [line]))
        elif records:
            records[-1][1].append(line)
        elif line.strip():
            records.append(("OTHER", [line]))
    for level, lines in records:
        body = "\n".join(lines)
        first = _message(lines[0])
        if level in ("ERROR", "CRITICAL", "OTHER"):
            if DEADLOCK_TEXT.search(body):
                run.deadlock_errors += 1
                sql = SQL_TEXT.search(body)
                first = f"{first} -- deadlock in {sql.group(1)[:70] if sql else '?'}"
            run.errors[first] += 1
        elif level == "WARNING":
            run.warnings[first] += 1


def _message(line: str) -> str:
    """A log line without its time stamp and numbers, so alike lines count together."""
    text = re.sub(r"\b(worker|dispatcher|scheduler)-[0-9a-f]+", r"\1-*", RECORD.sub("", line))
    return re.sub(r"\d+(\.\d+)?", "N", text.strip())[:160]


def _check(run: Run, engine: sa.Engine, run_log: pathlib.Path, went: float) -> None:
    with solidq_db.read(engine) as connection:
        ids = list(connection.scalars(sa.select(JOBS.c.id)))
        stamps = sorted(
            connection.scalars(sa.select(JOBS.c.finished_at).where(JOBS.c.finished_at.is_not(None)))
        )
        leftovers = {
            name: connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for name, table in throughput.LEFTOVERS.items()
        }
    run.stored = len(ids)
    runs: collections.Counter[int] = collections.Counter()
    if run_log.exists():
        runs.update(int(line) for line in run_log.read_text().split())
    issues = []
    if run.stored != run.enqueued:
        issues.append(f"{run.stored} stored, {run.enqueued} enqueued")
    if len(stamps) != run.stored:
        issues.append(f"{len(stamps)} of {run.stored} finished")
    issues += [f"{number} {name}" for name, number in leftovers.items() if number]
    never = set(ids) - set(runs)
    twice = sorted(job_id for job_id, seen in runs.items() if seen > 1)
    if never:
        issues.append(f"{len(never)} never started")
    if twice:
        issues.append(f"{len(twice)} started more than once (e.g. ids {twice[:5]})")
    if set(runs) - set(ids):
        issues.append(f"{len(set(runs) - set(ids))} started but not stored")
    run.check = "; ".join(issues) if issues else f"all {run.stored:,} exactly once"
    if stamps:
        last = stamps[-1]
        start = dt.datetime.fromtimestamp(went, dt.timezone.utc)
        if last.tzinfo is None:
            start = start.replace(tzinfo=None)
        run.rate = run.stored / (last - start).total_seconds()


# --- the command ------------------------------------------------------------------------------


def _rows(runs: list[Run]) -> list[list[object]]:
    rows: list[list[object]] = []
    for r in runs:
        ours = "-" if r.ours is None else str(sum(r.ours.values()))
        rows.append(
            [
                r.backend,
                r.attempts,
                r.round,
                "-" if r.server_deadlocks is None else r.server_deadlocks,
                ours,
                _claim_retries(r),
                _most_in_a_row(r),
                r.deadlock_errors,
                sum(r.errors.values()),
                len(r.enqueue_errors),
                "-" if r.enqueue_seconds is None else f"{r.enqueue_seconds:.1f}",
                "-" if r.rate is None else f"{r.rate:,.0f}",
                r.check,
            ]
        )
    return rows


def _claim_retries(r: Run) -> int:
    return sum(number for (name, _), number in r.pauses.items() if name == CLAIM_OPERATION)


def _most_in_a_row(r: Run) -> int:
    """The most deadlocks one claim met in a row: the highest attempt it paused after, or
    all its attempts when a claim ran out of them."""
    paused = [attempt for name, attempt in r.pauses if name == CLAIM_OPERATION]
    exhausted = [message for message in r.errors if "solidq_ready_executions" in message]
    return max([*paused, r.attempts if exhausted else 0])


def _details(runs: list[Run]) -> list[str]:
    lines = []
    for r in runs:
        name = f"{r.backend} attempts={r.attempts} round {r.round}"
        for operation in sorted({operation for operation, _ in r.pauses}):
            top = max(k for op, k in r.pauses if op == operation)
            ladder = ", ".join(f"{k}: {r.pauses[operation, k]}" for k in range(1, top + 1))
            lines.append(
                f"  {name}: {operation} retried after its k-th deadlock in a row: {ladder}"
            )
        for pair, number in sorted((r.ours or {}).items(), key=lambda item: -item[1]):
            lines.append(f"  {name}: {number} deadlocks between {pair}")
        for message, number in r.errors.most_common():
            lines.append(f"  {name}: {number} x ERROR {message}")
        for message, number in r.warnings.most_common(5):
            lines.append(f"  {name}: {number} x WARNING {message}")
        for error in r.enqueue_errors[:5]:
            lines.append(f"  {name}: enqueue failed: {error}")
        for problem in r.problems:
            lines.append(f"  {name}: {problem}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--claim-attempts",
        default=f"3,{claim.DEADLOCK_RETRIES}",
        help="comma-separated values of the claim's DEADLOCK_RETRIES to compare",
    )
    parser.add_argument("--rounds", type=int, default=2, help="runs of each attempts value")
    parser.add_argument("--bulk-jobs", type=int, default=20_000, help="jobs per bulk enqueuer")
    parser.add_argument("--chunk", type=int, default=500, help="jobs per perform_all_later")
    parser.add_argument("--singles", type=int, default=2_000, help="perform_later calls")
    parser.add_argument("--backends", default="mysql,postgres", help="backends to measure")
    parser.add_argument(
        "--timeout", type=float, default=170.0, help="seconds a run may take from the enqueues"
    )
    options = parser.parse_args()
    values = [int(part) for part in options.claim_attempts.split(",") if part.strip()]
    if not values or min(values) < 1:
        raise SystemExit("--claim-attempts takes numbers of 1 or more, e.g. 3,10.")

    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    runs: list[Run] = []
    for backend, server_url in chosen:
        with contextlib.ExitStack() as stack:
            deadlock_log = None
            if backend == "mysql":
                deadlock_log = stack.enter_context(DeadlockLog(server_url))
                if not deadlock_log.usable:
                    print(f"# mysql: can't read the error log {deadlock_log.path}", flush=True)
                    deadlock_log = None
            for round_index in range(options.rounds):
                shift = round_index % len(values)
                for attempts in values[shift:] + values[:shift]:
                    run = run_once(
                        backend, server_url, attempts, round_index + 1, options, deadlock_log
                    )
                    runs.append(run)
                    print(f"# {_rows([run])[0]}", flush=True)

    print()
    print(
        f"{PROCESSES} worker processes x {THREADS} threads; 2 x {options.bulk_jobs:,} jobs"
        f" enqueued in bulk (chunks of {options.chunk}) and {options.singles:,} single"
        " enqueues at the same time"
    )
    headers = [
        "backend",
        "claim attempts",
        "round",
        "server deadlocks",
        "in this db",
        "claim retries",
        "most in a row",
        "deadlock ERRORs",
        "ERRORs",
        "enqueue errors",
        "enqueue s",
        "jobs/s",
        "check",
    ]
    print(common.table(headers, _rows(runs)))
    print()
    details = _details(runs)
    print("\n".join(details) if details else "Worker output: no ERROR or WARNING records.")
    print(f"# load at the end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()

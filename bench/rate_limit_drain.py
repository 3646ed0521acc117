"""How fast a backlog of rate-limited jobs drains, against the rate the limit allows.

    python bench/rate_limit_drain.py [--backends sqlite,postgres,mysql] [--cases to10-b6,...]
                                     [--jobs N] [--trace-interval S] [--timeline]

For each backend and each case, in a scratch database of its own, one ``flask --app
bench.rate_limit_jobs:create_app solidq work`` runs (fork mode; one worker process, 3 threads,
polling every 0.1 s; one dispatcher polling every 1 s unless the case says otherwise). Once it
has run an unlimited job and a scheduled one (so the worker and the dispatcher are up), the
script enqueues a backlog of N jobs of the case's definition at once (``perform_all_later``),
each limited by ``limits_rate(to=, per=, burst=, key="global")``, and waits until all N have
run, or the case's deadline (10 s plus twice the ideal drain time) has passed; then it stops
the worker (SIGTERM, then SIGKILL of its process group if need be) and drops the database.

N is the burst plus two seconds of ideal drain, kept within 30 to 60 jobs (the range the seed
measured): 30 for the slow cases, 60 for the fast ones, whose drain then lasts only 0.6 to
1.2 s ideally; ``--jobs`` sets N for every case instead.

Cases (``--cases``, default the first eleven):

* ``to10-b6``: the seed's ``to 10 per 1 s, burst 6`` with the default 1 s dispatcher poll,
  which it says keeps up at 5 a second;
* ``to100-b20`` and ``to100-b11``: ``to 100 per 1 s`` with a 0.1 s dispatcher poll, burst 20
  (which the seed says is needed) and burst 11 (which it says falls behind);
* ``to2-b2``, ``to10-b2``, ``to50-b2``, ``to100-b2``: burst 2, default polls (the goal: 95% of
  ideal or more);
* ``to1-b1``, ``to5-b1``, ``to10-b1``, ``to50-b1``: the default burst of 1, default polls
  (the goal: 95% of ``to / per`` or more);
* not by default, ``to110-b11`` and ``to119-b20``: the documented simulation, which drains
  at 100 a second with a 0.1 s dispatcher poll (it says: falls behind, keeps up).

How the rate is measured: from the jobs' own admission times. Each job reads its claim's
``solidq_claimed_executions.created_at`` (the clock value the claim charged the budget with)
and stores it. Drain rate = ``(N - burst) / (last admission - first admission)``; ideal =
``(to - burst + 1) / per``: a quiet budget admits ``burst`` jobs at once, then one every
``T = per / (to - burst + 1)``, so the last of N comes ``(N - burst) * T`` after the first.

Reading the output, per backend:

* the first table: the case, its limit and dispatcher poll, N, measured and ideal jobs/s, and
  measured/ideal;
* the second table, where the time went. ``deferrals``: how many times a claim sent one of
  the case's jobs back to wait (from the ``defer_rate_limited`` signal); ``deferred 0/1/2+``:
  how many jobs waited that many times; ``slot->ready`` and ``ready->claim``: for the jobs
  admitted after waiting, how long after its last slot the dispatcher made the job ready, and
  how long after that a worker claimed it (p50/p90 in ms; seen by a thread of this script
  that reads the scheduled and ready executions every ``--trace-interval`` s, so ``seen``
  says for how many of them both were caught); ``budget idle``: replaying the admissions
  through the same GCRA, the time the budget sat full with nobody claiming (capacity lost for
  good), then split by what the job that ended each idle span was waiting for: its slot to
  come (it had been sent to the back of the line), the dispatcher to make it ready once due,
  or a worker to claim it once ready (``+x?``: spans of jobs whose slot or ready execution the
  reader missed); ``lost``: the drain's length minus the ideal ``(N - burst) * T``;
  ``max/per``: the most admissions in any window of ``per``, which the limit keeps at ``to``
  or fewer; ``check``: every job ran exactly once (the run log and
  ``bench_rate_admissions``), nothing left scheduled, ready, claimed or failed, and the
  replayed GCRA admits every admission.
* ``--timeline`` adds, per case, one line per job in admission order: admitted at (s after
  the first admission), the gap to the previous admission in units of T, times deferred, its
  last slot and ready times relative to the first admission, and how late after that slot it
  was claimed.

The reader thread costs the machine a few small queries every ``--trace-interval`` (0 turns it
off, and with it the ``slot->ready`` and ``ready->claim`` columns). The machine has few cores and
the database server runs on it too: run twice, and compare within one run.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import hashlib
import math
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import typing as t

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from bench import app as bench_app  # noqa: E402
from bench import common  # noqa: E402
from bench import rate_limit_jobs  # noqa: E402
from bench.rate_limit_jobs import Case  # noqa: E402
from flask_solidq import models  # noqa: E402
from flask_solidq.controls.rate_limit import gcra  # noqa: E402
from flask_solidq.storage import db as solidq_db  # noqa: E402

WORK_APP = "bench.rate_limit_jobs:create_app"
JOBS = t.cast(sa.Table, models.JobRecord.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
LEFTOVERS = {
    "ready": READY,
    "claimed": t.cast(sa.Table, models.ClaimedExecution.__table__),
    "scheduled": SCHEDULED,
    "blocked": t.cast(sa.Table, models.BlockedExecution.__table__),
    "failed": t.cast(sa.Table, models.FailedExecution.__table__),
}
WORKER = {"threads": 3, "processes": 1, "polling_interval": 0.1}
UTC = dt.timezone.utc


class Timeout(Exception):
    """The worker didn't get going in time."""


@dataclasses.dataclass
class Trace:
    """What the reader thread saw: (job id, deferred at, slot) of scheduled executions and
    (job id, ready at) of ready executions, each time as epoch seconds."""

    slots: set[tuple[int, float, float]] = dataclasses.field(default_factory=set)
    readies: set[tuple[int, float]] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class Result:
    """One case on one backend."""

    case: Case
    count: int
    admissions: dict[int, float] = dataclasses.field(default_factory=dict)
    deferrals: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    trace: Trace | None = None
    runs: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    issues: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)

    def ordered(self) -> list[tuple[float, int]]:
        """(admission time, job id), in admission order."""
        return sorted((at, job_id) for job_id, at in self.admissions.items())

    @property
    def rate(self) -> float | None:
        times = [at for at, _ in self.ordered()]
        if len(times) <= self.case.burst or times[-1] <= times[0]:
            return None
        return (len(times) - self.case.burst) / (times[-1] - times[0])


def epoch(value: dt.datetime) -> float:
    return value.replace(tzinfo=UTC).timestamp() if value.tzinfo is None else value.timestamp()


def trace_executions(
    engine: sa.Engine, first_id: int, interval: float, trace: Trace, stop: threading.Event
) -> None:
    """Every ``interval`` s, note the case's scheduled and ready executions (read-only)."""
    slots = sa.select(SCHEDULED.c.job_id, SCHEDULED.c.created_at, SCHEDULED.c.scheduled_at).where(
        SCHEDULED.c.job_id >= first_id
    )
    readies = sa.select(READY.c.job_id, READY.c.created_at).where(READY.c.job_id >= first_id)
    while not stop.is_set():
        try:
            with solidq_db.read(engine) as connection:
                for row in connection.execute(slots):
                    trace.slots.add((row[0], epoch(row[1]), epoch(row[2])))
                for row in connection.execute(readies):
                    trace.readies.add((row[0], epoch(row[1])))
        except sa.exc.OperationalError:
            pass  # SQLite busy, say: the next read catches up
        stop.wait(interval)


def wait_for_start(engine: sa.Engine, job_id: int, timeout: float) -> None:
    starts = bench_app.starts
    deadline = time.monotonic() + timeout
    while True:
        with solidq_db.read(engine) as connection:
            found = connection.execute(
                sa.select(starts.c.job_id).where(starts.c.job_id == job_id)
            ).first()
        if found is not None:
            return
        if time.monotonic() > deadline:
            raise Timeout(f"job {job_id} didn't start within {timeout:.0f} s")
        time.sleep(0.02)


def admitted(engine: sa.Engine, first_id: int) -> dict[int, float]:
    table = rate_limit_jobs.admissions
    with solidq_db.read(engine) as connection:
        rows = connection.execute(
            sa.select(table.c.job_id, table.c.claimed_at).where(table.c.job_id >= first_id)
        ).all()
    return {row[0]: row[1] for row in rows}


def run_case(
    backend: str, server_url: str, case: Case, count: int, options: argparse.Namespace
) -> Result:
    """Drain ``count`` jobs of ``case`` with a fresh worker in a scratch database."""
    result = Result(case, count)
    url, drop = common.scratch_database(backend, server_url)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="solidq-rate-drain-"))
    try:
        app = common.create_app(url)
        with app.app_context():
            engine = app.extensions["solidq"].engine
            bench_app.create_tables(engine)
            rate_limit_jobs.create_tables(engine)
            try:
                drain(app, engine, url, case, count, workdir, options, result)
            finally:
                engine.dispose()
    finally:
        drop()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def drain(
    app: t.Any,
    engine: sa.Engine,
    url: str,
    case: Case,
    count: int,
    workdir: pathlib.Path,
    options: argparse.Namespace,
    result: Result,
) -> None:
    run_log = workdir / "runs.txt"
    defer_log = workdir / "deferrals.txt"
    output = workdir / "work.log"
    config = {
        "SOLIDQ_WORKERS": [dict(WORKER)],
        "SOLIDQ_DISPATCHERS": [{"polling_interval": case.dispatcher_poll}],
    }
    env = {"SOLIDQ_BENCH_RUN_LOG": str(run_log), "SOLIDQ_BENCH_DEFER_LOG": str(defer_log)}
    deadline_after = 10.0 + 2 * (count - case.burst) / case.ideal
    stop_tracing = threading.Event()
    tracer: threading.Thread | None = None
    first_id: int | None = None
    with output.open("wb") as log:
        # This benchmark's jobs must be registered in the worker before its first claim, so it
        # runs an app that imports them.
        process = common.start_work(
            url, ["--mode", "fork"], log, config=config, env=env, app=WORK_APP
        )
        try:
            try:
                warm_up(engine)
            except Timeout as error:
                result.issues.append(f"not started: {error}")
                return
            jobs = [rate_limit_jobs.JOBS[case.name].new() for _ in range(count)]
            if options.trace_interval > 0:
                result.trace = Trace()
                # The ids to come are above every id so far; the tracer filters on this floor.
                floor = _next_id(engine)
                tracer = threading.Thread(
                    target=trace_executions,
                    args=(engine, floor, options.trace_interval, result.trace, stop_tracing),
                    daemon=True,
                )
                tracer.start()
            common.solidq.perform_all_later(jobs)
            first_id = min(t.cast(int, job.provider_job_id) for job in jobs)
            deadline = time.monotonic() + deadline_after
            while len(admitted(engine, first_id)) < count:
                if process.poll() is not None:
                    result.problems.append(f"the worker exited with status {process.returncode}")
                    break
                if time.monotonic() > deadline:
                    result.issues.append(f"not drained within the {deadline_after:.0f} s deadline")
                    break
                time.sleep(0.1)
            time.sleep(0.3)  # let the finisher store the last outcomes
        finally:
            stop_tracing.set()
            if tracer is not None:
                tracer.join()
            stopped = common.stop_work(process)
            if stopped is None:
                result.problems.append("the worker didn't stop within 30 s of SIGTERM; killed")
            common.kill_work(process)
    result.problems += common.log_problems(output.read_text(errors="replace"))
    if first_id is None:
        return
    result.admissions = admitted(engine, first_id)
    collect(engine, first_id, run_log, defer_log, result)


def warm_up(engine: sa.Engine) -> None:
    """Wait until the worker ran an unlimited job and the dispatcher a scheduled one."""
    job = bench_app.record_start.perform_later()
    wait_for_start(engine, t.cast(int, job.provider_job_id), 30.0)
    job = bench_app.record_start.set(wait=0.3).perform_later()
    wait_for_start(engine, t.cast(int, job.provider_job_id), 30.0)


def _next_id(engine: sa.Engine) -> int:
    with solidq_db.read(engine) as connection:
        return int(connection.execute(sa.select(sa.func.max(JOBS.c.id))).scalar_one() or 0) + 1


def collect(
    engine: sa.Engine, first_id: int, run_log: pathlib.Path, defer_log: pathlib.Path, result: Result
) -> None:
    """Read the run and deferral logs and what is left in the queue; note every issue."""
    count = result.count
    if run_log.exists():
        result.runs.update(
            job_id for job_id in map(int, run_log.read_text().split()) if job_id >= first_id
        )
    if defer_log.exists():
        for line in defer_log.read_text().splitlines():
            result.deferrals.update(int(job_id) for job_id in line.split()[1:])
    table = rate_limit_jobs.admissions
    with solidq_db.read(engine) as connection:
        rows = connection.execute(
            sa.select(table.c.job_id, sa.func.count())
            .where(table.c.job_id >= first_id)
            .group_by(table.c.job_id)
        ).all()
        finished = connection.execute(
            sa.select(sa.func.count())
            .select_from(JOBS)
            .where(JOBS.c.id >= first_id, JOBS.c.finished_at.is_not(None))
        ).scalar_one()
        leftovers = {
            name: connection.execute(
                sa.select(sa.func.count()).select_from(left).where(left.c.job_id >= first_id)
            ).scalar_one()
            for name, left in LEFTOVERS.items()
        }
    stored_twice = [row[0] for row in rows if row[1] > 1]
    ran_twice = sorted(job_id for job_id, seen in result.runs.items() if seen > 1)
    if len(rows) != count:
        result.issues.append(f"{len(rows)} of {count} admitted")
    if finished != count:
        result.issues.append(f"{finished} of {count} finished")
    if len(result.runs) != count:
        result.issues.append(f"{len(result.runs)} of {count} in the run log")
    if ran_twice or stored_twice:
        twice = sorted(set(ran_twice) | set(stored_twice))
        result.issues.append(f"{len(twice)} ran more than once (e.g. {twice[:5]})")
    result.issues += [f"{number} left {name}" for name, number in leftovers.items() if number]
    refused = replay(result)[2]
    if refused:
        result.issues.append(f"{refused} admissions the replayed GCRA refuses")


def replay(result: Result) -> tuple[float, int, int]:
    """Replay the admissions through the limit's GCRA: (seconds the budget sat full with
    nobody claiming, most admissions in any window of ``per``, admissions it would refuse)."""
    idle = sum(end - start for _, start, end in idle_spans(result))
    times = [at for at, _ in result.ordered()]
    most = 0
    start = 0
    for end, at in enumerate(times):
        while at - times[start] >= result.case.per:
            start += 1
        most = max(most, end - start + 1)
    return idle, most, _refused(result)


def idle_spans(result: Result) -> list[tuple[int, float, float]]:
    """(job id, start, end) of each span in which the replayed budget sat full (``tat``
    passed) until the job ``job id`` was admitted at ``end``: capacity nobody used."""
    rate = gcra.Rate.of(result.case.to, result.case.per, result.case.burst)
    budget = gcra.Budget()
    spans = []
    for at, job_id in result.ordered():
        now = dt.datetime.fromtimestamp(at, UTC)
        if budget.tat is not None and now > budget.tat:
            spans.append((job_id, budget.tat.timestamp(), at))
        if not budget.admit(rate, now):
            budget.tat = max(budget.tat or now, now) + rate.interval
    return spans


def _refused(result: Result) -> int:
    rate = gcra.Rate.of(result.case.to, result.case.per, result.case.burst)
    budget = gcra.Budget()
    refused = 0
    for at, _ in result.ordered():
        now = dt.datetime.fromtimestamp(at, UTC)
        if not budget.admit(rate, now):
            refused += 1
            budget.tat = max(budget.tat or now, now) + rate.interval
    return refused


def idle_by_cause(result: Result) -> dict[str, float]:
    """The budget's idle time split by what the job that ended each span was waiting for:
    its slot to come (``slot``), the dispatcher to make it ready once due (``dispatch``), a
    worker to claim it once ready (``claim``); ``unseen`` when the reader thread missed its
    slot or ready execution. A job that never waited was ready from the start: ``claim``."""
    causes = dict.fromkeys(("slot", "dispatch", "claim", "unseen"), 0.0)
    by_job = {item.job_id: item for item in returns(result)}
    for job_id, start, end in idle_spans(result):
        item = by_job.get(job_id)
        if item is None:
            causes["claim"] += end - start
            continue
        if item.slot is None or item.ready is None:
            causes["unseen"] += end - start
            continue
        due = min(max(item.slot, start), end)
        ready = min(max(item.ready, due), end)
        causes["slot"] += due - start
        causes["dispatch"] += ready - due
        causes["claim"] += end - ready
    return causes


@dataclasses.dataclass
class Return:
    """An admitted job that had waited: its last slot and ready time (when seen), and claim."""

    job_id: int
    claim: float
    slot: float | None
    ready: float | None


def returns(result: Result) -> list[Return]:
    """The admitted jobs that waited at least once, with what the reader thread saw."""
    trace = result.trace or Trace()
    slots: dict[int, list[tuple[float, float]]] = collections.defaultdict(list)
    for job_id, deferred_at, slot in trace.slots:
        slots[job_id].append((deferred_at, slot))
    readies: dict[int, list[float]] = collections.defaultdict(list)
    for job_id, ready_at in trace.readies:
        readies[job_id].append(ready_at)
    found = []
    for claim, job_id in result.ordered():
        if not result.deferrals[job_id]:
            continue
        # The last wait before the claim, and the job's ready execution made after it.
        waits = [wait for wait in slots[job_id] if wait[0] <= claim]
        if not waits:
            found.append(Return(job_id, claim, None, None))
            continue
        deferred_at, slot = max(waits)
        ready = [at for at in readies[job_id] if deferred_at <= at <= claim]
        found.append(Return(job_id, claim, slot, max(ready) if ready else None))
    return found


def percentiles(values: list[float]) -> str:
    """p50/p90 in ms (p90 by nearest rank)."""
    if not values:
        return "-"
    ordered = sorted(values)
    p90 = ordered[math.ceil(0.9 * len(ordered)) - 1]
    return f"{1000 * statistics.median(ordered):.0f}/{1000 * p90:.0f}"


def rate_row(result: Result) -> list[object]:
    case = result.case
    rate = result.rate
    partial = "" if len(result.admissions) >= result.count else "*"
    measured = "-" if rate is None else f"{rate:.2f}{partial}"
    share = "-" if rate is None else f"{100 * rate / case.ideal:.0f}%{partial}"
    return [
        case.name,
        case.to,
        f"{case.per:g} s",
        case.burst,
        f"{case.dispatcher_poll:g} s",
        result.count,
        measured,
        f"{case.ideal:.2f}",
        share,
    ]


def detail_row(result: Result) -> list[object]:
    case = result.case
    ordered = result.ordered()
    if len(ordered) <= case.burst:
        return [case.name, "-", "-", "-", "-", "-", "-", "-", "-", "-", _check(result)]
    first = ordered[0][0]
    times = collections.Counter(min(result.deferrals[job_id], 2) for job_id in result.admissions)
    back = returns(result)
    seen = [item for item in back if item.slot is not None and item.ready is not None]
    slot_ready = [t.cast(float, item.ready) - t.cast(float, item.slot) for item in seen]
    ready_claim = [item.claim - t.cast(float, item.ready) for item in seen]
    idle, most, _refused = replay(result)
    causes = idle_by_cause(result)
    split = "/".join(f"{causes[cause]:.2f}" for cause in ("slot", "dispatch", "claim"))
    if causes["unseen"]:
        split += f" +{causes['unseen']:.2f}?"
    lost = (ordered[-1][0] - first) - (len(ordered) - case.burst) * case.interval
    traced = result.trace is not None
    return [
        case.name,
        sum(result.deferrals.values()),
        f"{times[0]}/{times[1]}/{times[2]}",
        percentiles(slot_ready) if traced else "-",
        percentiles(ready_claim) if traced else "-",
        f"{len(seen)}/{len(back)}" if traced else "-",
        f"{idle:.2f} s",
        split if traced else "-",
        f"{lost:.2f} s",
        f"{most}/{case.to}",
        _check(result),
    ]


def _check(result: Result) -> str:
    return "; ".join(result.issues) if result.issues else f"all {result.count} exactly once"


def timeline(result: Result) -> list[str]:
    """One line per admitted job, in admission order."""
    ordered = result.ordered()
    if not ordered:
        return []
    first = ordered[0][0]
    interval = result.case.interval
    by_job = {item.job_id: item for item in returns(result)}
    rows: list[list[object]] = []
    previous = first
    for index, (claim, job_id) in enumerate(ordered):
        item = by_job.get(job_id)

        def relative(value: float | None) -> str:
            return "-" if value is None else f"{value - first:.3f}"

        rows.append(
            [
                index + 1,
                job_id,
                f"{claim - first:.3f}",
                f"{(claim - previous) / interval:.2f}",
                result.deferrals[job_id],
                relative(item.slot if item else None),
                relative(item.ready if item else None),
                f"{(claim - item.slot) * 1000:.0f}" if item and item.slot is not None else "-",
            ]
        )
        previous = claim
    headers = ["#", "job", "admitted s", "gap /T", "deferred", "slot s", "ready s", "late ms"]
    return common.table(headers, rows).splitlines()


def version_line() -> str:
    """The commit measured, and whether flask_solidq/ has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=common.ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "flask_solidq"],
            cwd=common.ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "diff", "HEAD", "--", "flask_solidq"],
            cwd=common.ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "# flask_solidq: version unknown (no git)"
    if not dirty:
        return f"# flask_solidq at {commit}"
    digest = hashlib.sha256(changes)
    for line in dirty.splitlines():
        if line.startswith("?? "):
            path = pathlib.Path(common.ROOT, line[3:])
            files = sorted(path.rglob("*")) if path.is_dir() else [path]
            for file in (file for file in files if file.is_file()):
                digest.update(file.read_bytes())
    return (
        f"# flask_solidq at {commit} with uncommitted changes under flask_solidq/"
        f" (digest {digest.hexdigest()[:12]}): they are measured too"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backends", default="sqlite,postgres,mysql", help="comma-separated backends to measure"
    )
    parser.add_argument(
        "--cases",
        default=",".join(rate_limit_jobs.DEFAULT_CASES),
        help="comma-separated cases, of: " + ",".join(rate_limit_jobs.BY_NAME),
    )
    parser.add_argument(
        "--jobs", type=int, default=None, help="N for every case (default: 30 to 60, per case)"
    )
    parser.add_argument(
        "--trace-interval",
        type=float,
        default=0.02,
        help="seconds between reads of the scheduled and ready executions (0: off)",
    )
    parser.add_argument("--timeline", action="store_true", help="print every admission")
    options = parser.parse_args()
    names = [name.strip() for name in options.cases.split(",") if name.strip()]
    unknown = [name for name in names if name not in rate_limit_jobs.BY_NAME]
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {','.join(rate_limit_jobs.BY_NAME)}")
    cases = [rate_limit_jobs.BY_NAME[name] for name in names]
    if options.jobs is not None and options.jobs <= max(case.burst for case in cases) + 1:
        parser.error("--jobs must exceed every chosen case's burst by 2 or more")

    chosen = common.chosen_backends(options.backends)
    print("\n".join(common.machine_lines(chosen)), flush=True)
    print(version_line(), flush=True)

    tables: list[str] = []
    for backend, server_url in chosen:
        started = time.monotonic()
        results = []
        for case in cases:
            count = options.jobs or case.backlog()
            results.append(run_case(backend, server_url, case, count, options))
            print(f"# {backend} {case.name}: {_summary(results[-1])}", flush=True)
        print(f"# {backend} done in {time.monotonic() - started:.0f} s", flush=True)
        tables.append(report(backend, results, options.timeline))

    print()
    print("\n\n".join(tables))
    print(f"# load at the end: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")
    print(version_line().replace("# flask_solidq", "# at the end, flask_solidq", 1))


def _summary(result: Result) -> str:
    rate = result.rate
    if rate is None:
        return "no rate; " + _check(result)
    return f"{rate:.2f} jobs/s, {100 * rate / result.case.ideal:.0f}% of ideal; " + _check(result)


def report(backend: str, results: list[Result], with_timeline: bool) -> str:
    lines = [
        f"{backend}: backlog drain under limits_rate (1 worker x 3 threads polling 0.1 s;"
        " * = not drained by the deadline, rate over what was admitted)",
        common.table(
            [
                "case",
                "to",
                "per",
                "burst",
                "dispatcher poll",
                "N",
                "measured jobs/s",
                "ideal jobs/s",
                "measured/ideal",
            ],
            [rate_row(result) for result in results],
        ),
        "",
        f"{backend}: where the time went (slot->ready, ready->claim: p50/p90 ms)",
        common.table(
            [
                "case",
                "deferrals",
                "deferred 0/1/2+",
                "slot->ready",
                "ready->claim",
                "seen",
                "budget idle",
                "idle: slot/dispatch/claim s",
                "lost",
                "max/per",
                "check",
            ],
            [detail_row(result) for result in results],
        ),
    ]
    for result in results:
        lines += [f"{backend} {result.case.name}: {line}" for line in result.problems]
    if with_timeline:
        for result in results:
            lines += ["", f"{backend} {result.case.name}: admissions", *timeline(result)]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

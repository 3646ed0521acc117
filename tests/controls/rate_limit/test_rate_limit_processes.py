"""``limits_rate`` in real `flask solidq work` processes, on every backend.

Each test starts its own `flask solidq work --processes 2 --threads 3` (fork mode, two worker
processes and a dispatcher, all polling fast) on ``tests.apps.rate_limit_app``, and stops it
(SIGTERM, exit 0) at the end. Each run of a job records in ``solidq_test_rate_runs``
(:mod:`tests.jobs.rate_limit_process`) the time its claim was admitted (its claim row's
``created_at``, the clock value the GCRA admission used) and the time it started, so the
tests check what the limit guarantees on the times the limit saw:

* in any half-open window of ``per``, at most ``to`` admissions of a budget;
* a quiet budget admits ``burst`` at once, then one every ``T = per / (to - burst + 1)``: any
  ``m`` admissions of a budget span at least ``(m - burst) * T`` (``m = to + 1`` gives the
  window bound);
* a job starts at or after its admission, and the starts keep the bound up to the worker's
  hand-off delay;
* budgets are separate: one key's backlog doesn't hold back another key's jobs, and
  unlimited jobs run while limited ones wait.

The admission bounds hold whatever the timing, and are checked exactly. Only the claims the
limit makes about timing itself ("a job that reaches a worker while its budget has room runs
straight away", "a job can start a moment after its claim") are checked with a tolerance,
stated where it is used.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import pathlib
import random
import signal
import threading
import time
import typing as t
import uuid

import pytest
import sqlalchemy as sa

from flask_solidq import models
from flask_solidq.controls.rate_limit import budgets
from flask_solidq.operations import claim
from flask_solidq.timing import utcnow
from tests import support
from tests.jobs import rate_limit_process as jobs
from tests.jobs.rate_limit_process import RUNS
from tests.jobs.rate_limit_process import Limit
from tests.support.runtime import WorkProcess
from tests.support.runtime import kinds

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
JOB_FAILURES = t.cast(sa.Table, models.JobFailure.__table__)

WORK_ARGS = ["--processes", "2", "--threads", "3"]
POLLING_INTERVAL = 0.05
WORK_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker", "Worker"]

#: A dispatcher polling every 0.1 s brings waiting jobs back promptly; nobody is pruned while
#: a test runs.
CONFIG: dict[str, t.Any] = {
    "SOLIDQ_DISPATCHERS": [{"polling_interval": 0.1}],
    "SOLIDQ_PROCESS_ALIVE_THRESHOLD": 60,
}

#: How much later than its admission a job may start for the start-time check. The worker
#: hands a claimed job to an idle thread of its own process once the claim committed, and the
#: job reads its budget's pause (one query) before it starts: milliseconds, mostly. But the
#: admission is stamped when the claim read the clock, and a fresh worker's first claim then
#: runs its statements for the first time; on MariaDB on this loaded 2-core machine that put
#: the first job's start 0.22 to 0.29 s after its admission about once in seven runs (seen
#: before the start check too). Starts that each lag their admission by at most HANDOFF keep
#: the bound over windows of ``per - HANDOFF``: two starts in such a window were admitted in a
#: window of ``per`` (docs/rate-limits.md, "Admissions and starts").
HANDOFF = 0.35

#: How soon a job whose budget has room must be admitted after it is enqueued: the workers
#: poll every 0.05 s, so this leaves room for a loaded machine, and is still well below the
#: seconds the backlogs these tests build keep their jobs waiting.
PROMPT = 2.0

#: How long every job of a test may take to run, at most (a deadline, not an expectation).
DRAIN_TIMEOUT = 40.0


class Run(t.NamedTuple):
    job_id: int
    budget_key: str | None
    value: str
    admitted_at: dt.datetime
    started_at: dt.datetime


@dataclasses.dataclass
class Workers:
    """Starts `flask solidq work` on the rate-limit app; each is killed after the test."""

    database_url: str
    directory: pathlib.Path
    engine: sa.Engine
    started: list[WorkProcess] = dataclasses.field(default_factory=list)

    def start(self, polling_interval: float = POLLING_INTERVAL) -> WorkProcess:
        """Start `flask solidq work --processes 2 --threads 3` and wait until its processes
        are registered."""
        log = self.directory / f"work-{len(self.started)}.log"
        work = WorkProcess(
            self.database_url,
            ["work", *WORK_ARGS, "--polling-interval", str(polling_interval)],
            config=CONFIG,
            log_path=log,
            app_module="tests.apps.rate_limit_app",
        )
        self.started.append(work)
        support.wait_until(lambda: kinds(self.engine) == WORK_KINDS, timeout=30)
        return work

    def stop(self, work: WorkProcess) -> None:
        """SIGTERM ``work``; it must exit with status 0."""
        work.signal(signal.SIGTERM)
        assert work.wait(20) == 0, work.output()


@pytest.fixture
def workers(app: Flask, database_url: str, tmp_path: pathlib.Path) -> t.Iterator[Workers]:
    """Start `flask solidq work` processes on ``app``'s database; afterwards each is killed
    with its whole group (before ``app`` empties the queue's tables), and the evidence table
    is emptied."""
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    RUNS.create(engine, checkfirst=True)
    workers = Workers(database_url, tmp_path, engine)
    try:
        yield workers
    finally:
        for work in workers.started:
            work.kill()
        with engine.begin() as connection:
            connection.execute(RUNS.delete())


# Enqueuing and reading the evidence.


def enqueue_all(app: Flask, definition: t.Any, arguments: list[tuple[t.Any, ...]]) -> list[int]:
    """Enqueue ``definition(*args)`` for each of ``arguments`` in one transaction; return the
    job ids."""
    with app.app_context():
        batch = [definition.new(*args) for args in arguments]
        support.solidq.perform_all_later(batch)
    return [t.cast(int, job.provider_job_id) for job in batch]


def runs(engine: sa.Engine, job_name: str) -> list[Run]:
    """The runs of ``job_name``, in the order they were admitted."""
    found = support.rows(engine, RUNS, RUNS.c.job_name == job_name)
    return sorted(
        (
            Run(row.job_id, row.budget_key, row.value, row.admitted_at, row.started_at)
            for row in found
        ),
        key=lambda run: (run.admitted_at, run.job_id),
    )


def all_finished(engine: sa.Engine, job_ids: list[int]) -> bool:
    """Whether every job of ``job_ids`` finished (or failed: the test then says which)."""
    with engine.connect() as connection:
        done = connection.scalar(
            sa.select(sa.func.count())
            .select_from(JOBS)
            .where(JOBS.c.id.in_(job_ids), JOBS.c.finished_at.is_not(None))
        )
        failed = connection.scalar(sa.select(sa.func.count()).select_from(FAILED))
    return bool(done == len(job_ids) or failed)


def wait_for_runs(engine: sa.Engine, job_name: str, job_ids: list[int]) -> list[Run]:
    """Wait until every job of ``job_ids`` finished; return ``job_name``'s runs after checking
    that each of them ran exactly once, and nothing is left waiting or failed."""
    support.wait_until(lambda: all_finished(engine, job_ids), timeout=DRAIN_TIMEOUT, interval=0.1)
    assert support.rows(engine, FAILED) == []
    found = runs(engine, job_name)
    assert sorted(run.job_id for run in found) == sorted(job_ids), "each job runs exactly once"
    for table in (READY, SCHEDULED, CLAIMED):
        assert support.rows(engine, table, table.c.job_id.in_(job_ids)) == []
    return found


# What the limit guarantees, on a list of times.


def seconds(delta: dt.timedelta) -> float:
    return delta / dt.timedelta(seconds=1)


def most_in_a_window(times: t.Sequence[dt.datetime], length: float) -> int:
    """The most of ``times`` any half-open window ``[x, x + length)`` holds (the busiest
    window starts at one of the times)."""
    ordered = sorted(times)
    window = dt.timedelta(seconds=length)
    return max(
        (sum(1 for other in ordered[index:] if other < start + window))
        for index, start in enumerate(ordered)
    )


def too_close(admissions: t.Sequence[dt.datetime], limit: Limit) -> list[tuple[int, float]]:
    """Every run of ``m`` consecutive admissions that spans less than ``(m - burst) * T``, as
    (m, span in seconds). GCRA admits a claim ``tolerance = (burst - 1) * T`` early at most,
    and moves the budget on by ``T`` per admission, so this is empty whatever the timing.
    The implementation rounds ``T`` up to the microsecond, which only widens the spans; a
    thousandth of a microsecond of slack covers the float arithmetic here."""
    ordered = sorted(admissions)
    found = []
    for first in range(len(ordered)):
        for last in range(first + limit.burst, len(ordered)):
            m = last - first + 1
            span = ordered[last] - ordered[first]
            if (
                span / dt.timedelta(microseconds=1)
                < (m - limit.burst) * limit.interval * 1e6 - 1e-3
            ):
                found.append((m, seconds(span)))
    return found


def check_guarantee(found: list[Run], limit: Limit) -> None:
    """The guarantee, on the runs of one budget."""
    admissions = [run.admitted_at for run in found]
    assert most_in_a_window(admissions, limit.per) <= limit.to, admissions
    assert too_close(admissions, limit) == []
    assert all(run.started_at >= run.admitted_at for run in found)
    starts = [run.started_at for run in found]
    # A limit whose window is shorter than the hand-off says nothing of starts; its
    # admissions, checked above, are exact.
    window = max(limit.per - HANDOFF, 0.0)
    assert window == 0.0 or most_in_a_window(starts, window) <= limit.to, [
        (seconds(run.admitted_at - found[0].admitted_at), seconds(run.started_at - run.admitted_at))
        for run in found
    ]


# The property: random limits, random arrivals.

#: Seeds whose cases cover burst 1, 2 and 3, and burst = to, with 5 to 19 jobs.
PROPERTY_SEEDS = [0, 3, 5, 10]


@dataclasses.dataclass(frozen=True)
class Arrival:
    """``size`` jobs enqueued at once (in one transaction), ``at`` seconds into the test."""

    at: float
    size: int


def draw_case(seed: int) -> tuple[Limit, list[Arrival]]:
    """A limit of the family, and when its jobs arrive: single jobs and bursts (up to
    ``to + 2`` at once) at random times over 2 to 4 seconds. There are a few more jobs than
    ``to``, and few enough for the backlog to drain in about 4 seconds."""
    rng = random.Random(seed)
    limit = rng.choice(sorted(jobs.FAMILY))
    count = rng.randint(
        limit.to + 2, max(limit.to + 2, min(20, limit.burst + int(4 / limit.interval)))
    )
    span = rng.uniform(2.0, 4.0)
    sizes: list[int] = []
    while sum(sizes) < count:
        size = 1 if rng.random() < 0.5 else rng.randint(2, limit.to + 2)
        # The first arrival leaves at least one job for the last, which comes at ``span``.
        room = count - sum(sizes) - (0 if sizes else 1)
        sizes.append(min(size, room))
    times = [0.0, *sorted(rng.uniform(0, span) for _ in sizes[2:]), span]
    return limit, [Arrival(round(at, 3), size) for at, size in zip(times, sizes, strict=True)]


@pytest.mark.parametrize("seed", PROPERTY_SEEDS)
def test_random_arrivals_are_admitted_at_most_to_in_any_window_of_per_and_each_runs_once(
    app, workers, seed
):
    limit, arrivals = draw_case(seed)
    definition = jobs.FAMILY[limit]
    job_name = jobs.job_name_of(limit)
    work = workers.start()

    job_ids: list[int] = []
    began = time.monotonic()
    for arrival in arrivals:
        # The arrivals are the scenario: each comes at its planned time.
        time.sleep(max(0.0, began + arrival.at - time.monotonic()))
        values = range(len(job_ids), len(job_ids) + arrival.size)
        job_ids += enqueue_all(app, definition, [(value,) for value in values])
    found = wait_for_runs(workers.engine, job_name, job_ids)
    workers.stop(work)

    assert {run.budget_key for run in found} == {f"{job_name}/global"}
    check_guarantee(found, limit)


def test_draw_case_gives_a_few_more_jobs_than_to_over_two_to_four_seconds():
    for seed in range(50):
        limit, arrivals = draw_case(seed)
        count = sum(arrival.size for arrival in arrivals)
        assert limit.to + 2 <= count <= 20
        assert arrivals[0].at == 0.0 and 2.0 <= arrivals[-1].at <= 4.0
        assert all(1 <= arrival.size <= limit.to + 2 for arrival in arrivals)


def test_the_window_and_spacing_checks_catch_one_admission_too_many():
    limit = Limit(to=3, per=1.0, burst=2)  # T = 0.5: two at once, then one every 0.5 s
    base = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    at = [base + dt.timedelta(seconds=offset) for offset in (0, 0, 0.5, 1.0, 1.5)]
    assert most_in_a_window(at, limit.per) == 3
    assert too_close(at, limit) == []
    early = [*at[:3], base + dt.timedelta(seconds=0.999999)]
    assert most_in_a_window(early, limit.per) == 4
    assert too_close(early, limit) == [(4, 0.999999)]


# A quiet budget.


def test_a_quiet_budget_admits_exactly_burst_at_once_and_the_next_one_interval_later(app, workers):
    limit = jobs.QUIET  # burst 3 <= 3 threads: one claim of a worker can admit the whole burst
    key = f"quiet-{uuid.uuid4().hex[:8]}"
    count = limit.burst + 4
    # No worker yet: every job is ready before the first claim.
    job_ids = enqueue_all(app, jobs.quiet, [(key, value) for value in range(count)])
    work = workers.start()
    found = wait_for_runs(workers.engine, "rate_process_test.quiet", job_ids)
    workers.stop(work)

    assert {run.budget_key for run in found} == {f"rate_process_test.quiet/{key}"}
    first = found[0].admitted_at
    interval = dt.timedelta(seconds=limit.interval)
    offsets = [seconds(run.admitted_at - first) for run in found]
    # The first claim to lock the fresh budget holds 3 candidates (7 jobs are ready, and the
    # two workers' first claims take 3 each at most), so it admits all 3 = burst at one
    # instant, whatever the timing; GCRA admits the next one interval later at the earliest.
    assert sum(1 for run in found if run.admitted_at < first + interval) == limit.burst, offsets
    assert found[limit.burst].admitted_at >= first + interval, offsets
    check_guarantee(found, limit)


# What the API says back.


def test_a_job_told_429_waits_out_each_pause_and_the_budget_admits_nothing_meanwhile(app, workers):
    """A job whose API answers 429 to its first two runs is deferred twice (never failed, no
    attempt spent) and runs a third time; each run comes a pause after the one before, the
    other jobs of its budget enqueued during the first pause are admitted only after it, and
    every admission keeps the limit's bound (the burst, then one per interval)."""
    limit, engine = jobs.THROTTLED, workers.engine
    pause = dt.timedelta(seconds=jobs.THROTTLED_PAUSE)
    work = workers.start()
    (first,) = enqueue_all(app, jobs.throttled, [("first", 2)])
    budget_key = "rate_process_test.throttled/global"
    until = support.wait_until(lambda: paused_until(engine, budget_key), timeout=DRAIN_TIMEOUT)
    others = enqueue_all(app, jobs.throttled, [(f"other-{n}", 0) for n in range(4)])
    job_ids = [first, *others]
    support.wait_until(lambda: all_finished(engine, job_ids), timeout=DRAIN_TIMEOUT, interval=0.1)
    workers.stop(work)

    assert support.rows(engine, FAILED) == []
    assert support.rows(engine, JOB_FAILURES) == []
    (first_row,) = support.rows(engine, JOBS, JOBS.c.id == first)
    assert "executions" not in json.loads(first_row.arguments)  # no run counted before
    found = runs(engine, "rate_process_test.throttled")
    told = [run for run in found if run.job_id == first]
    assert len(told) == 3
    assert all(b.admitted_at - a.admitted_at >= pause for a, b in itertools.pairwise(told))
    assert sorted(run.job_id for run in found if run.job_id != first) == sorted(others)
    assert all(run.admitted_at >= until for run in found if run.job_id != first)
    check_guarantee(found, limit)


def paused_until(engine: sa.Engine, key: str) -> dt.datetime | None:
    """The end of budget ``key``'s back-off, once one was written."""
    with engine.connect() as connection:
        return t.cast(
            "dt.datetime | None",
            connection.scalar(
                sa.select(budgets.BUDGETS.c.backed_off_until).where(budgets.BUDGETS.c.key == key)
            ),
        )


# Several keys.


def test_each_key_keeps_its_own_bound_and_one_keys_backlog_doesnt_hold_back_another(app, workers):
    limit = jobs.KEYED  # per key: 2 at once, then one every 0.45 s
    engine = workers.engine
    work = workers.start()
    backlog = enqueue_all(app, jobs.keyed, [("busy", value) for value in range(10)])
    # The busy key's burst is admitted; the rest of its backlog waits for at least
    # (10 - 2) * 0.45 = 3.6 s more.
    support.wait_until(lambda: runs(engine, "rate_process_test.keyed"), timeout=PROMPT)

    enqueued_at = utcnow()
    others = enqueue_all(
        app, jobs.keyed, [(account, value) for value in range(4) for account in ("b", "c")]
    )
    found = wait_for_runs(engine, "rate_process_test.keyed", backlog + others)
    workers.stop(work)

    by_key: dict[str, list[Run]] = {}
    for run in found:
        by_key.setdefault(t.cast(str, run.budget_key), []).append(run)
    assert sorted(by_key) == [f"rate_process_test.keyed/{key}" for key in ("b", "busy", "c")]
    busy = by_key["rate_process_test.keyed/busy"]
    for of_key in by_key.values():
        check_guarantee(of_key, limit)
    for key in ("b", "c"):
        first = by_key[f"rate_process_test.keyed/{key}"][0]
        # Admitted promptly, while the busy key's backlog still waited.
        assert seconds(first.admitted_at - enqueued_at) < PROMPT, key
        assert first.admitted_at < busy[-1].admitted_at, key
    # Separate budgets: together they admitted more in a window of per than one budget may
    # (b's and c's bursts of 2 are admitted by the first claims after their enqueue, within
    # milliseconds; per is 0.9 s).
    assert most_in_a_window([run.admitted_at for run in found], limit.per) > limit.to


# Unlimited jobs.


def test_an_unlimited_job_behind_a_limited_backlog_runs_promptly_while_the_backlog_waits(
    app, workers
):
    limit = jobs.SLOW  # one a second: the backlog of 6 needs 5 s at least
    engine = workers.engine
    work = workers.start()
    enqueued_at = utcnow()
    with app.app_context():
        batch = [jobs.slow.new(value) for value in range(6)] + [jobs.unlimited.new("behind")]
        # One transaction: the unlimited job is ready behind the whole backlog.
        support.solidq.perform_all_later(batch)
    limited_ids = [t.cast(int, job.provider_job_id) for job in batch[:-1]]

    (unlimited,) = support.wait_until(
        lambda: runs(engine, "rate_process_test.unlimited"), timeout=DRAIN_TIMEOUT
    )
    with engine.connect() as connection:
        waiting = connection.scalar(
            sa.select(sa.func.count())
            .select_from(SCHEDULED)
            .where(SCHEDULED.c.job_id.in_(limited_ids))
        )
    # The backlog goes on at its pace: three of it are admitted 2 s apart at least.
    admitted = support.wait_until(
        lambda: (found := runs(engine, "rate_process_test.slow"))[2:] and found,
        timeout=DRAIN_TIMEOUT,
    )
    workers.stop(work)

    assert seconds(unlimited.started_at - enqueued_at) < PROMPT
    assert unlimited.budget_key is None
    # The backlog was still waiting behind its limit when the unlimited job ran.
    assert waiting >= 1
    assert sum(1 for run in admitted if run.admitted_at <= unlimited.admitted_at) < len(limited_ids)
    check_guarantee(admitted, limit)


# Concurrent claims with clocks read in another order than the budget is locked.

#: How long the stalled claim's thread waits between reading the clock and locking its budget.
STALL = 0.5


def test_a_claim_that_stalled_before_locking_its_budget_doesnt_lower_it(
    app, database_url, monkeypatch
):
    # SQLite claims one at a time from BEGIN IMMEDIATE on (the process's own writer lock
    # first), so there the "stalled" claim can't stall halfway: it runs whole, first.
    stalls = not database_url.startswith("sqlite")
    limit = jobs.SLOW  # to=1 per=1.0 burst=1: two admissions must be 1 s apart at least
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    enqueue_all(app, jobs.slow, [(value,) for value in range(3)])
    read_clock, resume = threading.Event(), threading.Event()
    real_utcnow = claim.utcnow
    real_lock = budgets.lock

    def lock(*args: t.Any, **kwargs: t.Any) -> t.Any:
        # The stalled claim has locked its candidate; it stalls before it locks the budget
        # (a descheduled thread, or a wait for the budget's lock).
        if stalls and threading.current_thread().name == "stalled":
            read_clock.set()
            resume.wait(10)
        return real_lock(*args, **kwargs)

    monkeypatch.setattr(budgets, "lock", lock)
    selector = claim.QueueSelector(("*",))
    support.register_claimers(engine, [9001, 9002, 9003])
    stalled: list[claim.ClaimBatch | BaseException] = []

    def claim_stalled() -> None:
        try:
            stalled.append(claim.claim_batch(engine, selector, 1, process_id=9001))
        except BaseException as error:  # noqa: BLE001 - reported below
            stalled.append(error)

    # A claim locks the first job's ready row; its thread stalls before it locks the budget.
    # It must read its clock only after that lock, or it would charge the budget with a time
    # older than the admission made meanwhile, and lower the budget's debt.
    thread = threading.Thread(target=claim_stalled, name="stalled")
    thread.start()
    if stalls:
        assert read_clock.wait(10)
        time.sleep(STALL)
    else:
        thread.join(10)
    # Meanwhile another claim takes the second job: the budget admits it (on SQLite, the
    # first claim was admitted and this one is refused).
    other = claim.claim_batch(engine, selector, 1, process_id=9002)
    resume.set()
    thread.join(10)
    (first,) = stalled
    assert not isinstance(first, BaseException), first
    admitted, refused = (other, first) if stalls else (first, other)
    assert (len(admitted.jobs), len(refused.jobs), len(refused.deferrals)) == (1, 0, 1)

    # A claim of the third job once the refused one's slot has come: it must wait until one
    # per after the admission.
    slot = refused.deferrals[0].until
    time.sleep(max(0.0, seconds(slot - real_utcnow())))
    claim.claim_batch(engine, selector, 1, process_id=9003)

    admissions = [row.created_at for row in support.rows(engine, CLAIMED)]
    assert most_in_a_window(admissions, limit.per) <= limit.to, [
        seconds(at - admissions[0]) for at in admissions
    ]

"""One model for every guarantee at once (issue 19): a seeded driver runs real `flask solidq
work` processes on each backend over a random mix of every combination of the three controls
(:mod:`tests.jobs.model`), failures that ``retry_on`` retries, failures retried or discarded by
hand, an API's 429 (``RateLimited``) now and then, a queue paused and resumed, and workers
stopped (SIGTERM) or killed (SIGKILL) and replaced; then it checks what ran against what must hold:

* every call is accounted for exactly once: it ran, in one successful run of the job its
  enqueue named (a collecting job's calls all in that one run; a replacing job runs its last
  call, a discarding job its first), or its enqueue reported it discarded, replaced or dropped
  by a concurrency conflict, or it was held by a failed job the driver discarded; a job that
  vanished otherwise is only allowed where a ``discard`` concurrency limit may destroy it (a
  job on its first way to ready; never a coalesced job's retry);
* no half-open window of ``per`` holds more than ``to`` admissions of one budget (the claims'
  ``created_at``, the clock the limit admitted by);
* no job of a budget starts while a 429 heard by a job of it holds the budget, in any process
  (but for one whose start check came just before the 429 or the pause's commit);
* no concurrency key ever ran more than ``to`` jobs at once (each run's interval; a killed
  worker's runs end when it was killed);
* no job enqueued into a paused queue was claimed while it was paused;
* at most one open job per coalesce key, checked between the driver's actions and at the end;
* at the end nothing is ready, scheduled, claimed, blocked or failed, no coalesce key is held,
  and every semaphore has all its slots free;
* every batch the driver opened (a share of its enqueues go in one, with an ``on_finish``
  callback) finished with counters equal to its jobs' final states; each callback job ran
  once, after every run of the batch's jobs that began before it was enqueued had ended, and
  a batch finished again only after a job of it was retried by hand (reopening it); the last
  callback read the final counts.

CI runs one seed per backend; ``SOLIDQ_SOAK_SEEDS=N`` runs N random seeds, and
``SOLIDQ_MODEL_SEED=S`` replays seed S. A failure names its seed.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import pathlib
import random
import signal
import time
import typing as t

import pytest
import sqlalchemy as sa

from flask_solidq.models.tables import BATCHES
from flask_solidq.models.tables import BLOCKED
from flask_solidq.models.tables import CLAIMED
from flask_solidq.models.tables import COALESCE_KEYS
from flask_solidq.models.tables import COALESCED_CALLS
from flask_solidq.models.tables import FAILED
from flask_solidq.models.tables import JOBS
from flask_solidq.models.tables import READY
from flask_solidq.models.tables import SCHEDULED
from flask_solidq.models.tables import SEMAPHORES
from tests import support
from tests.jobs import model as model_jobs
from tests.jobs.model import MAX_CALLS
from tests.jobs.model import RUNS
from tests.jobs.model import Combination
from tests.support import concurrency as concurrency_support
from tests.support import runtime as runtime_support
from tests.support.runtime import WorkProcess

if t.TYPE_CHECKING:
    from flask import Flask

pytestmark = pytest.mark.processes


WORK_ARGS = ["--processes", "2", "--threads", "3", "--polling-interval", "0.05"]
WORK_KINDS = ["Dispatcher", "Supervisor(fork)", "Worker", "Worker"]
CONFIG: dict[str, t.Any] = {"SOLIDQ_DISPATCHERS": [{"polling_interval": 0.1}]}

KEYS = ("k0", "k1", "k2")
#: Actions the driver takes before it drains the queue.
ACTIONS = 70
#: Each seed draws FOCUS_SIZE combinations that get FOCUS_SHARE of its calls, so the calls
#: of one definition and key meet each other (and their retries) often enough.
FOCUS_SIZE = 4
FOCUS_SHARE = 0.8
#: How long the drain may take at most (a deadline, not an expectation).
DRAIN_TIMEOUT = 90.0

#: How long after a run ends its outcome may still be uncommitted: the worker's finisher
#: stores outcomes in batches within milliseconds; a second leaves room for a loaded machine.
OUTCOME_COMMIT = 1.0

#: The share of a rate-limited definition's calls whose first run hears 429.
SHARE_429 = 0.25
#: How long after a 429 a job of its budget may still start: one whose start check came
#: before the 429 (in its process) or before the pause's commit (in others), descheduled
#: for a moment on a loaded machine before its run records its start. This is longer than a
#: ``to=3, per=1`` claim charges ahead (83 ms), so this check holds the claims to the pause,
#: not the start check: with that switched off, seeds 1-6 still passed on all three databases.
#: tests/controls/rate_limit/test_rate_limit_pause_at_once.py and
#: tests/controls/rate_limit/test_rate_limit_429_processes.py hold the start check, on a frozen
#: clock and with a 50 ms call; here the pause meets every other feature.
START_AFTER_429 = 0.15

#: The seed CI runs on each backend.
CI_SEEDS = (1,)


def _seeds() -> list[int]:
    if os.environ.get("SOLIDQ_MODEL_SEED"):
        return [int(os.environ["SOLIDQ_MODEL_SEED"])]
    soak = int(os.environ.get("SOLIDQ_SOAK_SEEDS") or 0)
    if soak:
        return [random.SystemRandom().randrange(1, 1_000_000) for _ in range(soak)]
    return list(CI_SEEDS)


# What the driver did.


@dataclasses.dataclass
class Call:
    """One enqueue and what it reported."""

    combination: Combination
    key: str
    token: str
    mode: str
    status: str | None
    job_id: int | None
    #: ``time.time()`` as the enqueue began.
    enqueued_at: float
    #: The ``job_id`` (active job id) of the job holding the call: a deleted job's row id can
    #: come back (SQLite), this can't.
    owner: str | None = None
    #: The batch the call was enqueued into, if any.
    batch: int | None = None


@dataclasses.dataclass
class Kill:
    """A SIGKILL of a `flask solidq work` group: when, and which processes it ended."""

    at: float
    pids: set[int]


@dataclasses.dataclass
class Pause:
    queue: str
    start: float
    end: float = float("inf")


@dataclasses.dataclass
class Record:
    calls: list[Call] = dataclasses.field(default_factory=list)
    #: row id -> the active job id of the job that has it now.
    owners: dict[int, str] = dataclasses.field(default_factory=dict)
    discarded_jobs: set[str] = dataclasses.field(default_factory=set)
    retried_jobs: set[str] = dataclasses.field(default_factory=set)
    #: active job id -> how many times it was retried by hand.
    retries: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    kills: list[Kill] = dataclasses.field(default_factory=list)
    pauses: list[Pause] = dataclasses.field(default_factory=list)
    violations: list[str] = dataclasses.field(default_factory=list)

    def job_calls(self) -> dict[str, list[Call]]:
        """active job id -> the calls its enqueues named it for, in order."""
        found: dict[str, list[Call]] = collections.defaultdict(list)
        for call in self.calls:
            if call.owner is not None:
                found[call.owner].append(call)
        return found

    def add(self, calls: list[Call], active_job_ids: list[str]) -> None:
        """Note the calls of one enqueue: a call that stored a job owns it (and its row id);
        one that joined belongs to the job its row id names now."""
        for call, active_job_id in zip(calls, active_job_ids, strict=True):
            if call.job_id is not None and call.status in (None, "created"):
                call.owner = self.owners[call.job_id] = active_job_id
        for call in calls:
            if call.job_id is not None and call.owner is None:
                call.owner = self.owners[call.job_id]
        self.calls.extend(calls)


@dataclasses.dataclass
class Driver:
    app: Flask
    engine: sa.Engine
    database_url: str
    directory: pathlib.Path
    rng: random.Random
    record: Record = dataclasses.field(default_factory=Record)
    started: list[WorkProcess] = dataclasses.field(default_factory=list)
    stopped: list[WorkProcess] = dataclasses.field(default_factory=list)
    serial: int = 0
    focus: list[Combination] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.focus = self.rng.sample(model_jobs.COMBINATIONS, FOCUS_SIZE)

    # Processes.

    def start_work(self) -> WorkProcess:
        log = self.directory / f"work-{len(self.started)}.log"
        work = WorkProcess(
            self.database_url,
            ["work", *WORK_ARGS],
            config=CONFIG,
            log_path=log,
            app_module="tests.apps.model_app",
        )
        self.started.append(work)
        support.wait_until(
            lambda: concurrency_support.kinds_of(self.engine, work.pid) == WORK_KINDS,
            timeout=runtime_support.START_TIMEOUT,
        )
        return work

    def replace_work(self, work: WorkProcess, *, kill: bool) -> WorkProcess:
        """Start another `flask solidq work`, then stop ``work`` (SIGTERM) or kill it
        (SIGKILL to its whole group, noting which processes died and when)."""
        replacement = self.start_work()
        if kill:
            pids = concurrency_support.group_pids(work.pid)
            work.kill()
            self.record.kills.append(Kill(time.time(), pids))
        else:
            work.signal(signal.SIGTERM)
            self.stopped.append(work)
        return replacement

    def kill_all(self) -> None:
        for work in self.started:
            work.kill()

    # Actions.

    def enqueue(self, count: int, *, batch: bool = False) -> None:
        """``count`` calls of one definition; one is a plain ``perform_later``, more are one
        ``perform_all_later``; ``batch``: inside a batch of their own, whose ``on_finish`` is
        :func:`tests.jobs.model.batch_done`."""
        combination = self.rng.choice(
            self.focus if self.rng.random() < FOCUS_SHARE else model_jobs.COMBINATIONS
        )
        definition = model_jobs.DEFINITIONS[combination]
        wait = 0.0 if self.rng.random() < 0.8 else round(self.rng.uniform(0.1, 0.8), 2)
        drawn = []
        for _ in range(count):
            self.serial += 1
            # A batch's jobs fail more often: its counts and callbacks meet failures, retries
            # and reopenings in every seed.
            mode = self.rng.choices(
                ("ok", "flaky", "fail"), (60, 15, 25) if batch else (80, 12, 8)
            )[0]
            # A rate-limited call hears 429 now and then: its pause meets jobs charged ahead,
            # retries, coalescing, concurrency slots and batches.
            if combination.rate and self.rng.random() < SHARE_429:
                mode = "429"
            key = self.rng.choice(KEYS[:2] if self.rng.random() < 0.8 else KEYS)
            seconds = round(self.rng.uniform(0.01, 0.2 if self.rng.random() < 0.8 else 0.6), 3)
            drawn.append((key, f"t{self.serial}", mode, seconds))
        enqueued_at = time.time()
        with self.app.app_context(), contextlib.ExitStack() as stack:
            opened = (
                stack.enter_context(support.solidq.batch(on_finish=model_jobs.batch_done))
                if batch
                else None
            )
            target = definition.set(wait=wait) if wait else definition
            if count == 1:
                jobs = [target.perform_later(*drawn[0])]
            else:
                jobs = [
                    (definition.new(*args).set(wait=wait) if wait else definition.new(*args))
                    for args in drawn
                ]
                support.solidq.perform_all_later(jobs)
        calls = [
            Call(
                combination,
                args[0],
                args[1],
                args[2],
                job.coalesce_status.value if job.coalesce_status is not None else None,
                job.provider_job_id,
                enqueued_at,
                batch=opened.id if opened is not None else None,
            )
            for args, job in zip(drawn, jobs, strict=True)
        ]
        self.record.add(calls, [job.job_id for job in jobs])

    def toggle_pause(self) -> None:
        queue = self.rng.choice(model_jobs.QUEUES)
        open_pauses = [pause for pause in self.record.pauses if pause.end == float("inf")]
        with self.app.app_context():
            for pause in open_pauses:
                if pause.queue == queue:
                    pause.end = time.time()
                    support.solidq.resume(queue)
                    return
            support.solidq.pause(queue)
        self.record.pauses.append(Pause(queue, time.time()))

    def resume_all(self) -> None:
        with self.app.app_context():
            for pause in self.record.pauses:
                if pause.end == float("inf"):
                    pause.end = time.time()
                    support.solidq.resume(pause.queue)

    def act_on_failed(self, retry_share: float) -> None:
        """Retry (with ``retry_share``'s chance) or discard each failed job, by hand."""
        failed = sorted(row.job_id for row in support.rows(self.engine, FAILED))
        with self.app.app_context():
            for job_id in failed:
                owner = self.record.owners[job_id]
                if self.rng.random() < retry_share:
                    if support.solidq.retry(job_id):
                        self.record.retried_jobs.add(owner)
                        self.record.retries[owner] += 1
                elif support.solidq.discard(job_id):
                    self.record.discarded_jobs.add(owner)

    def check_open_jobs(self) -> None:
        """At most one open job per coalesce key: among the waiting jobs (ready, scheduled,
        blocked) that never started, weren't retried by hand and, collecting, aren't full."""
        waiting = sa.union(
            sa.select(READY.c.job_id), sa.select(SCHEDULED.c.job_id), sa.select(BLOCKED.c.job_id)
        ).subquery()
        query = sa.select(
            JOBS.c.active_job_id,
            JOBS.c.batch_id,
            sa.exists().where(RUNS.c.active_job_id == JOBS.c.active_job_id).label("ran"),
            sa.select(sa.func.count())
            .select_from(COALESCED_CALLS)
            .where(COALESCED_CALLS.c.job_id == JOBS.c.id)
            .scalar_subquery()
            .label("calls"),
        ).select_from(waiting.join(JOBS, JOBS.c.id == waiting.c.job_id))
        with self.engine.connect() as connection:
            found = list(connection.execute(query))
        owners = {job_id: calls[0] for job_id, calls in self.record.job_calls().items()}
        # Keys are scoped to their batch.
        open_jobs: dict[tuple[str, str, int | None], list[str]] = collections.defaultdict(list)
        for row in found:
            call = owners.get(row.active_job_id)
            if call is None or row.ran or row.active_job_id in self.record.retried_jobs:
                continue
            coalescing = call.combination.coalesce
            if coalescing is None or (coalescing == "collect" and row.calls >= MAX_CALLS):
                continue
            open_jobs[(call.combination.name, call.key, row.batch_id)].append(row.active_job_id)
        for (name, key, _batch), job_ids in open_jobs.items():
            if len(job_ids) > 1:
                self.record.violations.append(
                    f"coalesce key {name}/{key} has {len(job_ids)} open jobs: {job_ids}"
                )

    # The run.

    def drive(self, work: WorkProcess) -> WorkProcess:
        """Take the random actions, restarting the workers a third and two thirds of the way
        (the second time, maybe with a SIGKILL)."""
        restarts = {ACTIONS // 3: False, 2 * ACTIONS // 3: self.rng.random() < 0.5}
        for step in range(ACTIONS):
            if step in restarts:
                work = self.replace_work(work, kill=restarts[step])
            action = self.rng.choices(
                ("single", "bulk", "batch", "pause", "failed", "check", "sleep"),
                (12, 3, 3, 2, 2, 2, 4),
            )[0]
            if action == "single":
                self.enqueue(1)
            elif action == "batch":
                self.enqueue(self.rng.randint(1, 4), batch=True)
            elif action == "bulk":
                self.enqueue(self.rng.randint(2, 4))
            elif action == "pause":
                self.toggle_pause()
            elif action == "failed":
                self.act_on_failed(retry_share=0.6)
            elif action == "check":
                self.check_open_jobs()
            else:
                time.sleep(self.rng.uniform(0.05, 0.3))
        return work

    def drain(self) -> None:
        """Resume every queue; wait until nothing is waiting or running, retrying or
        discarding what failed, until nothing failed either."""
        self.resume_all()
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while True:
            busy = sum(
                support.count(self.engine, table) for table in (READY, SCHEDULED, CLAIMED, BLOCKED)
            )
            failed = support.count(self.engine, FAILED)
            if not busy and not failed:
                return
            if failed:
                self.act_on_failed(retry_share=0.7)
            if time.monotonic() > deadline:
                raise AssertionError(f"the queue didn't drain: {self.leftovers()}")
            time.sleep(0.1)

    def leftovers(self) -> dict[str, list[int]]:
        return {
            table.name: [row.job_id for row in support.rows(self.engine, table)]
            for table in (READY, SCHEDULED, CLAIMED, BLOCKED, FAILED)
        }


# The checks.


class Run(t.NamedTuple):
    job_name: str
    job_id: int
    owner: str
    tokens: list[str]
    budget_key: str | None
    concurrency_key: str | None
    admitted_at: float | None
    started: float
    finished: float | None
    outcome: str
    pid: int


def read_runs(engine: sa.Engine) -> list[Run]:
    return [
        Run(
            row.job_name,
            row.job_id,
            row.active_job_id,
            json.loads(row.tokens),
            row.budget_key,
            row.concurrency_key,
            row.admitted_at.timestamp() if row.admitted_at is not None else None,
            row.started,
            row.finished,
            row.outcome,
            row.pid,
        )
        for row in support.rows(engine, RUNS)
    ]


def check_calls(record: Record, runs: list[Run], jobs: dict[str, t.Any]) -> list[str]:
    """Every call accounted for exactly once (see the module's docstring)."""
    problems: list[str] = []
    for call in record.calls:
        if call.job_id is None and call.combination.concurrency != "discard":
            problems.append(f"call {call.token} ({call.combination.name}) stored nowhere")
    runs_of: dict[str, list[Run]] = collections.defaultdict(list)
    for run in runs:
        runs_of[run.owner].append(run)
    calls_of = record.job_calls()
    unknown = set(runs_of) - set(calls_of)
    if unknown:
        problems.append(f"runs of jobs no call named: {sorted(unknown)}")
    for owner, calls in calls_of.items():
        problems.extend(check_job(record, owner, calls, runs_of.get(owner, []), jobs))
    return problems


def check_job(
    record: Record, owner: str, calls: list[Call], runs: list[Run], jobs: dict[str, t.Any]
) -> list[str]:
    combination = calls[0].combination
    tokens = [call.token for call in calls]
    label = f"job {calls[0].job_id} {owner} ({combination.name}, calls {tokens})"
    foreign = [run.tokens for run in runs if not set(run.tokens) <= set(tokens)]
    if foreign:
        return [f"{label} ran calls that aren't its own: {foreign}"]
    done = [run for run in runs if run.outcome == "ok"]
    if owner in record.discarded_jobs:
        return [f"{label} was discarded by hand after it ran"] if done else []
    row = jobs.get(owner)
    if row is None:
        if done:
            return [f"{label} ran, then its row vanished"]
        if combination.concurrency == "discard" and (combination.coalesce is None or not runs):
            return []  # destroyed by its discard concurrency limit on its way to ready
        return [f"{label} vanished without a trace after {len(runs)} runs"]
    # A worker killed between a run's end and the commit of its outcome leaves the run to
    # run again (its claim fails or is released): at-least-once.
    lasting = [run for run in done if not outcome_maybe_lost(record, run)]
    if lasting:
        done = lasting
    if row.finished_at is None or not done or len(lasting) > 1:
        return [f"{label} finished_at={row.finished_at}, runs {runs}, kills {record.kills}"]
    ran = done[-1].tokens
    expected = expected_tokens(combination, calls)
    if sorted(ran) != sorted(expected):
        return [f"{label} ran {ran}, expected {expected}"]
    return []


def expected_tokens(combination: Combination, calls: list[Call]) -> list[str]:
    """The calls a job's successful run must hold."""
    kept = [call for call in calls if call.status != "discarded"]
    if combination.coalesce == "collect":
        return [call.token for call in calls]
    if combination.coalesce == "replace":
        return [kept[-1].token] if kept else []
    return [call.token for call in calls if call.status in (None, "created")]


def check_rates(runs: list[Run]) -> list[str]:
    """No window of ``per`` with more than ``to`` admissions of one budget."""
    problems = []
    admissions: dict[str, list[float]] = collections.defaultdict(list)
    for run in runs:
        if run.budget_key is not None and run.admitted_at is not None:
            admissions[run.budget_key].append(run.admitted_at)
    for key, times in admissions.items():
        times.sort()
        for index in range(len(times) - model_jobs.RATE_TO):
            if times[index + model_jobs.RATE_TO] - times[index] < model_jobs.RATE_PER:
                window = times[index : index + model_jobs.RATE_TO + 1]
                problems.append(f"budget {key}: {len(window)} admissions within per: {window}")
                break
    return problems


def check_429s(runs: list[Run]) -> list[str]:
    """No job of a budget starts while a 429 heard by one of its jobs holds it (from
    :data:`START_AFTER_429` after the 429 to the end of its ``Retry-After``), in any
    process."""
    problems = []
    for told in runs:
        if told.outcome != "rate_limited" or told.finished is None:
            continue
        opens, closes = told.finished + START_AFTER_429, told.finished + model_jobs.RETRY_AFTER
        problems.extend(
            f"budget {told.budget_key}: {run} started {run.started - told.finished:.3f}s after"
            f" the 429 of {told}"
            for run in runs
            if run.budget_key == told.budget_key and opens < run.started < closes
        )
    return problems


def check_concurrency(record: Record, runs: list[Run]) -> list[str]:
    """Never more than ``to`` runs of one concurrency key at once."""
    limits = {combination.name: combination for combination in model_jobs.COMBINATIONS}
    intervals: dict[tuple[str, str], list[concurrency_support.Interval]] = collections.defaultdict(
        list
    )
    for run in runs:
        if run.concurrency_key is None:
            continue
        finished = run.finished
        if finished is None:
            finished = killed_at(record, run)
        intervals[(run.job_name, run.concurrency_key)].append(
            concurrency_support.Interval(run.concurrency_key, "", run.pid, run.started, finished)
        )
    problems = []
    for (name, key), found in intervals.items():
        most = concurrency_support.most_at_once(found)
        if most > limits[name].concurrency_to:
            problems.append(
                f"{key}: {most} runs at once, limit {limits[name].concurrency_to}: {found}"
            )
    return problems


def killed_at(record: Record, run: Run) -> float | None:
    """When the run's process was killed, if it was."""
    kills = [kill.at for kill in record.kills if run.pid in kill.pids and kill.at > run.started]
    return min(kills, default=None)


def outcome_maybe_lost(record: Record, run: Run) -> bool:
    """Whether the run's process was killed so soon after the run ended
    (:data:`OUTCOME_COMMIT`) that its outcome may not have been stored."""
    return run.finished is not None and any(
        run.pid in kill.pids and 0 <= kill.at - run.finished < OUTCOME_COMMIT
        for kill in record.kills
    )


def summary(record: Record, runs: list[Run]) -> str:
    """What a seed exercised, for the output of a run (``-s``) or a failure."""
    statuses = collections.Counter(str(call.status) for call in record.calls)
    outcomes = collections.Counter(run.outcome for run in runs)
    return (
        f"{len(record.calls)} calls {dict(statuses)}, {len(runs)} runs {dict(outcomes)},"
        f" retried by hand {len(record.retried_jobs)}, discarded by hand"
        f" {len(record.discarded_jobs)}, pauses {len(record.pauses)}, kills {len(record.kills)},"
        f" batches {len({call.batch for call in record.calls} - {None})}"
    )


def check_pauses(record: Record, runs: list[Run]) -> list[str]:
    """No job of a paused queue claimed while it was paused, among the jobs enqueued after the
    pause committed: a claim whose select began before the pause may commit after it (its
    ``created_at`` is read after the select), but it can't have seen a job enqueued later."""
    queue_of = {combination.name: combination.queue for combination in model_jobs.COMBINATIONS}
    first_enqueued = {
        owner: min(call.enqueued_at for call in calls)
        for owner, calls in record.job_calls().items()
    }
    return [
        f"{run.job_name} job {run.job_id} (enqueued at {first_enqueued[run.owner]}) claimed"
        f" at {run.admitted_at} while {pause} was paused"
        for run in runs
        for pause in record.pauses
        if run.admitted_at is not None
        and queue_of[run.job_name] == pause.queue
        and first_enqueued.get(run.owner, 0.0) > pause.start
        and pause.start < run.admitted_at < pause.end
    ]


def check_batches(
    engine: sa.Engine, record: Record, runs: list[Run], jobs: dict[str, t.Any]
) -> list[str]:
    """Every batch finished, counted as its jobs ended, its callbacks run once each and only
    after its jobs (see the module's docstring)."""
    problems: list[str] = []
    rows = {row.id: row for row in support.rows(engine, BATCHES)}
    calls_of: dict[int, list[Call]] = collections.defaultdict(list)
    for call in record.calls:
        if call.batch is not None:
            calls_of[call.batch].append(call)
    callbacks: dict[int, list[Run]] = collections.defaultdict(list)
    runs_of: dict[str, list[Run]] = collections.defaultdict(list)
    for run in runs:
        if run.job_name == model_jobs.BATCH_DONE:
            callbacks[int(run.tokens[0].removeprefix("batch:"))].append(run)
        else:
            runs_of[run.owner].append(run)
    for batch_id, calls in calls_of.items():
        row = rows[batch_id]
        label = f"batch {batch_id} ({[call.token for call in calls]})"
        # A call that stored a job (even one a discard limit destroyed at once) adds one.
        created = [call for call in calls if call.status in (None, "created")]
        owners = {call.owner for call in created if call.owner is not None}
        failed = len(owners & record.discarded_jobs)
        expected = (len(created), len(created) - failed, failed, 0)
        counted = (row.total_jobs, row.completed_jobs, row.failed_jobs, row.pending_jobs)
        if counted != expected or row.finished_at is None:
            problems.append(f"{label} counts {counted}, expected {expected}; {row}")
            continue
        by_job: dict[str, list[Run]] = collections.defaultdict(list)
        for run in callbacks[batch_id]:
            by_job[run.owner].append(run)
        reopened = sum(record.retries[owner] for owner in owners)
        if not 1 <= len(by_job) <= 1 + reopened:
            problems.append(f"{label} ran {len(by_job)} callback jobs, retried {reopened}")
            continue
        for owner, done in by_job.items():
            lasting = [run for run in done if not outcome_maybe_lost(record, run)]
            if len(lasting or done) != 1:
                problems.append(f"{label}'s callback {owner} ran {len(done)} times: {done}")
            enqueued = jobs[owner].created_at.timestamp()
            for run in (run for owner_ in owners for run in runs_of[owner_]):
                end = run.finished or killed_at(record, run) or float("inf")
                if run.started < enqueued < end:
                    problems.append(f"{label} finished at {enqueued} while {run} ran")
        last = max(callbacks[batch_id], key=lambda run: run.started)
        if last.tokens[1:] != [str(count) for count in expected[:3]]:
            problems.append(f"{label}'s last callback read {last.tokens[1:]}, not {expected}")
    return problems


def check_end_state(engine: sa.Engine, record: Record) -> list[str]:
    """Nothing waiting, running or failed; no coalesce key held; every slot free, unless a
    worker was killed: one killed between a commit and the slot's release after it (a job
    deferred by its rate limit gives its slot back after the claim commits) leaves the slot
    taken until its lease ends, as the README's "Dead holders" says."""
    problems = []
    for table in (READY, SCHEDULED, CLAIMED, BLOCKED, FAILED, COALESCE_KEYS):
        left = support.rows(engine, table)
        if left:
            problems.append(f"{table.name} still holds {[row.job_id for row in left]}")
    if record.kills:
        return problems
    limits = {combination.name: combination for combination in model_jobs.COMBINATIONS}
    for row in support.rows(engine, SEMAPHORES):
        name = row.key.rsplit("/", 1)[0]
        if name in limits and row.value != limits[name].concurrency_to:
            problems.append(f"semaphore {row.key} has {row.value} free slots at the end")
    return problems


# The test.


@pytest.fixture
def model_runs(database_url: str) -> t.Iterator[sa.Table]:
    """``solidq_test_model_runs``, made afresh (its columns may have changed since an earlier
    run left it), emptied after the test."""
    engine = sa.create_engine(database_url)
    RUNS.drop(engine, checkfirst=True)
    engine.dispose()
    with runtime_support.emptied_table(database_url, RUNS) as table:
        yield table


@pytest.mark.parametrize("seed", _seeds())
def test_every_guarantee_holds_over_a_random_mix(
    seed: int, app: Flask, database_url: str, model_runs: sa.Table, tmp_path: pathlib.Path
) -> None:
    with app.app_context():
        engine = t.cast(sa.Engine, app.extensions["solidq"].engine)
    driver = Driver(app, engine, database_url, tmp_path, random.Random(seed))
    replay = f"seed {seed} (replay: SOLIDQ_MODEL_SEED={seed})"
    try:
        work = driver.drive(driver.start_work())
        driver.drain()
        work.signal(signal.SIGTERM)
        driver.stopped.append(work)
        for stopped in driver.stopped:
            assert stopped.wait(30) == 0, stopped.output()
        record = driver.record
        every_run = read_runs(engine)
        runs = [run for run in every_run if run.job_name != model_jobs.BATCH_DONE]
        print(f"{replay}: {summary(record, every_run)}")
        jobs = {row.active_job_id: row for row in support.rows(engine, JOBS)}
        problems = [
            *record.violations,
            *check_calls(record, runs, jobs),
            *check_rates(runs),
            *check_429s(runs),
            *check_concurrency(record, runs),
            *check_pauses(record, runs),
            *check_batches(engine, record, every_run, jobs),
            *check_end_state(engine, record),
        ]
        assert not problems, "\n" + "\n".join(problems)
    except AssertionError as error:
        raise AssertionError(f"{replay}: {error}") from None
    finally:
        driver.kill_all()

"""Helpers of the concurrency-control tests: reading semaphores and blocked jobs, the table of
run intervals and overlap checks, `flask solidq work` processes on
``tests.apps.concurrency_app``, and the body of forked enqueuing processes."""

from __future__ import annotations

import os
import pathlib
import signal
import traceback
import typing as t

import sqlalchemy as sa

from flask_solidq import models
from tests import support
from tests.jobs import concurrency as concurrency_jobs
from tests.jobs.concurrency import RUNS
from tests.support import runtime as runtime_support

JOBS = t.cast(sa.Table, models.JobRecord.__table__)
READY = t.cast(sa.Table, models.ReadyExecution.__table__)
SCHEDULED = t.cast(sa.Table, models.ScheduledExecution.__table__)
CLAIMED = t.cast(sa.Table, models.ClaimedExecution.__table__)
BLOCKED = t.cast(sa.Table, models.BlockedExecution.__table__)
FAILED = t.cast(sa.Table, models.FailedExecution.__table__)
SEMAPHORES = t.cast(sa.Table, models.Semaphore.__table__)
PROCESSES = t.cast(sa.Table, models.ProcessRecord.__table__)


# The queue's state, by concurrency key.


def semaphore(engine: sa.Engine, key: str) -> sa.Row[t.Any] | None:
    """The semaphore row of ``key``, or None."""
    found = support.rows(engine, SEMAPHORES, SEMAPHORES.c.key == key)
    return found[0] if found else None


def semaphore_values(engine: sa.Engine) -> dict[str, int]:
    """key -> free slots, for every semaphore."""
    return {row.key: row.value for row in support.rows(engine, SEMAPHORES)}


def ready_ids(engine: sa.Engine) -> list[int]:
    """The job ids of the ready executions, in job id order."""
    return sorted(row.job_id for row in support.rows(engine, READY))


def blocked_ids(engine: sa.Engine) -> list[int]:
    """The job ids of the blocked executions, in job id order."""
    return sorted(row.job_id for row in support.rows(engine, BLOCKED))


def states_by_key(engine: sa.Engine) -> dict[str, dict[str, int]]:
    """concurrency key -> {"ready": n, "blocked": n, "scheduled": n, "claimed": n}."""
    result: dict[str, dict[str, int]] = {}
    with engine.connect() as connection:
        for state, table in (
            ("ready", READY),
            ("blocked", BLOCKED),
            ("scheduled", SCHEDULED),
            ("claimed", CLAIMED),
        ):
            query = (
                sa.select(JOBS.c.concurrency_key, sa.func.count())
                .join(table, table.c.job_id == JOBS.c.id)
                .group_by(JOBS.c.concurrency_key)
            )
            for key, size in connection.execute(query):
                result.setdefault(key, {"ready": 0, "blocked": 0, "scheduled": 0, "claimed": 0})
                result[key][state] = size
    return result


def job_state(engine: sa.Engine, job_id: int) -> str:
    """Where a job is: "ready", "blocked", "scheduled", "claimed", "failed", "finished",
    "gone" (no row) or "nowhere"."""
    for state, table in (
        ("ready", READY),
        ("blocked", BLOCKED),
        ("scheduled", SCHEDULED),
        ("claimed", CLAIMED),
        ("failed", FAILED),
    ):
        if support.rows(engine, table, table.c.job_id == job_id):
            return state
    jobs = support.rows(engine, JOBS, JOBS.c.id == job_id)
    if not jobs:
        return "gone"
    return "finished" if jobs[0].finished_at is not None else "nowhere"


# Run intervals.


class Interval(t.NamedTuple):
    key: str
    value: str
    pid: int
    started: float
    finished: float | None


def create_runs_table(database_url: str) -> None:
    """Create ``solidq_test_concurrency_runs`` in ``database_url``'s database if missing."""
    engine = sa.create_engine(database_url)
    RUNS.create(engine, checkfirst=True)
    engine.dispose()


def runs(engine: sa.Engine, job_name: str) -> list[Interval]:
    """The intervals of ``job_name``'s runs, in the order they started."""
    rows = support.rows(engine, RUNS, RUNS.c.job_name == job_name)
    return sorted(
        (Interval(row.key, row.value, row.pid, row.started, row.finished) for row in rows),
        key=lambda run: run.started,
    )


def overlap(first: Interval, second: Interval) -> bool:
    """Whether two runs overlapped: each started before the other ended (a run still going
    ends never)."""
    first_end = first.finished if first.finished is not None else float("inf")
    second_end = second.finished if second.finished is not None else float("inf")
    return first.started < second_end and second.started < first_end


def overlapping_pairs(runs: t.Sequence[Interval]) -> list[tuple[Interval, Interval]]:
    """Every pair of runs that overlapped."""
    return [
        (first, second)
        for index, first in enumerate(runs)
        for second in runs[index + 1 :]
        if overlap(first, second)
    ]


def most_at_once(runs: t.Sequence[Interval]) -> int:
    """The largest number of runs that were going at one moment."""
    events = sorted(
        [(run.started, 1) for run in runs]
        + [(run.finished if run.finished is not None else float("inf"), -1) for run in runs],
        # An end and a start at the same instant don't overlap: count the end first.
        key=lambda event: (event[0], event[1]),
    )
    going = most = 0
    for _, change in events:
        going += change
        most = max(most, going)
    return most


# `flask solidq work` on tests.apps.concurrency_app.


class Work(runtime_support.WorkProcess):
    """A running ``flask solidq work`` on the concurrency app, in a session of its own (so
    the whole group, forked children included, can be killed)."""

    def __init__(
        self,
        database_url: str,
        args: t.Sequence[str],
        *,
        config: dict[str, t.Any] | None,
        log_path: pathlib.Path,
    ) -> None:
        super().__init__(
            database_url,
            ["work", *args],
            config=config,
            log_path=log_path,
            app_module="tests.apps.concurrency_app",
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM the supervisor and wait for it; return its exit code."""
        self.signal(signal.SIGTERM)
        return self.wait(timeout)


def kinds_of(engine: sa.Engine, supervisor_pid: int) -> list[str]:
    """The kinds of the registered processes of the supervisor ``supervisor_pid`` (itself
    included), sorted."""
    rows = support.rows(engine, PROCESSES)
    supervisors = {row.id for row in rows if row.pid == supervisor_pid}
    return sorted(
        row.kind for row in rows if row.id in supervisors or row.supervisor_id in supervisors
    )


def group_pids(leader: int) -> set[int]:
    """The pids of the running processes of ``leader``'s process group (Linux /proc)."""
    pids = set()
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, pgrp.
        if int(fields[2]) == leader and fields[0] != "Z":
            pids.add(int(entry.name))
    return pids


# Enqueuing from forked processes.


def enqueue_in_child(url: str, keys: list[str], count: int, go: t.Any, results: t.Any) -> None:
    """The body of a forked enqueuing process: build an app of its own (nothing of the
    parent's connections is used), wait for ``go``, enqueue ``count`` ``limited`` jobs one by
    one over ``keys``, then one ``perform_all_later`` of every key in reverse order. Puts
    "done" or the traceback on ``results``."""
    try:
        app = support.create_app(url)
        with app.app_context():
            app.extensions["solidq"].check_tables()
            if not go.wait(30):
                raise TimeoutError("never told to go")
            for index in range(count):
                concurrency_jobs.limited.perform_later(keys[index % len(keys)], os.getpid())
            support.solidq.perform_all_later(
                [concurrency_jobs.limited.new(key, "bulk") for key in reversed(keys)]
            )
        results.put("done")
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put(traceback.format_exc())
